from typing import Any

from django import template

from taskformat.counter_rules import traffic_ratio

register = template.Library()


@register.filter
def traffic(counters: Any) -> str:
    """`×1.12 of minimum` from a workload's counters; blank when they hold no traffic."""
    ratio = traffic_ratio(counters)
    return "" if ratio is None else f"traffic ×{ratio:.2f} of minimum"


@register.filter
def score(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


@register.filter
def signed(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:+.{digits}f}"


@register.filter
def rate(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


@register.filter
def get(mapping: Any, key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None

from typing import Any

from django import template

register = template.Library()


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    """`mapping[key]` in a template (a dict keyed by a variable)."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def speedup(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


@register.filter
def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


@register.filter
def signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f}"


@register.filter
def signed_percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f} pt"

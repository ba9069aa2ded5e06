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


# Units, one way everywhere: a rate (0–1) and a 0–100 score are shown in %, their
# differences in percentage points (pt); speeds with ×; a Performance Score plain.
_RATES = frozenset({"correctness_rate"})
_PERCENT_SCORES = ("implementation", "discovery")


def _unit(key: str) -> str:
    if key in _RATES:
        return "rate"
    if key.startswith(_PERCENT_SCORES):
        return "score100"
    if key == "geomean_speedup":
        return "times"
    if key == "turns":
        return "count"
    return "plain"


def _format(value: float, key: str, *, sign: bool = False) -> str:
    unit = _unit(key)
    plus = "+" if sign else ""
    if unit in ("rate", "score100"):
        number = 100 * value if unit == "rate" else value
        return f"{number:{plus}.1f} pt" if sign else f"{number:.1f} %"
    if unit == "count":
        return f"{value:{plus}.0f}"
    if unit == "times" and not sign:
        return f"{value:.2f}×"
    return f"{value:{plus}.2f}"


@register.filter
def unit(value: float | None, key: str) -> str:
    """A score in its unit (`0.385|unit:"correctness_rate"` → `38.5 %`); — when None."""
    return "—" if value is None else _format(value, key)


@register.filter
def uplift(value: float | None, key: str) -> str:
    """A difference of scores in its unit (a rate's in points: `+3.8 pt`)."""
    return "—" if value is None else _format(value, key, sign=True)


@register.filter
def interval(value: list[float] | None, key: str) -> str:
    """`[low, high]` of a score in its unit, or — without an interval."""
    if not value:
        return "—"
    low, high = value
    return f"[{_format(low, key)}, {_format(high, key)}]"


@register.filter
def uplift_interval(value: list[float] | None, key: str) -> str:
    if not value:
        return "—"
    low, high = value
    return f"[{_format(low, key, sign=True)}, {_format(high, key, sign=True)}]"


@register.filter
def ci_of(row: Any, key: str) -> Any:
    """`row[key + "_ci"]` (the interval of a score in a table row)."""
    return row.get(f"{key}_ci") if isinstance(row, dict) else None


@register.filter
def pick(row: Any, key: str) -> Any:
    """A pair row's value without guidance for a score."""
    return row.get(f"{key}_without") if isinstance(row, dict) else None


@register.filter
def pick_with(row: Any, key: str) -> Any:
    return row.get(f"{key}_with") if isinstance(row, dict) else None


@register.filter
def pick_uplift(row: Any, key: str) -> Any:
    return row.get(f"{key}_uplift") if isinstance(row, dict) else None


@register.filter
def pick_ci(row: Any, key: str) -> Any:
    return row.get(f"uplift_{key}_ci") if isinstance(row, dict) else None

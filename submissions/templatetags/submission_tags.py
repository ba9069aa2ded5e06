from django import template
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

register = template.Library()

# Class-based like the catalog's code (styles in static/css/pygments.css), with line
# numbers because compile errors are reported by line. pygments escapes the code.
_FORMATTER = HtmlFormatter(cssclass="highlight", linenos="table", wrapcode=True)


@register.filter
def python_highlight(source: str) -> SafeString:
    return mark_safe(highlight(source, PythonLexer(), _FORMATTER))


@register.filter
def tail(text: str, limit: int = 20000) -> str:
    """The last `limit` characters (where errors are), marked when cut; escape it in templates."""
    if len(text) <= limit:
        return text
    return f"… [{len(text) - limit:,} earlier characters not shown]\n{text[-limit:]}"


@register.filter
def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


@register.filter
def sig(value: float | None) -> str:
    """Three significant digits, for error magnitudes that span many decades."""
    return "—" if value is None else f"{value:.3g}"


@register.filter
def plain(value: object) -> str:
    """An environment value as readable text: nested mappings as `key value; …`, lists by commas.

    Keys are sorted, as PostgreSQL's jsonb does not keep their order; a
    min/median/max triple reads as a range. Escape it in templates (Django
    does by default).
    """
    if isinstance(value, dict) and set(value) == {"min", "median", "max"}:
        return f"{value['min']}–{value['max']} (median {value['median']})"
    if isinstance(value, dict):
        return "; ".join(f"{key} {plain(value[key])}" for key in sorted(value)) or "—"
    if isinstance(value, list | tuple):
        return ", ".join(plain(item) for item in value) or "—"
    return str(value)

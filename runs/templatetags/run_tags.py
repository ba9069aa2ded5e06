"""Template filters of the run and trace pages."""

import json
from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer

from runformat.jsonsafe import json_loads_checked
from runs.scanners import redact_text
from runs.traces import PAGE_LINES
from task_catalog.rendering import PYGMENTS_CSS_CLASS, code_highlight

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    """Tool arguments as indented JSON (a string argument is shown as it came)."""
    if isinstance(value, str):
        try:
            value = json_loads_checked(value)
        except ValueError:  # not JSON, or JSON that is not safe to show (JsonRefused)
            return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@register.filter
def first_line(value: Any) -> str:
    text = str(value or "").strip()
    return text.splitlines()[0] if text else ""


@register.filter
def diff_highlight(diff: str) -> SafeString:
    formatter = HtmlFormatter(cssclass=PYGMENTS_CSS_CLASS)
    return mark_safe(highlight(diff, DiffLexer(), formatter))


@register.filter
def python_highlight(source: str) -> SafeString:
    return code_highlight(source)


@register.filter
def speedup(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


@register.filter
def duration_words(seconds: float | None) -> str:
    """An estimate in words: `under a minute`, `about 9 min`, `about 2 h 5 min`."""
    if seconds is None:
        return "—"
    minutes = round(max(0.0, float(seconds)) / 60)
    if minutes < 1:
        return "under a minute"
    if minutes < 90:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60} min"


@register.filter
def seconds_short(seconds: float | None) -> str:
    """A measured time: `23 s` under two minutes, else `4 min`."""
    if seconds is None:
        return "—"
    value = max(0.0, float(seconds))
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.0f} min"


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key, "")


@register.filter
def page_of(line: int) -> int:
    """The trace page (0-based) that holds `line`: pages are PAGE_LINES lines each."""
    return (int(line) - 1) // PAGE_LINES


@register.filter
def guidance_of(run: Any, slug: str) -> dict[str, Any] | None:
    """The guidance version the run recorded for a task (`Run.guidance_versions`)."""
    versions = getattr(run, "guidance_versions", None) or {}
    entry = versions.get(slug)
    return entry if isinstance(entry, dict) else None


@register.filter
def redact(value: Any) -> str:
    """The text with its secrets replaced (runs.scanners), for what the public reads."""
    return redact_text(str(value))[0]

"""Markdown and source code to safe HTML: every page and the admin go through here."""

from __future__ import annotations

import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

PYGMENTS_CSS_CLASS = "highlight"
_MARKDOWN_EXTENSIONS = ["fenced_code", "tables", "sane_lists", "codehilite"]
_MARKDOWN_CONFIG = {"codehilite": {"css_class": PYGMENTS_CSS_CLASS, "guess_lang": False}}
# Class attributes carry pygments' token styles; nothing else beyond nh3's defaults.
SAFE_ATTRIBUTES = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()},
    "div": {"class"},
    "span": {"class"},
    "code": {"class"},
    "pre": {"class"},
}


def _image_source_dropped(tag: str, attribute: str, value: str) -> str | None:
    return None if tag == "img" and attribute == "src" else value


def markdown_render(text: str, *, images: bool = True) -> SafeString:
    """Render untrusted markdown; nh3 strips scripts, event handlers and unknown tags.
    With `images` false an image keeps its alt text but loses its source, so a page
    showing an outsider's text makes no request on the viewer's behalf."""
    html = markdown.markdown(
        text or "", extensions=_MARKDOWN_EXTENSIONS, extension_configs=_MARKDOWN_CONFIG
    )
    attribute_filter = None if images else _image_source_dropped
    return mark_safe(nh3.clean(html, attributes=SAFE_ATTRIBUTES, attribute_filter=attribute_filter))


def code_highlight(source: str) -> SafeString:
    """Python source as class-based pygments HTML (styles in static/css/pygments.css)."""
    formatter = HtmlFormatter(cssclass=PYGMENTS_CSS_CLASS, linenos=False)
    return mark_safe(highlight(source or "", PythonLexer(), formatter))


def pygments_css() -> str:
    return HtmlFormatter(cssclass=PYGMENTS_CSS_CLASS).get_style_defs(f".{PYGMENTS_CSS_CLASS}")

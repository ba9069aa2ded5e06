"""The project's own documents (docs/*.md) as pages of the site.

Researchers read the evaluation protocol and the measured figures where they
read the results, and the page is always the document the code ships with.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import markdown
import nh3
from django.conf import settings
from django.utils.safestring import SafeString, mark_safe

from task_catalog.rendering import PYGMENTS_CSS_CLASS, SAFE_ATTRIBUTES

# slug -> (file under docs/, title in the navigation): every docs/*.md, in the order a
# reader needs them (tests/leaderboard/test_documents.py holds the list to the folder).
# docs/lab/ is the lab notebook and is never served.
DOCUMENTS = {
    "evaluator": ("evaluator.md", "How submissions are evaluated"),
    "exploits": ("exploits.md", "Exploits and their verdicts"),
    "scores": ("scores.md", "How runs are scored"),
    "run-format": ("run-format.md", "Run bundles and agent traces"),
    "client": ("client.md", "The d2k client"),
    "task-format": ("task-format.md", "Task package format"),
    "baselines": ("baselines.md", "Expert baselines on the GPU"),
    "benchmarks": ("benchmarks.md", "Measured on the GPU"),
    "architecture": ("architecture.md", "How the portal is built"),
    "deploy": ("deploy.md", "Deploying the portal"),
    "operations": ("operations.md", "Operations: evaluations as durable jobs"),
    "settings": ("settings.md", "Settings"),
    "security": ("security.md", "Security: the threat model"),
}
_EXTENSIONS = ["fenced_code", "tables", "sane_lists", "toc", "codehilite"]
_CONFIG = {
    "codehilite": {"css_class": PYGMENTS_CSS_CLASS, "guess_lang": False},
    "toc": {"toc_depth": "1-3"},
}
# What untrusted markdown may carry, and the anchors of the headings.
_ATTRIBUTES = {**SAFE_ATTRIBUTES, **{f"h{level}": {"id"} for level in range(1, 7)}}


class DocumentNotFound(LookupError):
    pass


@dataclass(frozen=True)
class TocEntry:
    anchor: str
    title: str
    children: tuple[TocEntry, ...] = ()


@dataclass(frozen=True)
class Document:
    slug: str
    title: str
    html: SafeString
    toc: tuple[TocEntry, ...]


def document_render(*, slug: str) -> Document:
    """One document of `DOCUMENTS`, rendered; re-read only when its file changes."""
    if slug not in DOCUMENTS:
        raise DocumentNotFound(slug)
    path = Path(settings.BASE_DIR) / "docs" / DOCUMENTS[slug][0]
    try:
        changed = path.stat().st_mtime_ns
    except OSError as exc:
        raise DocumentNotFound(slug) from exc
    return _render(slug, str(path), changed)


@lru_cache(maxsize=8)
def _render(slug: str, path: str, changed: int) -> Document:
    converter = markdown.Markdown(extensions=_EXTENSIONS, extension_configs=_CONFIG)
    html = converter.convert(Path(path).read_text(encoding="utf-8"))
    tokens = getattr(converter, "toc_tokens", [])
    # The page's own title is the document's first heading.
    top = tokens[0] if len(tokens) == 1 else None
    return Document(
        slug=slug,
        title=top["name"] if top else DOCUMENTS[slug][1],
        html=mark_safe(nh3.clean(html, attributes=_ATTRIBUTES)),
        toc=tuple(_toc(top["children"] if top else tokens)),
    )


def _toc(tokens: list[dict]) -> list[TocEntry]:
    return [
        TocEntry(anchor=t["id"], title=t["name"], children=tuple(_toc(t.get("children", []))))
        for t in tokens
    ]


def documents_listed() -> list[tuple[str, str]]:
    """(slug, title) of every document, in navigation order."""
    return [(slug, title) for slug, (_, title) in DOCUMENTS.items()]

"""A guidance version's content: its canonical form, its hash, its text and diffs.

Pure functions (no database): the loader, the admin, the prompt and the task's
guidance history page all read guidance versions through them. The hash is the
sha256 of the canonical content as sorted, compact JSON.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

PROPERTY_FIELDS = (
    "key",
    "level",
    "title",
    "description",
    "weight",
    "depends_on",
    "detector",
    "counters",
    "position",
)


def guidance_content_build(
    *, guidance: Iterable[Mapping[str, Any]], properties: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """A version's content from guidance and property rows (dicts), in canonical form.

    Texts are compared as an agent reads them: line ends as LF, surrounding
    whitespace stripped (the admin's form strips it, the prompt strips it too).
    """
    return {
        "guidance": sorted(
            (
                {
                    "level": str(g["level"]),
                    "text": _text(g["text"]),
                    "depends_on": [str(d) for d in g.get("depends_on") or []],
                }
                for g in guidance
            ),
            key=lambda g: g["level"],
        ),
        "properties": sorted(
            (
                {
                    **{name: p.get(name) for name in PROPERTY_FIELDS},
                    "title": _text(p["title"]),
                    "description": _text(p.get("description") or ""),
                    "weight": float(p["weight"]),
                    "depends_on": [str(d) for d in p.get("depends_on") or []],
                    "detector": dict(p.get("detector") or {}),
                }
                for p in properties
            ),
            key=lambda p: (p["level"], p["position"], p["key"]),
        ),
    }


def _text(value: str) -> str:
    return value.replace("\r\n", "\n").strip()


def guidance_content_text(content: dict[str, Any]) -> str:
    """A version's content as one readable text: what its diff is taken over."""
    lines: list[str] = []
    for g in content.get("guidance", []):
        depends = ", ".join(g.get("depends_on") or []) or "none"
        lines += [f"## Guidance {g['level']} (depends on: {depends})", "", *g["text"].splitlines()]
        lines.append("")
    for p in content.get("properties", []):
        lines.append(f"## Property {p['key']} ({p['level']}, weight {p['weight']:g}): {p['title']}")
        lines += [*(p.get("description") or "").splitlines()]
        lines.append(f"depends on: {', '.join(p.get('depends_on') or []) or 'none'}")
        lines.append(f"detector: {json.dumps(p.get('detector') or {}, sort_keys=True)}")
        if p.get("counters"):
            lines.append(f"counters: {json.dumps(p['counters'], sort_keys=True)}")
        lines.append("")
    return "\n".join(lines)


def guidance_diff(
    *, old: dict[str, Any] | None, new: dict[str, Any], old_name: str, new_name: str
) -> list[str]:
    """The unified diff of two versions' contents (all of `new` added when `old` is None)."""
    return list(
        difflib.unified_diff(
            guidance_content_text(old).splitlines() if old is not None else [],
            guidance_content_text(new).splitlines(),
            fromfile=old_name,
            tofile=new_name,
            lineterm="",
        )
    )


def guidance_content_hash(content: dict[str, Any]) -> str:
    """sha256 of the content as sorted, compact JSON: a guidance version's identity."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def guidance_diff_rows(lines: list[str]) -> list[tuple[str, str]]:
    """Each diff line with its kind for display: `head` (file names), `hunk`, `add`,
    `del` or `ctx`."""
    rows = []
    for line in lines:
        if line.startswith(("--- ", "+++ ")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "ctx")
        rows.append((kind, line))
    return rows

"""Pasted library sources: long verbatim spans of known library code in what an agent
wrote (a message, a tool call's arguments, a submitted kernel).

A source is cut into shingles: windows of SHINGLE_LINES consecutive significant lines
(whitespace collapsed; lines with fewer than MIN_CHARS letters or digits skipped),
each hashed to 64 bits. A text whose shingles hit the index over a span of at least
SHINGLE_LINES significant lines quotes that library verbatim. The shipped index
(data/library-index.json) covers a few sources; `manage.py scan_library_index`
rebuilds it from the installed packages.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

SHINGLE_LINES = 8
MIN_CHARS = 6
INDEX_PATH = Path(__file__).parent / "data" / "library-index.json"
_ALNUM = re.compile(r"[A-Za-z0-9]")


@dataclass(frozen=True)
class Span:
    """A verbatim span: the library it comes from, its first line in the scanned text
    (from 0), the number of significant lines and the first of them."""

    source: str
    first_line: int
    lines: int
    text: str


def _significant(text: str) -> list[tuple[int, str]]:
    out = []
    for number, line in enumerate(text.splitlines()):
        norm = " ".join(line.split())
        if len(_ALNUM.findall(norm)) >= MIN_CHARS:
            out.append((number, norm))
    return out


def _hash(lines: Iterable[str]) -> int:
    digest = hashlib.blake2b("\n".join(lines).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _shingles(lines: list[tuple[int, str]]) -> list[int]:
    return [
        _hash(norm for _, norm in lines[i : i + SHINGLE_LINES])
        for i in range(len(lines) - SHINGLE_LINES + 1)
    ]


@dataclass(frozen=True)
class LibraryIndex:
    """Shingle hashes of known sources, each mapped to the source's name."""

    hashes: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def from_sources(cls, sources: Mapping[str, str]) -> LibraryIndex:
        hashes: dict[int, str] = {}
        for name, text in sources.items():
            for value in _shingles(_significant(text)):
                hashes.setdefault(value, name)
        return cls(hashes)

    def merged(self, other: LibraryIndex) -> LibraryIndex:
        return LibraryIndex({**other.hashes, **self.hashes})

    def spans(self, text: str) -> list[Span]:
        """The verbatim spans of indexed sources in `text`, longest runs merged."""
        if not self.hashes:
            return []
        lines = _significant(text)
        if len(lines) < SHINGLE_LINES:
            return []
        covered: list[str | None] = [None] * len(lines)
        for i, value in enumerate(_shingles(lines)):
            source = self.hashes.get(value)
            if source is not None:
                for j in range(i, i + SHINGLE_LINES):
                    covered[j] = covered[j] or source
        spans, i = [], 0
        while i < len(lines):
            source = covered[i]
            if source is None:
                i += 1
                continue
            j = i
            while j < len(lines) and covered[j] == source:
                j += 1
            spans.append(Span(source, lines[i][0], j - i, lines[i][1]))
            i = j
        return spans

    def dump(self) -> str:
        by_source: dict[str, list[str]] = {}
        for value, name in sorted(self.hashes.items()):
            by_source.setdefault(name, []).append(f"{value:016x}")
        return json.dumps(
            {
                "shingle_lines": SHINGLE_LINES,
                "min_chars": MIN_CHARS,
                "sources": {name: " ".join(values) for name, values in sorted(by_source.items())},
            },
            indent=1,
        )

    @classmethod
    def load(cls, text: str) -> LibraryIndex:
        data = json.loads(text)
        if data.get("shingle_lines") != SHINGLE_LINES or data.get("min_chars") != MIN_CHARS:
            raise ValueError("The library index was built with other shingle settings.")
        return cls(
            {int(v, 16): name for name, values in data["sources"].items() for v in values.split()}
        )


@cache
def library_index_shipped() -> LibraryIndex:
    """The index shipped beside this module (empty when the file is absent)."""
    if not INDEX_PATH.exists():
        return LibraryIndex()
    return LibraryIndex.load(INDEX_PATH.read_text(encoding="utf-8"))

"""Running the rules over a whole trace or a proposal, and redacting secrets."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from runs.scanners.hits import Hit
from runs.scanners.library import LibraryIndex, library_index_shipped
from runs.scanners.rules import RULES, EventRule, PastedLibrary, secrets
from runs.scanners.secrets import redact_text, secret_mask, secrets_find

MAX_HITS_PER_RULE = 50


def _lines(data: bytes) -> Iterator[tuple[int, str]]:
    for number, raw in enumerate(data.split(b"\n"), start=1):
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        if text.strip():
            yield number, text


def _decode(text: str) -> dict[str, Any] | None:
    try:
        event = json.loads(text)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _checks(index: LibraryIndex | None) -> list[EventRule]:
    library = library_index_shipped() if index is None else index
    return [rule.check or PastedLibrary(library) for rule in RULES]


def _capped(hits: Iterable[Hit], cap: int) -> list[Hit]:
    counts: Counter[str] = Counter()
    kept = []
    for hit in hits:
        counts[hit.rule] += 1
        if counts[hit.rule] <= cap:
            kept.append(hit)
    return kept


def trace_scan(
    *, data: bytes, index: LibraryIndex | None = None, cap: int = MAX_HITS_PER_RULE
) -> list[Hit]:
    """Every rule's hits over a trace (JSON Lines bytes), in line order, at most `cap`
    per rule. A line that is not a JSON object is read for secrets as plain text."""
    checks = _checks(index)

    def all_hits() -> Iterator[Hit]:
        for number, text in _lines(data):
            event = _decode(text)
            if event is None:
                for match in secrets_find(text):
                    yield Hit("secrets", number, "malformed", secret_mask(match))
                continue
            for check in checks:
                yield from check(number, event)

    return _capped(all_hits(), cap)


def text_scan(*, text: str, cap: int = MAX_HITS_PER_RULE) -> list[Hit]:
    """The secrets in a text (a proposal), by line (from 1)."""
    hits = (
        hit
        for number, line in enumerate(text.splitlines(), start=1)
        for hit in secrets(number, {"type": "proposal", "text": line})
    )
    return _capped(hits, cap)


def _redact_value(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        total, out = 0, {}
        for key, item in value.items():
            out[key], n = _redact_value(item)
            total += n
        return out, total
    if isinstance(value, list):
        total, items = 0, []
        for item in value:
            new, n = _redact_value(item)
            items.append(new)
            total += n
        return items, total
    return value, 0


def line_redact(text: str) -> tuple[str, int]:
    """One trace line with its secrets replaced: a JSON line's strings (the line is
    written again only when something changed), any other line as plain text."""
    event = _decode(text)
    if event is None:
        return redact_text(text)
    redacted, count = _redact_value(event)
    return (json.dumps(redacted, ensure_ascii=False), count) if count else (text, 0)


def trace_redact(*, data: bytes) -> tuple[bytes, int]:
    """The trace with every secret replaced, line for line (the line numbers hold), and
    the number replaced."""
    out, total = [], 0
    for raw in data.split(b"\n"):
        text = raw.decode("utf-8", errors="replace")
        ending = "\r" if text.endswith("\r") else ""
        redacted, count = line_redact(text.removesuffix("\r"))
        total += count
        out.append((redacted + ending).encode("utf-8") if count else raw)
    return b"\n".join(out), total

"""Compressed storage of a trace in page-sized gzip members, and reading one page back.

The stored file is the raw trace, gzip-compressed as a series of members of
PAGE_LINES lines each: `gunzip` gives the original bytes back, and the page
index (offset and length of every member) lets the viewer decompress one page.
"""

from __future__ import annotations

import difflib
import gzip
import json
import re
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import IO, Any

from runformat.trace import (
    KNOWN_TYPES,
    MALFORMED,
    OTHER,
    TraceEvent,
    event_decode,
    event_type_name,
    line_type,
)

PAGE_LINES = 200
_RAW_SHOWN = 4000


@dataclass(frozen=True)
class PackedTrace:
    data: bytes
    pages: list[dict[str, Any]]


def trace_pack(
    *, data: bytes, line_types: list[str | None] | None = None, page_lines: int = PAGE_LINES
) -> PackedTrace:
    """The raw trace as gzip members of `page_lines` lines each, with the page index:
    `{"offset", "length", "first_line", "lines", "types"}` per member. `line_types`
    (from trace_summarize) saves parsing every line a second time."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
        ends_with_newline = True
    else:
        ends_with_newline = False
    out = bytearray()
    pages: list[dict[str, Any]] = []
    for start in range(0, len(lines), page_lines):
        chunk = lines[start : start + page_lines]
        last = start + page_lines >= len(lines)
        body = b"\n".join(chunk) + (b"\n" if not last or ends_with_newline else b"")
        member = gzip.compress(body, compresslevel=6, mtime=0)
        if line_types is None:
            types = Counter(line_type(c.decode("utf-8")) for c in chunk if c.strip())
        else:
            types = Counter(t for t in line_types[start : start + page_lines] if t is not None)
        pages.append(
            {
                "offset": len(out),
                "length": len(member),
                "first_line": start + 1,
                "lines": len(chunk),
                "types": dict(types),
            }
        )
        out += member
    return PackedTrace(data=bytes(out), pages=pages)


def _member_lines(handle: IO[bytes], page: dict[str, Any]) -> list[tuple[int, str]]:
    handle.seek(page["offset"])
    body = zlib.decompress(handle.read(page["length"]), wbits=31)
    return [
        (page["first_line"] + i, raw.decode("utf-8").rstrip("\r"))
        for i, raw in enumerate(body.split(b"\n")[: page["lines"]])
    ]


def _event_from_line(
    number: int, text: str, problems: dict[int, str], check_after: int | None
) -> TraceEvent:
    # Checked against the schema once, at upload: the stored problems say what was wrong.
    # Past the last stored one (a trace with more than PROBLEMS_KEPT), checked here.
    event, problem = event_decode(text, check=check_after is not None and number > check_after)
    problem = problems.get(number, problem)
    if event is None:
        return TraceEvent(
            line=number, type=MALFORMED, data={}, raw=text[:_RAW_SHOWN], problem=problem
        )
    kind = event_type_name(event)
    raw = "" if kind in KNOWN_TYPES and not problem else json.dumps(event, indent=2)[:_RAW_SHOWN]
    return TraceEvent(line=number, type=kind, data=event, raw=raw, problem=problem)


def page_of_line(*, pages: list[dict[str, Any]], line: int) -> int:
    """The page (0-based, unfiltered) that holds `line`."""
    for number, page in enumerate(pages):
        if page["first_line"] <= line < page["first_line"] + page["lines"]:
            return number
    return 0


def _submission_source(handle: IO[bytes], pages: list[dict[str, Any]], line: int) -> str | None:
    page = pages[page_of_line(pages=pages, line=line)]
    for number, text in _member_lines(handle, page):
        if number == line:
            event, _ = event_decode(text, check=False)
            source = event.get("source") if event else None
            return source if isinstance(source, str) else None
    return None


def _diff(before: str | None, after: str, before_line: int | None, after_line: int) -> str:
    if before is None:
        return ""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"submit at line {before_line}",
            tofile=f"submit at line {after_line}",
        )
    )


def trace_page_read(
    *,
    handle: IO[bytes],
    pages: list[dict[str, Any]],
    submit_lines: list[int],
    page: int,
    event_type: str | None = None,
    problems: list[dict[str, Any]] | None = None,
    problems_complete: bool = True,
) -> tuple[list[TraceEvent], int]:
    """One page of events (PAGE_LINES of them; of `event_type` only, if given) and the
    page count. Each submit carries its diff against the submit before it, read from
    that submit's member when it lies on an earlier page. `problems` are the trace's
    stored problems, shown on their lines; when they are not all of them
    (`problems_complete` false), lines past the last are checked as they are read."""
    by_line = {p["line"]: p["message"] for p in problems or []}
    check_after = None if problems_complete else max(by_line, default=0)
    # The types the summary counts by name; other unknown types are OTHER.
    kept = frozenset(t for p in pages for t in p["types"])
    if event_type:
        counts = [p["types"].get(event_type, 0) for p in pages]
        total = sum(counts)
        page_count = max(1, -(-total // PAGE_LINES))
        lo, hi = page * PAGE_LINES, (page + 1) * PAGE_LINES
        chosen, seen, before = [], 0, 0
        for member, count in zip(pages, counts, strict=True):
            if count and seen + count > lo and seen < hi:
                chosen.append(member)
            elif seen + count <= lo:
                before = seen + count
            seen += count
        # A cheap textual test first: most lines of a long trace are not of the type.
        # Without the closing quote: a stored type name may be cut (TYPE_NAME_CHARS).
        marker = re.compile(rf'"type"\s*:\s*{re.escape(json.dumps(event_type)[:-1])}')
        events = [
            _event_from_line(n, t, by_line, check_after)
            for member in chosen
            for n, t in _member_lines(handle, member)
            if (event_type in (MALFORMED, OTHER) or marker.search(t))
            and line_type(t, kept=kept) == event_type
        ]
        skip = lo - before
        events = events[skip : skip + PAGE_LINES]
    else:
        page_count = max(1, len(pages))
        if not 0 <= page < len(pages):
            return [], page_count
        events = [
            _event_from_line(n, t, by_line, check_after)
            for n, t in _member_lines(handle, pages[page])
            if t.strip()
        ]
    return _with_diffs(handle, pages, submit_lines, events), page_count


def _with_diffs(
    handle: IO[bytes],
    pages: list[dict[str, Any]],
    submit_lines: list[int],
    events: list[TraceEvent],
) -> list[TraceEvent]:
    previous: dict[int, int | None] = {
        line: (submit_lines[i - 1] if i else None) for i, line in enumerate(submit_lines)
    }
    sources = {e.line: e.data.get("source") for e in events if e.type == "submit"}
    out = []
    for event in events:
        if event.type == "submit" and isinstance(event.data.get("source"), str):
            before_line = previous.get(event.line)
            if before_line is None:
                before = None
            elif before_line in sources:
                before = sources[before_line]
            else:
                before = _submission_source(handle, pages, before_line)
            diff = _diff(before, event.data["source"], before_line, event.line)
            event = TraceEvent(
                line=event.line,
                type=event.type,
                data=event.data,
                raw=event.raw,
                problem=event.problem,
                diff=diff,
            )
        out.append(event)
    return out

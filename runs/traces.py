"""Agent traces (JSON Lines): the summary computed once at upload, compressed storage in
page-sized gzip members, and reading one page back. No Django: bytes and file handles.

The stored file is the raw trace, gzip-compressed as a series of members of
PAGE_LINES lines each. `gunzip` gives the original bytes back; the page index
(offset and length of every member) lets the viewer decompress one page only.
"""

from __future__ import annotations

import difflib
import gzip
import json
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import IO, Any

from jsonschema import Draft202012Validator

from runs.bundle import schema_load

PAGE_LINES = 200
MALFORMED = "malformed"
KNOWN_TYPES = ("start", "message", "tool_call", "tool_result", "submit", "end")
# A tool call counts as a compile or test attempt when its name says so
# (`compile`, `run_tests`, `check_correctness`, `benchmark`, `evaluate`, `verify`, …).
ATTEMPT_TOOL = re.compile(r"compile|test|check|bench|eval|verify|profile", re.IGNORECASE)
_RAW_SHOWN = 4000


@dataclass(frozen=True)
class TraceSummary:
    """What the run page shows of one trace, computed once at upload."""

    event_count: int
    event_types: dict[str, int]
    problems: list[dict[str, Any]]
    turns_used: int | None
    tool_calls: dict[str, int]
    tokens_in: int
    tokens_out: int
    wall_time_s: float | None
    attempts_before_final: int
    submit_lines: list[int]
    line_types: list[str | None]  # per line (None for a blank one), for trace_pack
    final_submit_turn: int | None
    final_submit_line: int | None
    end_reason: str


@dataclass(frozen=True)
class PackedTrace:
    data: bytes
    pages: list[dict[str, Any]]


@dataclass(frozen=True)
class TraceEvent:
    """One line of a trace as the viewer shows it."""

    line: int
    type: str
    data: dict[str, Any]
    raw: str = ""
    problem: str = ""
    diff: str | None = field(default=None)

    @property
    def is_known(self) -> bool:
        return self.type in KNOWN_TYPES

    @property
    def turn(self) -> int | None:
        turn = self.data.get("turn")
        return turn if isinstance(turn, int) and not isinstance(turn, bool) else None


@cache
def _type_validator(kind: str) -> Draft202012Validator:
    """The trace schema narrowed to one event type: the base rules plus that type's
    `then` branch, so that a line is checked against one branch, not all six `if`s."""
    schema = schema_load("trace-v1")
    base = {k: v for k, v in schema.items() if k not in ("allOf", "$id", "title")}
    for rule in schema["allOf"]:
        if rule["if"]["properties"]["type"]["const"] == kind:
            base = {"allOf": [base, rule["then"]]}
            break
    return Draft202012Validator(base, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _event_decode(text: str, *, check: bool = True) -> tuple[dict[str, Any] | None, str]:
    """(event, problem): the event is None when the line is not a JSON object."""
    try:
        event = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"Not JSON: {exc.msg} (column {exc.colno})."
    if not isinstance(event, dict):
        return None, "Not a JSON object: every line is one event object."
    if not check:
        return event, ""
    kind = event.get("type")
    validator = _type_validator(kind if kind in KNOWN_TYPES else "")
    if validator.is_valid(event):
        return event, ""
    error = min(validator.iter_errors(event), key=lambda e: len(list(e.absolute_path)))
    where = ".".join(str(p) for p in error.absolute_path)
    return event, f"{where + ': ' if where else ''}{error.message}"


def _timestamp(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def trace_summarize(*, data: bytes, final_source: str | None) -> TraceSummary:
    """Parse every line once: counts, tokens, turns, wall time and where the final
    kernel (`final_source`, the bundle's kernel for the task) was first submitted."""
    types: Counter[str] = Counter()
    tools: Counter[str] = Counter()
    problems: list[dict[str, Any]] = []
    tokens_in = tokens_out = 0
    first_ts = last_ts = None
    max_turn: int | None = None
    assistant_turns = 0
    end_turns: int | None = None
    end_reason = ""
    submits: list[tuple[int, int | None, str]] = []
    attempt_lines: list[int] = []
    wanted = final_source.strip() if final_source else None
    events = 0
    line_types: list[str | None] = []
    for number, raw in enumerate(_lines(data), start=1):
        text = raw.decode("utf-8").rstrip("\r")
        if not text.strip():
            line_types.append(None)
            continue
        events += 1
        event, problem = _event_decode(text)
        if problem:
            problems.append({"line": number, "message": problem})
        if event is None:
            types[MALFORMED] += 1
            line_types.append(MALFORMED)
            continue
        kind = str(event.get("type") or "?")
        types[kind] += 1
        line_types.append(kind)
        ts = _timestamp(event.get("ts"))
        if ts is not None:
            first_ts = ts if first_ts is None else min(first_ts, ts)
            last_ts = ts if last_ts is None else max(last_ts, ts)
        turn = event.get("turn")
        if isinstance(turn, int) and not isinstance(turn, bool):
            max_turn = turn if max_turn is None else max(max_turn, turn)
        if kind == "message":
            tokens_in += _int(event.get("tokens_in"))
            tokens_out += _int(event.get("tokens_out"))
            assistant_turns += event.get("role") == "assistant"
        elif kind == "tool_call":
            name = str(event.get("name") or "?")
            tools[name] += 1
            if ATTEMPT_TOOL.search(name):
                attempt_lines.append(number)
        elif kind == "submit" and isinstance(event.get("source"), str):
            submits.append((number, turn if isinstance(turn, int) else None, event["source"]))
        elif kind == "end":
            end_reason = str(event.get("reason") or "")[:100]
            if isinstance(event.get("turns_used"), int):
                end_turns = event["turns_used"]

    final = next((s for s in submits if wanted is not None and s[2].strip() == wanted), None)
    if final is None and submits and wanted is not None:
        final = submits[-1]
    final_line = final[0] if final else None
    if end_turns is not None:
        turns_used: int | None = end_turns
    elif max_turn is not None:
        turns_used = max_turn
    else:
        turns_used = assistant_turns or None
    return TraceSummary(
        event_count=events,
        event_types=dict(types),
        problems=problems,
        turns_used=turns_used,
        tool_calls=dict(tools.most_common()),
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        wall_time_s=None if first_ts is None or last_ts is None else round(last_ts - first_ts, 3),
        attempts_before_final=sum(1 for n in attempt_lines if final_line is None or n < final_line),
        submit_lines=[s[0] for s in submits],
        line_types=line_types,
        final_submit_turn=final[1] if final else None,
        final_submit_line=final_line,
        end_reason=end_reason,
    )


def _line_type(text: str) -> str:
    try:
        event = json.loads(text)
    except json.JSONDecodeError:
        return MALFORMED
    return str(event.get("type") or "?") if isinstance(event, dict) else MALFORMED


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
            types = Counter(_line_type(c.decode("utf-8")) for c in chunk if c.strip())
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


def _event_from_line(number: int, text: str, problems: dict[int, str]) -> TraceEvent:
    # Checked against the schema once, at upload: the stored problems say what was wrong.
    event, problem = _event_decode(text, check=False)
    problem = problems.get(number, problem)
    if event is None:
        return TraceEvent(
            line=number, type=MALFORMED, data={}, raw=text[:_RAW_SHOWN], problem=problem
        )
    kind = str(event.get("type") or "?")
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
            event, _ = _event_decode(text, check=False)
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
) -> tuple[list[TraceEvent], int]:
    """One page of events (PAGE_LINES of them; of `event_type` only, if given) and the
    page count. Each submit carries its diff against the submit before it, read from
    that submit's member when it lies on an earlier page. `problems` are the trace's
    stored problems, shown on their lines."""
    by_line = {p["line"]: p["message"] for p in problems or []}
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
        marker = re.compile(rf'"type"\s*:\s*{re.escape(json.dumps(event_type))}')
        events = [
            _event_from_line(n, t, by_line)
            for member in chosen
            for n, t in _member_lines(handle, member)
            if (event_type == MALFORMED or marker.search(t)) and _line_type(t) == event_type
        ]
        skip = lo - before
        events = events[skip : skip + PAGE_LINES]
    else:
        page_count = max(1, len(pages))
        if not 0 <= page < len(pages):
            return [], page_count
        events = [
            _event_from_line(n, t, by_line)
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

"""The per-task summary of a trace, computed once at upload."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runformat.trace import (
    KNOWN_TYPES,
    MALFORMED,
    OTHER,
    OTHER_TYPES_KEPT,
    TOO_DEEP,
    event_decode,
    event_type_name,
)

# A tool call counts as a compile or test attempt when its name says so
# (`compile`, `run_tests`, `check_correctness`, `benchmark`, `evaluate`, `verify`, …).
ATTEMPT_TOOL = re.compile(r"compile|test|check|bench|eval|verify|profile", re.IGNORECASE)
# What the summary keeps of a trace however long it is: the first PROBLEMS_KEPT problems
# (each message cut at PROBLEM_CHARS; `problem_count` counts them all) and the
# TOOLS_KEPT most called tool names (the rest counted as OTHER_TOOLS).
PROBLEMS_KEPT = 100
PROBLEM_CHARS = 300
TOOLS_KEPT = 50
TOOL_NAME_CHARS = 100
OTHER_TOOLS = "(other tools)"


class TraceRefused(ValueError):
    """A line no trace may hold (nested too deeply to read safely): `line` is 1-based."""

    def __init__(self, message: str, *, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class TraceSummary:
    """What the run page shows of one trace, computed once at upload."""

    event_count: int
    event_types: dict[str, int]
    problems: list[dict[str, Any]]  # the first PROBLEMS_KEPT
    problem_count: int
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


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _tools_kept(tools: Counter[str]) -> dict[str, int]:
    kept = dict(tools.most_common(TOOLS_KEPT))
    rest = sum(tools.values()) - sum(kept.values())
    return {**kept, OTHER_TOOLS: rest} if rest else kept


def _lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def trace_summarize(*, data: bytes, final_source: str | None) -> TraceSummary:
    """Parse every line once: counts, tokens, turns, wall time and where the final
    kernel (`final_source`, the bundle's kernel for the task) was first submitted.

    A line that breaks the schema is a problem of the trace; one nested too deeply to
    read safely raises TraceRefused. NUL characters and lone surrogates in the text
    are replaced by U+FFFD (event_decode)."""
    types: Counter[str] = Counter()
    tools: Counter[str] = Counter()
    problems: list[dict[str, Any]] = []
    problem_count = 0
    named_unknown = 0
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
        event, problem = event_decode(text)
        if problem == TOO_DEEP:
            raise TraceRefused(problem, line=number)
        if problem:
            problem_count += 1
            if len(problems) < PROBLEMS_KEPT:
                problems.append({"line": number, "message": _cut(problem, PROBLEM_CHARS)})
        if event is None:
            types[MALFORMED] += 1
            line_types.append(MALFORMED)
            continue
        kind = event_type_name(event)
        if kind not in KNOWN_TYPES and kind not in types:
            named_unknown += 1
            if named_unknown > OTHER_TYPES_KEPT:
                kind = OTHER
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
            tools[name[:TOOL_NAME_CHARS]] += 1
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
        problem_count=problem_count,
        turns_used=turns_used,
        tool_calls=_tools_kept(tools),
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

"""Trace events: decoding one line, checking it against the published schema, and
the event as the viewer shows it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from .jsonsafe import MAX_JSON_DEPTH, unsafe_chars_replace
from .schema import schema_load

MALFORMED = "malformed"
KNOWN_TYPES = ("start", "message", "tool_call", "tool_result", "submit", "end")
# Unknown event types beyond the first OTHER_TYPES_KEPT of a trace are counted as OTHER,
# and a type name is cut at TYPE_NAME_CHARS: a junk trace cannot grow its summary.
OTHER = "other"
OTHER_TYPES_KEPT = 20
TYPE_NAME_CHARS = 64
TOO_DEEP = f"Nested deeper than {MAX_JSON_DEPTH} levels: the line is refused."
NORMALISED = "NUL characters or lone UTF-16 surrogates in the text are shown as U+FFFD."


class EventTooDeep(ValueError):
    """A trace line nested deeper than MAX_JSON_DEPTH: refused at upload."""


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


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (walked without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            stack.extend(
                (c, depth + 1) for c in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def _normalised(value: Any) -> Any:
    """`value` with NUL characters and lone surrogates in its keys and strings replaced."""
    if isinstance(value, str):
        return unsafe_chars_replace(value)
    if isinstance(value, list):
        return [_normalised(v) for v in value]
    if isinstance(value, dict):
        return {unsafe_chars_replace(k): _normalised(v) for k, v in value.items()}
    return value


def event_load(text: str) -> tuple[Any, bool]:
    """(value, normalised) of one trace line: `json.loads`, with NUL characters and lone
    surrogates replaced by U+FFFD (`normalised` says whether any were). Raises
    EventTooDeep past MAX_JSON_DEPTH, json.JSONDecodeError for text that is not JSON.
    Both cheap tests on the text skip the walks for almost every line."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise EventTooDeep(TOO_DEEP) from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _depth(value) > MAX_JSON_DEPTH:
        raise EventTooDeep(TOO_DEEP)
    if "\\u" not in text:
        return value, False
    clean = _normalised(value)
    return clean, clean != value


def event_decode(text: str, *, check: bool = True) -> tuple[dict[str, Any] | None, str]:
    """(event, problem): the event is None when the line is not a JSON object (or is
    nested too deeply to read: `TOO_DEEP`)."""
    try:
        event, normalised = event_load(text)
    except json.JSONDecodeError as exc:
        return None, f"Not JSON: {exc.msg} (column {exc.colno})."
    except EventTooDeep:
        return None, TOO_DEEP
    if not isinstance(event, dict):
        return None, "Not a JSON object: every line is one event object."
    if not check:
        return event, NORMALISED if normalised else ""
    kind = event.get("type")
    validator = _type_validator(kind if kind in KNOWN_TYPES else "")
    if validator.is_valid(event):
        return event, NORMALISED if normalised else ""
    error = min(validator.iter_errors(event), key=lambda e: len(list(e.absolute_path)))
    where = ".".join(str(p) for p in error.absolute_path)
    return event, f"{where + ': ' if where else ''}{error.message}"


def event_type_name(event: dict[str, Any]) -> str:
    """The event's `type` as the summary counts it: a string, cut at TYPE_NAME_CHARS."""
    return str(event.get("type") or "?")[:TYPE_NAME_CHARS]


def line_type(text: str, *, kept: frozenset[str] | None = None) -> str:
    """The event type of one line, `malformed` when it is not a JSON object; with `kept`
    (the types the trace's summary counts by name), an unknown type not kept is OTHER."""
    try:
        event, _ = event_load(text)
    except (json.JSONDecodeError, EventTooDeep):
        return MALFORMED
    if not isinstance(event, dict):
        return MALFORMED
    kind = event_type_name(event)
    if kept is not None and kind not in KNOWN_TYPES and kind not in kept:
        return OTHER
    return kind

"""Trace events: decoding one line, checking it against the published schema, and
the event as the viewer shows it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from .schema import schema_load

MALFORMED = "malformed"
KNOWN_TYPES = ("start", "message", "tool_call", "tool_result", "submit", "end")


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


def event_decode(text: str, *, check: bool = True) -> tuple[dict[str, Any] | None, str]:
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


def line_type(text: str) -> str:
    """The event type of one line, `malformed` when it is not a JSON object."""
    try:
        event = json.loads(text)
    except json.JSONDecodeError:
        return MALFORMED
    return str(event.get("type") or "?") if isinstance(event, dict) else MALFORMED

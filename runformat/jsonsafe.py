"""JSON that is safe to store: `json.loads` that refuses nesting deeper than a limit,
NUL characters and lone UTF-16 surrogates (PostgreSQL stores neither; UTF-8 cannot
encode a surrogate), and names the line where it found them."""

from __future__ import annotations

import json
import re
from typing import Any

# JSON nested deeper than this is refused (a manifest is 2 levels deep, a trace event 3 or 4).
MAX_JSON_DEPTH = 32
_UNSAFE_CHARS = re.compile("[\x00\ud800-\udfff]")
# Where an escape that decodes to NUL or to a UTF-16 surrogate sits in JSON text.
_UNSAFE_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")


class JsonRefused(ValueError):
    """JSON text that parses but cannot be stored safely: `line` is where (1-based)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def unsafe_chars_replace(text: str) -> str:
    """`text` with NUL characters and lone UTF-16 surrogates replaced by U+FFFD: neither
    can be encoded as UTF-8 nor stored by PostgreSQL."""
    return _UNSAFE_CHARS.sub("\ufffd", text)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _depth_line(text: str, limit: int) -> int | None:
    """The line where `text` opens its (limit + 1)-th nested array or object, if it does."""
    depth, in_string, escaped = 0, False, False
    for offset, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return _line_of(text, offset)
        elif char in "]}":
            depth -= 1
    return None


def _json_value_problem(value: Any, *, max_depth: int) -> str | None:
    """What makes a parsed value unsafe to store: nesting deeper than `max_depth`, a NUL
    character or a lone surrogate in a key or a string (walked without recursion)."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, dict | list) and depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        if isinstance(item, dict):
            for key, child in item.items():
                path = f"{where}.{key}" if where else str(key)
                if _UNSAFE_CHARS.search(key):
                    return f"a key at {where or 'the top'} holds a NUL or a lone surrogate"
                stack.append((child, depth + 1, path))
        elif isinstance(item, list):
            stack.extend((c, depth + 1, f"{where}[{i}]") for i, c in enumerate(item))
        elif isinstance(item, str) and _UNSAFE_CHARS.search(item):
            return f"{where or 'the value'} holds a NUL character or a lone UTF-16 surrogate"
    return None


def json_loads_checked(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads`, refusing what cannot be stored: nesting deeper than `max_depth`, NUL
    characters and lone UTF-16 surrogates (both only reachable through `\\u` escapes).

    Raises json.JSONDecodeError for text that is not JSON, JsonRefused (with the line)
    for JSON that is unsafe. The two cheap tests on the text skip the walk for almost
    every document."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonRefused(
            f"JSON nested deeper than {max_depth} levels.", _depth_line(text, max_depth)
        ) from None
    deep = text.count("[") + text.count("{") > max_depth
    escaped = "\\u" in text
    if deep or escaped:
        problem = _json_value_problem(value, max_depth=max_depth)
        if problem is not None:
            line = None
            if problem.startswith("nested"):
                line = _depth_line(text, max_depth)
            elif (match := _UNSAFE_ESCAPE.search(text)) is not None:
                line = _line_of(text, match.start())
            raise JsonRefused(f"Refused: {problem}.", line)
    return value

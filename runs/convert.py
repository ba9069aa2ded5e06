"""Converters from agent logs found in the wild to the D2K trace format (JSON Lines).

`openai_chat_to_trace` reads an OpenAI-style chat transcript: a list of messages
(or `{"messages": [...]}`) with `role`, `content` (a string or a list of text
parts), assistant `tool_calls` (`{"id", "function": {"name", "arguments"}}`) and
`tool` messages answering them by `tool_call_id`. Pure: no Django, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

SUBMIT_TOOLS = frozenset({"submit", "submit_kernel", "submit_solution"})
_SOURCE_KEYS = ("source", "code", "kernel", "content")
# Chat transcripts carry no success flag for a tool; a result that opens like an
# error report is taken as a failure.
_FAILURE = re.compile(r"^\s*(error|traceback|exception|failed|fail\b)", re.IGNORECASE)


class TranscriptError(ValueError):
    """The input is not an OpenAI-style chat transcript; the message says where."""


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content)


def _arguments(raw: Any) -> dict[str, Any] | str:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return "" if raw is None else json.dumps(raw)


def _messages(transcript: Any) -> list[dict[str, Any]]:
    messages = transcript.get("messages") if isinstance(transcript, dict) else transcript
    if not isinstance(messages, list):
        raise TranscriptError("Expected a list of messages or an object with `messages`.")
    for number, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise TranscriptError(f"Message {number} is not an object with a `role`.")
    return messages


def openai_chat_to_trace(
    *,
    transcript: Any,
    task: str,
    condition: str,
    start_ts: float = 0.0,
    submit_tools: Iterable[str] = SUBMIT_TOOLS,
) -> list[dict[str, Any]]:
    """The transcript as trace events. Each assistant message is one turn; a call of a
    tool in `submit_tools` whose arguments hold the source (`source`, `code`, `kernel`
    or `content`) is also a `submit`. Messages without a timestamp (`timestamp` or
    `created`, seconds since the epoch) get one a second after the event before."""
    submit_names = frozenset(submit_tools)
    events: list[dict[str, Any]] = []
    clock = start_ts
    turn = 0
    names_by_id: dict[str, str] = {}

    def emit(event: dict[str, Any], ts: Any = None) -> None:
        nonlocal clock
        clock = float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else clock
        events.append({"type": event.pop("type"), "ts": round(clock, 3), "turn": turn, **event})
        clock += 1.0

    emit({"type": "start", "task": task, "condition": condition})
    for message in _messages(transcript):
        role = message["role"]
        ts = message.get("timestamp", message.get("created"))
        if role == "assistant":
            turn += 1
        if role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            output = _text(message.get("content"))
            name = names_by_id.get(call_id) or str(message.get("name") or "tool")
            emit(
                {
                    "type": "tool_result",
                    "id": call_id,
                    "name": name,
                    "ok": not _FAILURE.match(output),
                    "output": output,
                },
                ts,
            )
            continue
        event: dict[str, Any] = {
            "type": "message",
            "role": role if role in ("system", "user", "assistant") else "user",
            "content": _text(message.get("content")),
        }
        usage = message.get("usage")
        if isinstance(usage, dict):
            event["tokens_in"] = int(usage.get("prompt_tokens") or 0)
            event["tokens_out"] = int(usage.get("completion_tokens") or 0)
        emit(event, ts)
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            name = str(function.get("name") or "tool")
            call_id = str(call.get("id") or "")
            names_by_id[call_id] = name
            arguments = _arguments(function.get("arguments"))
            emit({"type": "tool_call", "id": call_id, "name": name, "arguments": arguments})
            if name in submit_names and isinstance(arguments, dict):
                source = next(
                    (arguments[k] for k in _SOURCE_KEYS if isinstance(arguments.get(k), str)),
                    None,
                )
                if source is not None:
                    emit({"type": "submit", "source": source})
    emit({"type": "end", "reason": "transcript_end", "turns_used": turn})
    return events


def trace_dumps(events: Iterable[dict[str, Any]]) -> str:
    """Events as JSON Lines."""
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)

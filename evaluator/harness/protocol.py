"""Reading the child's result channel, strictly.

The child runs untrusted code, so anything on its result pipe may be forged.
The parent knows the plan (workloads, seeds, order), so it knows exactly
which messages an honest child sends and in what order; any other message,
a duplicate, a wrong seed or file, or anything after the end is flagged as
`result_channel` and never used. Host-clock stamps taken by the parent's
reader thread give the wall time of the timing batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Sent by the child's own checks: allowed between any two protocol messages.
INFORMATIONAL = {"patched", "threads", "bad_output", "l2_persistence", "escaped"}


def flag(check: str, detail: str) -> dict[str, str]:
    return {"check": check, "detail": detail}


@dataclass
class Observed:
    outputs: dict[str, list[dict]] = field(default_factory=dict)
    timings: dict[str, dict] = field(default_factory=dict)
    batches: dict[str, dict] = field(default_factory=dict)
    error: dict | None = None
    flags: list[dict[str, str]] = field(default_factory=list)
    started: bool = False
    ready: bool = False
    done: bool = False


def expected_sequence(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(event, workload, tag) in the order an honest child sends them."""
    steps: list[tuple[str, str, str]] = [("hello", "", ""), ("ready", "", "")]
    for w in plan["workloads"]:
        for index in range(len(w["seeds"])):
            steps.append(("output", w["name"], str(index)))
            if index == 0:
                steps.append(("output", w["name"], "0r"))
    for w in plan["workloads"]:
        if w["timed"]:
            steps += [
                ("batch_begin", w["name"], ""),
                ("batch_end", w["name"], ""),
                ("timing", w["name"], ""),
            ]
    steps.append(("done", "", ""))
    return steps


def collect(
    messages: list[tuple[float, dict]], plan: dict[str, Any], bad_messages: int = 0
) -> Observed:
    seen = Observed()
    steps = expected_sequence(plan)
    seeds = {w["name"]: w["seeds"] for w in plan["workloads"]}
    position = 0
    batch_begin: float | None = None
    finished = False
    for stamp, msg in messages:
        event = str(msg.get("event"))
        if finished:
            seen.flags.append(flag("result_channel", f"message {event!r} after the end"))
            break
        if event in INFORMATIONAL:
            _informational(seen, msg)
            continue
        if event == "error":
            seen.error = msg
            finished = True
            continue
        want = steps[position] if position < len(steps) else ("<end>", "", "")
        problem = _mismatch(msg, want, seeds)
        if problem:
            seen.flags.append(flag("result_channel", problem))
            break
        position += 1
        name = want[1]
        if event == "hello":
            seen.started = True
        elif event == "ready":
            seen.ready = True
        elif event == "output":
            seen.outputs.setdefault(name, []).append(msg)
        elif event == "batch_begin":
            batch_begin = stamp
        elif event == "batch_end" and batch_begin is not None:
            seen.batches[name] = {**msg, "host_ms": (stamp - batch_begin) * 1e3}
        elif event == "timing":
            seen.timings[name] = msg
        elif event == "done":
            seen.done = True
            finished = True
    if bad_messages:
        seen.flags.append(
            flag("result_channel", f"{bad_messages} malformed message(s) on the result pipe")
        )
    return seen


def timing_windows(messages: list[tuple[float, dict]]) -> dict[str, tuple[float, float]]:
    """Per timed workload, the host-clock span of its warm-up and timed calls.

    The child times a workload between the message before its `batch_begin`
    (the previous workload's `timing`, or the last correctness output) and that
    `batch_begin`. For diagnostics only: the stamps are the parent's, but the
    child chooses when to write.
    """
    windows: dict[str, tuple[float, float]] = {}
    previous: float | None = None
    for stamp, msg in messages:
        if msg.get("event") == "batch_begin" and previous is not None:
            windows.setdefault(str(msg.get("workload")), (previous, stamp))
        previous = stamp
    return windows


def _mismatch(msg: dict, want: tuple[str, str, str], seeds: dict[str, list[int]]) -> str:
    event, name, tag = want
    got = str(msg.get("event"))
    if got != event:
        return f"expected {event!r}{f' for {name}' if name else ''}, got {got!r}"
    if name and msg.get("workload") != name:
        return f"{event!r} for {msg.get('workload')!r}, expected {name!r}"
    if event == "output":
        index = int(tag.rstrip("r"))
        if msg.get("tag") != tag or msg.get("seed") != seeds[name][index]:
            return f"output of {name} with tag {msg.get('tag')!r} or seed not the planned one"
        if msg.get("file") != f"{name}.{tag}.pt":
            return f"output of {name} names the file {msg.get('file')!r}"
    return ""


def _informational(seen: Observed, msg: dict) -> None:
    event = msg["event"]
    if event == "bad_output":
        seen.flags.append(flag("output_type", str(msg.get("message"))))
    elif event == "escaped":
        seen.flags.append(
            flag(
                "escaped_work",
                f"{msg.get('workload')}: the output of timed call {msg.get('call')} changed after "
                "the call's own stream had finished (work on another stream or thread)",
            )
        )
    elif event == "l2_persistence":
        seen.flags.append(
            flag(
                "l2_persistence",
                f"{msg.get('workload')}: the submission reserved {msg.get('bytes')} bytes of "
                "persisting L2 (reset before every timed call)",
            )
        )
    elif event == "patched":
        names = ", ".join(map(str, msg.get("names", [])))
        seen.flags.append(flag("monkeypatch", f"changed during {msg.get('phase')}: {names}"))
    elif event == "threads":
        seen.flags.append(
            flag(
                "background_thread",
                f"{msg.get('count')} Python thread(s) left running after {msg.get('phase')}",
            )
        )

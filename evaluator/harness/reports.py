"""The child's messages as the parent reads them: one frozen dataclass per kind.

The child runs the submission, so anything it sends may be forged.
`protocol.collect` checks where each message falls in the sequence the plan
allows, then parses it here, once: the judge reads attributes, never the
message's keys. A field that is not of the form an honest child sends is
kept as malformed (None, or its name in `malformed`), never guessed at, and
the judge refuses the report as `result_channel` (timingchecks.py). Parsing
never raises: a forged message is evidence, not a crash of the parent.

Sequence markers (`hello`, `ready`, `batch_begin`, `batch_calls`, `batch_taken`, `done`)
carry nothing the judge reads; the child's own checks (`patched`, `threads`,
`bad_output`, `escaped`, `l2_persistence`) are notices, each read as the flag it
raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeGuard


def is_number(value: object) -> TypeGuard[int | float]:
    """A finite number >= 0, as JSON gives it (a bool counts, as it does in Python)."""
    try:
        return isinstance(value, int | float) and math.isfinite(value) and value >= 0
    except OverflowError:  # an integer past any float
        return False


def times(value: object) -> tuple[float, ...] | None:
    """A non-empty list of finite times (ms), else None."""
    if not isinstance(value, list) or not value:
        return None
    try:
        parsed = tuple(float(v) for v in value)
    except (TypeError, ValueError, OverflowError):
        return None
    return parsed if all(math.isfinite(t) for t in parsed) else None


def seed_of(value: object) -> int | None:
    """A seed as sent, where it can equal an issued one (an integral number), else None."""
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def strings(value: object) -> tuple[str, ...]:
    """The strings of a list (op and kernel names); anything else names nothing."""
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


@dataclass(frozen=True)
class OutputLayout:
    """What the child reports of one output besides its values (outputs.Layout)."""

    shape: tuple
    dtype: str
    strides: tuple | None
    aliases: tuple


def parse_layouts(value: object) -> tuple[OutputLayout | None, ...] | None:
    """Each output's layout (None where it is not one), or None without a list of them."""
    if not isinstance(value, list):
        return None
    return tuple(_layout(item) for item in value)


def _layout(item: object) -> OutputLayout | None:
    if not isinstance(item, dict):
        return None
    shape, strides, aliases = item.get("shape", []), item.get("strides"), item.get("aliases")
    if not isinstance(shape, list) or not isinstance(strides, list | None):
        return None
    if not isinstance(aliases, list | None):
        return None
    return OutputLayout(
        shape=tuple(shape),
        dtype=str(item.get("dtype")),
        strides=tuple(strides) if strides is not None else None,
        aliases=tuple(aliases or ()),
    )


@dataclass(frozen=True)
class OutputReport:
    """`output`: one correctness call; its outputs are in `file` (outputs.write_raw)."""

    workload: str
    seed: int
    tag: str
    file: str
    # The file's SHA-256 as the child saved it ("" where the message had none).
    sha256: str = ""
    ops: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()
    mutated_inputs: tuple = ()
    layouts: tuple[OutputLayout | None, ...] | None = None
    # Host time of the call (the first one's is the cold start); None: not a number.
    host_ms: float | None = 0.0


def parse_output(msg: dict) -> OutputReport:
    """An `output` message whose workload, tag, seed and file protocol.collect has checked."""
    mutated = msg.get("mutated_inputs")
    host_ms = msg.get("host_ms", 0.0)
    return OutputReport(
        workload=str(msg["workload"]),
        seed=int(msg["seed"]),
        tag=str(msg["tag"]),
        file=str(msg["file"]),
        sha256=str(msg.get("sha256") or ""),
        ops=strings(msg.get("ops", [])),
        kernels=strings(msg.get("kernels", [])),
        mutated_inputs=_listed(mutated),
        layouts=parse_layouts(msg.get("layouts")),
        host_ms=float(host_ms) if is_number(host_ms) else None,
    )


def _listed(value: object) -> tuple:
    """A list's items; any other value that is not empty or false, alone."""
    if isinstance(value, list):
        return tuple(value)
    return (value,) if value else ()


@dataclass(frozen=True)
class BatchReport:
    """`batch_end`: back-to-back calls, by the child's events and the parent's clock."""

    workload: str
    # None where the child sent no whole count or no finite time.
    calls: int | None
    event_ms: float | None
    # The parent's own clock, from `batch_begin` to `batch_end`, less the time
    # between `batch_calls` and `batch_taken` (the harness copying the outputs).
    host_ms: float
    take_ms: float = 0.0

    @property
    def well_formed(self) -> bool:
        return self.calls is not None and self.calls >= 1 and self.event_ms is not None


def parse_batch(msg: dict, host_ms: float, take_ms: float = 0.0) -> BatchReport:
    calls, event_ms = msg.get("calls"), msg.get("event_ms")
    return BatchReport(
        workload=str(msg.get("workload")),
        calls=calls if isinstance(calls, int) else None,
        event_ms=float(event_ms) if is_number(event_ms) else None,
        host_ms=host_ms,
        take_ms=take_ms,
    )


@dataclass(frozen=True)
class CallPrint:
    """A checked call's fingerprint: its seed, the seed of its sampled positions, the values."""

    seed: int
    sample_seed: int | None
    # As the child sent it: compare.fingerprint_matches checks its every part.
    fp: Any
    # An audit call's own ops and kernels (the timed calls' are the report's `ops`).
    ops: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()


# The fingerprint lists of a timing report: timed calls, back-to-back calls, audit calls.
PRINT_KEYS = ("prints", "batch_prints", "audit_prints")


def parse_prints(value: object) -> tuple[CallPrint, ...] | None:
    """A list of fingerprints, or None where it is not one (an item without seed or fp)."""
    if not isinstance(value, list):
        return None
    prints = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("seed"), int) or "fp" not in item:
            return None
        prints.append(
            CallPrint(
                seed=item["seed"],
                sample_seed=seed_of(item.get("sample_seed")),
                fp=item["fp"],
                ops=strings(item.get("ops", [])),
                kernels=strings(item.get("kernels", [])),
            )
        )
    return tuple(prints)


@dataclass(frozen=True)
class Sides:
    """A figure for each side of the timed calls: the submission's and the reference's."""

    sub: float
    ref: float


def _sides(value: object) -> Sides | None:
    if not isinstance(value, dict) or not all(is_number(value.get(w)) for w in ("sub", "ref")):
        return None
    return Sides(sub=value["sub"], ref=value["ref"])


@dataclass(frozen=True)
class TimingReport:
    """`timing`: a timed workload's times, fingerprints, audits, covers and ops."""

    workload: str
    # None: absent or not a non-empty list of finite times (a clean run sends no sub_ms).
    sub_ms: tuple[float, ...] | None
    ref_ms: tuple[float, ...] | None
    prints: tuple[CallPrint, ...] | None = ()
    batch_prints: tuple[CallPrint, ...] | None = ()
    audit_prints: tuple[CallPrint, ...] | None = ()
    # The launch covers (µs) and the host-bound timed calls, per side; None if not sent.
    cover_us: Sides | None = None
    host_bound: Sides | None = None
    # The aten ops of the workload's calls made without a recorder.
    ops: tuple[str, ...] = ()
    # The launch cover the child described (timing.L2Flusher.describe), for the verdict.
    cover: Any = None
    # The fields sent in a form an honest child never sends.
    malformed: frozenset[str] = frozenset()


def parse_timing(msg: dict) -> TimingReport:
    prints = {key: parse_prints(msg.get(key, [])) for key in PRINT_KEYS}
    sides = {key: _sides(msg[key]) if key in msg else None for key in ("cover_us", "host_bound")}
    malformed = {key for key, value in prints.items() if value is None}
    malformed |= {key for key, value in sides.items() if key in msg and value is None}
    return TimingReport(
        workload=str(msg.get("workload")),
        sub_ms=times(msg.get("sub_ms")),
        ref_ms=times(msg.get("ref_ms")),
        prints=prints["prints"],
        batch_prints=prints["batch_prints"],
        audit_prints=prints["audit_prints"],
        cover_us=sides["cover_us"],
        host_bound=sides["host_bound"],
        ops=strings(msg.get("ops", [])),
        cover=msg.get("cover"),
        malformed=frozenset(malformed),
    )


@dataclass(frozen=True)
class ProfiledReport:
    """`profiled`: the profiled call of a counters pass, with its fingerprint."""

    workload: str
    seed: int | None
    sample_seed: int | None
    fp: Any


def parse_profiled(msg: dict) -> ProfiledReport:
    return ProfiledReport(
        workload=str(msg.get("workload")),
        seed=seed_of(msg.get("seed")),
        sample_seed=seed_of(msg.get("sample_seed")),
        fp=msg.get("fp"),
    )


# The kinds of `error` the harness's child sends (channel.classify, and `worker_error` for a
# failure of the harness): each says that the evaluation failed and how, never what it is
# worth. A verdict's other statuses are the parent's to decide.
CHILD_ERROR_KINDS = frozenset({"compile_error", "runtime_error", "out_of_memory", "worker_error"})


@dataclass(frozen=True)
class ErrorReport:
    """`error`: what ended the child early, as it says (the exception's kind and text)."""

    kind: str
    phase: str
    workload: str | None
    message: str

    def as_sent(self) -> dict[str, Any]:
        """The message as the child sends it, for diagnostics."""
        sent: dict[str, Any] = {"event": "error", "kind": self.kind, "phase": self.phase}
        if self.workload is not None:
            sent["workload"] = self.workload
        return {**sent, "message": self.message}


def parse_error(msg: dict) -> ErrorReport:
    workload = msg.get("workload")
    return ErrorReport(
        kind=str(msg.get("kind", "runtime_error")),
        phase=str(msg.get("phase", "")),
        workload=workload if isinstance(workload, str | None) else str(workload),
        message=str(msg.get("message", "")),
    )


def flag(check: str, detail: str) -> dict[str, str]:
    """A finding against the child, as the verdict lists it under `flags`."""
    return {"check": check, "detail": detail}


def parse_notice(msg: dict) -> dict[str, str] | None:
    """The flag a notice raises; None for a notice that raises none (`kernels`)."""
    event, workload = msg.get("event"), msg.get("workload")
    if event == "bad_output":
        return flag("output_type", str(msg.get("message")))
    if event == "escaped":
        return flag(
            "escaped_work",
            f"{workload}: the output of timed call {msg.get('call')} changed after the call's "
            "own stream had finished (work on another stream or thread)",
        )
    if event == "l2_persistence":
        return flag(
            "l2_persistence",
            f"{workload}: the submission reserved {msg.get('bytes')} bytes of persisting L2 "
            "(reset before every timed call)",
        )
    if event == "patched":
        names = msg.get("names", [])
        shown = ", ".join(map(str, names if isinstance(names, list) else [names]))
        return flag("monkeypatch", f"changed during {msg.get('phase')}: {shown}")
    if event == "threads":
        return flag(
            "background_thread",
            f"{msg.get('count')} Python thread(s) left running after {msg.get('phase')}",
        )
    return None

"""Following a run live: poll `GET /api/runs/<id>/` until every kernel's evaluation has
finished, with a progress bar of finished/total, a tally per status, and the run's place in
its pool's queue with the time to its last verdict (the API's `progress`)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from .api import Api
from .display import err_console, plain, say

# The portal's queue states (docs/evaluator.md): every other status is a verdict. The run
# API also says `is_finished` per task; a portal without it is read by these.
PENDING = frozenset({"queued", "running"})
COMPLETE = "complete"
# A big bundle's run while the portal validates it (the upload answered 202), and the
# state it ends in when the bundle is refused: `errors` then lists the problems.
VALIDATING = "validating"
REJECTED = "rejected"


@dataclass(frozen=True)
class RunTally:
    """Where a run's evaluations stand: one per kernel of the run (tasks it left out,
    status `missing`, have none)."""

    statuses: dict[str, int]
    pending: frozenset[str] = PENDING  # the statuses of evaluations not finished

    @property
    def total(self) -> int:
        return sum(self.statuses.values())

    @property
    def finished(self) -> int:
        return sum(n for status, n in self.statuses.items() if status not in self.pending)

    @property
    def not_correct(self) -> int:
        """Evaluations that finished with a verdict other than correct."""
        return sum(n for s, n in self.statuses.items() if s not in self.pending and s != "correct")

    def line(self) -> str:
        return " · ".join(f"{status} {n}" for status, n in self.statuses.items()) or "no kernels"


def run_tally(run: dict[str, Any]) -> RunTally:
    results = [
        item["result"]
        for item in run["tasks"]
        if item.get("result") and item["result"].get("submission") is not None
    ]
    counts = Counter(result["status"] for result in results)
    pending = frozenset(
        result["status"]
        for result in results
        if not result.get("is_finished", result["status"] not in PENDING)
    )
    # Correct first, the other verdicts, then what is still running, then what waits.
    order = sorted(counts, key=lambda s: (s in pending, s == "queued", s != "correct", s))
    return RunTally(statuses={status: counts[status] for status in order}, pending=pending)


def _duration(seconds: float) -> str:
    minutes = round(max(0.0, seconds) / 60)
    if minutes < 1:
        return "under a minute"
    if minutes < 90:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60} min"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def progress_line(run: dict[str, Any]) -> str:
    """The run's place in its pool's queue and the time to its last verdict, in words
    (`8 ahead in the NVIDIA H200 queue · about 9 min to the last verdict (measured: …)`);
    "" when the portal sends no `progress` (a finished run, an older portal)."""
    progress = run.get("progress")
    if not isinstance(progress, dict):
        return ""
    pool = str(progress.get("hardware") or "default")
    position, running = _number(progress.get("queue_position")), progress.get("running")
    parts = []
    if position is None:
        if running:
            parts.append(f"the last {running} running on the {pool} pool")
    elif position == 0:
        parts.append(f"being evaluated on the {pool} pool ({running} running)")
    else:
        parts.append(f"{position:.0f} ahead in the {pool} queue")
    eta, each = _number(progress.get("eta_seconds")), _number(progress.get("per_evaluation_s"))
    if eta is None:
        parts.append(f"no estimate yet: {progress.get('basis', '')}")
    else:
        measured = f"{each:.0f} s per evaluation, " if each is not None else ""
        parts.append(
            f"{_duration(eta)} to the last verdict "
            f"(measured: {measured}{progress.get('slots')} at once)"
        )
    return " · ".join(parts)


class FollowTimedOut(Exception):
    """The run was still evaluating when the time given ran out; `run` is the last look."""

    def __init__(self, run: dict[str, Any]):
        super().__init__(f"run {run['id']} is still {run['state']}")
        self.run = run


def run_follow(
    api: Api, pk: int, *, timeout: float | None, poll: float, transient: bool
) -> dict[str, Any]:
    """Poll the run until the portal calls it complete (or its bundle rejected) and return
    its last JSON; raise FollowTimedOut after `timeout` seconds (None: no limit)."""
    columns = (
        SpinnerColumn(),
        TextColumn("run {task.fields[run]} {task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tally]}", markup=False),
        TimeElapsedColumn(),
        TextColumn("{task.fields[queue]}", markup=False),
    )
    deadline = None if timeout is None else time.monotonic() + timeout
    said = ""
    with Progress(*columns, console=err_console, transient=transient) as progress:
        bar = progress.add_task("", total=None, run=pk, tally="asking the portal…", queue="")
        while True:
            run = api.get(f"/api/runs/{pk}/")
            tally = run_tally(run)
            queue = plain(progress_line(run)).plain
            progress.update(
                bar,
                description=plain(run["state"]).plain,
                completed=tally.finished,
                total=tally.total,
                tally=plain(tally.line()).plain,
                queue=queue,
            )
            if queue and queue != said and not err_console.is_terminal:
                # No live display off a terminal: a plain line each time the estimate moves.
                say(f"run {pk}: {tally.finished}/{tally.total} finished · {queue}")
                said = queue
            if run["state"] in (COMPLETE, REJECTED):
                return run
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise FollowTimedOut(run)
            time.sleep(poll if left is None else min(poll, left))


def run_validation_wait(api: Api, pk: int, *, poll: float, transient: bool) -> dict[str, Any]:
    """Poll a run whose bundle the portal is validating (its upload answered 202) until
    it is accepted or rejected; return its last JSON."""
    columns = (SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=transient) as progress:
        progress.add_task(f"run {pk}: the portal is validating the bundle", total=None)
        while True:
            run = api.get(f"/api/runs/{pk}/")
            if run["state"] != VALIDATING:
                return run
            time.sleep(poll)

"""A worker that cannot write its scratch folder backs off instead of burning attempts.

When an evaluation's scratch folder cannot be prepared (a full disk or quota, a
read-only or foreign folder), nothing of the evaluation has run: it goes back to the
queue with its attempt given back (evaluator.services.evaluations), and the worker
records the reason on its heartbeat row (`WorkerBeat.state`: `disk_full` or
`scratch_unwritable`) and takes no evaluation for a while: 5 s, then twice as long
after each failure that follows the last back-off within `BACKOFF_MAX_S`, at most
`BACKOFF_MAX_S` (5 minutes). Meanwhile other workers of the pool take the evaluation.

The worker's main process tries its scratch folder every reaper round
(`worker_scratch_check`): a back-off whose time is up and whose folder takes a small
file again ends (`ok`); a folder that fails while the worker is `ok` starts one, so a
full disk shows on /healthz before an evaluation finds it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from evaluator.models import WorkerBeat, WorkerState
from evaluator.services.jobs import worker_id
from evaluator.services.workdirs import ScratchUnwritable, work_dir_probe

logger = logging.getLogger("evaluator.services.backoff")

BACKOFF_FIRST_S = 5.0
BACKOFF_MAX_S = 300.0
# The evaluation processes of a worker find its heartbeat row under this name (host:pid
# of the worker's main process), set by `evaluation_worker` before its cluster starts.
WORKER_ENV = "D2K_WORKER_ID"

# Tests replace it to see the back-off without waiting for it.
sleep: Callable[[float], None] = time.sleep


def worker_main_id() -> str:
    """The worker whose heartbeat row this process reports to."""
    return os.environ.get(WORKER_ENV) or worker_id()


def _next_delay(beat: WorkerBeat, now: datetime) -> float:
    """Twice the last back-off when this failure follows it closely, else the first."""
    recent = (
        beat.backoff_until is not None
        and beat.backoff_s > 0
        and (now - beat.backoff_until).total_seconds() < BACKOFF_MAX_S
    )
    return min(beat.backoff_s * 2, BACKOFF_MAX_S) if recent else BACKOFF_FIRST_S


def worker_backoff_record(
    *, worker: str, error: ScratchUnwritable, now: datetime | None = None
) -> float:
    """Note on `worker`'s heartbeat row that it backs off, and why: the seconds to wait.

    A back-off already running (a sibling process of the same worker set it) is kept,
    not doubled again; a worker without a heartbeat row (a command run by hand) waits
    the first delay and records nothing.
    """
    now = now or timezone.now()
    with transaction.atomic():
        beat = WorkerBeat.objects.select_for_update().filter(worker=worker).first()
        if beat is None:
            return BACKOFF_FIRST_S
        if beat.state != WorkerState.OK and beat.backoff_until and beat.backoff_until > now:
            delay = (beat.backoff_until - now).total_seconds()
        else:
            delay = _next_delay(beat, now)
            beat.backoff_s, beat.backoff_until = delay, now + timedelta(seconds=delay)
        beat.state, beat.state_reason = error.state, error.reason[:2000]
        beat.save(update_fields=["state", "state_reason", "backoff_s", "backoff_until"])
    logger.warning("worker %s backs off for %.0f s: %s", worker, delay, error.reason)
    return delay


def worker_backoff_clear(*, worker: str) -> None:
    """`worker` wrote its scratch folder again: it takes work (the delay is kept, so a
    failure soon after doubles it)."""
    cleared = (
        WorkerBeat.objects.filter(worker=worker)
        .exclude(state=WorkerState.OK)
        .update(state=WorkerState.OK, state_reason="")
    )
    if cleared:
        logger.info("worker %s writes its scratch folder again", worker)


def worker_backoff_wait(*, worker: str) -> float:
    """Before an evaluation process of `worker` claims one: sleep out its back-off.
    The seconds slept."""
    until = (
        WorkerBeat.objects.filter(worker=worker)
        .exclude(state=WorkerState.OK)
        .values_list("backoff_until", flat=True)
        .first()
    )
    if until is None:
        return 0.0
    remaining = min((until - timezone.now()).total_seconds(), BACKOFF_MAX_S)
    if remaining <= 0:
        return 0.0
    sleep(remaining)
    return remaining


def worker_scratch_check(*, worker: str, now: datetime | None = None) -> str:
    """The main process's round: try the scratch folder; end a back-off whose time is up
    when it works, start one when it does not. `worker`'s state afterwards."""
    now = now or timezone.now()
    beat = WorkerBeat.objects.filter(worker=worker).first()
    if beat is None:
        return WorkerState.OK
    if beat.state != WorkerState.OK and beat.backoff_until and beat.backoff_until > now:
        return beat.state  # still backing off: the next round tries
    try:
        work_dir_probe()
    except ScratchUnwritable as exc:
        worker_backoff_record(worker=worker, error=exc, now=now)
        return exc.state
    worker_backoff_clear(worker=worker)
    return WorkerState.OK

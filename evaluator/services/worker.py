"""An evaluation worker's life: its start-up clean-up, its process tree, its loop.

`manage.py evaluation_worker` runs django-q2's cluster under `worker_serve`, which
adds what the cluster lacks for jobs that run for minutes: every process of the
cluster, and every evaluator it starts, dies with the worker (a SIGKILL of the
worker leaves nothing running), the scratch folders of dead workers are removed
at the next start, their evaluations are taken back at once, and the reaper runs
every few seconds in the worker's own main process (never behind a long
evaluation in the queue). A worker serves one pool (evaluator.services.pools):
pinned to its GPU, it listens on that pool's queue only.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connections
from django.utils import timezone

from evaluator.harness.proctree import die_with_parent
from evaluator.services.backoff import WORKER_ENV, worker_scratch_check
from evaluator.services.jobs import db_retry, worker_id
from evaluator.services.pools import (
    pool_queue,
    worker_beat,
    worker_beat_remove,
    worker_pool_bind,
)
from evaluator.services.reaping import (
    evaluation_reap,
    evaluation_reap_lost,
    evaluation_resend_waiting,
)
from evaluator.services.workdirs import stale_work_dirs_remove
from evaluator.signals import worker_round

logger = logging.getLogger("evaluator.services.worker")


# --- a worker's start -------------------------------------------------------------


@dataclass(frozen=True)
class StartReport:
    requeued: list[int]
    failed: list[int]
    removed_dirs: list[Path]
    resent: list[int]

    def __str__(self) -> str:
        return (
            f"{len(self.requeued)} evaluation(s) of dead workers on this host queued again, "
            f"{len(self.failed)} ended worker_error, "
            f"{len(self.removed_dirs)} stale scratch folder(s) removed, "
            f"{len(self.resent)} waiting evaluation(s) sent to an idle queue again"
        )


def worker_start(*, hardware: str = "") -> StartReport:
    """At a worker's start: take back what dead workers of this host held, at once
    (their pids are gone, so no lease needs to run out), clear their folders, and
    send its pool's waiting evaluations again if its queue is idle (a stopped
    cluster's messages stay locked in the broker until they time out)."""
    now = timezone.now()
    removed_dirs = stale_work_dirs_remove()
    requeued, failed = db_retry(
        lambda: evaluation_reap_lost(now=now, dead_workers_only=True),
        what="reaping evaluations of dead workers",
    )
    resent = db_retry(
        lambda: evaluation_resend_waiting(now=now, min_age_s=0, hardware=hardware),
        what="re-sending waiting evaluations",
    )
    return StartReport(requeued=requeued, failed=failed, removed_dirs=removed_dirs, resent=resent)


class _AfterFork:
    """multiprocessing runs its after-fork hooks in every process it forks."""


_AFTER_FORK = _AfterFork()


def _child_dies_with_parent(_: object) -> None:
    die_with_parent()


def worker_process_tree_bind() -> None:
    """Every process django-q2 forks from here on (its sentinel, and the sentinel's
    workers, pusher and monitor) is SIGKILLed when its parent dies."""
    multiprocessing.util.register_after_fork(_AFTER_FORK, _child_dies_with_parent)


def worker_serve(*, say: Callable[[str], None], gpu: int | None = None, hardware: str = "") -> None:
    """Run the cluster of one pool until it stops (SIGTERM or SIGINT), reaping and
    reporting itself on the way.

    `gpu` pins the worker and its evaluators to that GPU and names the pool after
    it; `hardware` alone names a pool without checking a GPU (a CPU pool, tests).
    """
    from django_q.cluster import Cluster

    hardware, found = worker_pool_bind(gpu=gpu, hardware=hardware)
    worker_process_tree_bind()
    me, started_at = worker_id(), timezone.now()
    # Its evaluation processes report a scratch folder they cannot write on its row.
    os.environ[WORKER_ENV] = me
    pool = f"the {hardware} pool" if hardware else "the default pool"
    on = f" on GPU {found.index} ({found.uuid})" if found else ""
    say(f"Worker {me} serves {pool}{on}, queue {pool_queue(hardware)}.")
    say(f"Worker start: {worker_start(hardware=hardware)}.")
    connections.close_all()  # never share a connection with the forked cluster
    cluster = Cluster()
    cluster.start()
    interval = settings.D2K_REAP_INTERVAL_S
    try:
        while cluster.sentinel is not None and cluster.sentinel.is_alive():
            try:
                worker_beat(worker=me, hardware=hardware, gpu=found, started_at=started_at)
                worker_scratch_check(worker=me)
                evaluation_reap()
                worker_round.send(sender=None)
            except Exception:  # the next round tries again; the worker keeps working
                logger.exception("reaper round failed")
            cluster.sentinel.join(timeout=interval)
    finally:
        with contextlib.suppress(Exception):
            worker_beat_remove(worker=me)

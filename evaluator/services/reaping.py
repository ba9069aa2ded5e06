"""The reaper: evaluations nobody will finish, taken back.

A running row whose worker stopped sending heartbeats (its lease ran out), or whose
worker process on this host is dead, is queued again, or ends `worker_error` after
its last attempt; a queued row whose wake-up call was lost is sent to the broker
again; a dead worker of this host also loses the scratch folder it left. The
manager's schedule and every worker's main process run `evaluation_reap`;
a starting worker runs the two halves for its own host and pool (`worker_start`).
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from django_q.brokers import get_broker

from evaluator.harness.proctree import pid_alive
from evaluator.models import Evaluation, EvaluationStatus
from evaluator.services.evaluations import evaluation_fail_for_infrastructure
from evaluator.services.jobs import db_retry, evaluation_enqueue, evaluation_requeue
from evaluator.services.pools import pool_queue
from evaluator.services.workdirs import work_dir_remove, work_dirs_of

logger = logging.getLogger("evaluator.services.reaping")


def _worker_pid_on_this_host(worker: str) -> int | None:
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    return int(pid)


@dataclass(frozen=True)
class ReapReport:
    requeued: list[int]
    failed: list[int]
    reenqueued: list[int]

    def __str__(self) -> str:
        return (
            f"{len(self.requeued)} lost evaluation(s) queued again, "
            f"{len(self.failed)} ended worker_error, "
            f"{len(self.reenqueued)} waiting evaluation(s) sent to the broker again"
        )


def _expired_running(now: datetime, *, dead_workers_only: bool) -> list[Evaluation]:
    rows = Evaluation.objects.filter(status=EvaluationStatus.RUNNING)
    if not dead_workers_only:
        rows = rows.filter(Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True))
    if connection.features.has_select_for_update_skip_locked:
        # Two reapers on PostgreSQL split the rows between them instead of queuing one twice.
        rows = rows.select_for_update(skip_locked=True)
    found = list(rows.only("pk", "worker", "attempts", "heartbeat_at", "lease_expires_at"))
    if dead_workers_only:
        found = [
            e
            for e in found
            if (pid := _worker_pid_on_this_host(e.worker)) is not None and not pid_alive(pid)
        ]
    return found


def evaluation_reap_lost(*, now: datetime, dead_workers_only: bool) -> tuple[list[int], list[int]]:
    """Running rows whose worker is gone (its lease ran out, or, with
    `dead_workers_only`, its pid on this host is dead): queued again, or ended
    `worker_error` after the last attempt. (requeued ids, failed ids)."""
    requeued, failed = [], []
    with transaction.atomic():
        lost = _expired_running(now, dead_workers_only=dead_workers_only)
    for evaluation in lost:
        beat = (
            evaluation.heartbeat_at.isoformat(timespec="seconds")
            if evaluation.heartbeat_at
            else "never"
        )
        reason = (
            f"Attempt {evaluation.attempts} was lost: worker {evaluation.worker or '?'} stopped "
            f"sending heartbeats (last {beat})."
        )
        if evaluation.attempts >= settings.D2K_EVALUATION_MAX_ATTEMPTS:
            if evaluation_fail_for_infrastructure(
                evaluation_id=evaluation.pk, worker=evaluation.worker, reason=reason
            ):
                failed.append(evaluation.pk)
                _dead_work_dirs_remove(evaluation)
        elif evaluation_requeue(
            evaluation_id=evaluation.pk, worker=evaluation.worker, reason=f"{reason} Queued again."
        ):
            requeued.append(evaluation.pk)
            _dead_work_dirs_remove(evaluation)
    return requeued, failed


def _dead_work_dirs_remove(evaluation: Evaluation) -> None:
    """The scratch folder a dead worker of this host left for `evaluation`, and whatever
    still runs in it, removed (a live worker's is its own to remove: its attempt ends
    and drops its result). A worker of another host: that host's next worker start."""
    pid = _worker_pid_on_this_host(evaluation.worker)
    if pid is None or pid_alive(pid):
        return
    for directory in work_dirs_of(worker=evaluation.worker, evaluation_id=evaluation.pk):
        if work_dir_remove(directory):
            logger.info("reaper: removed %s of evaluation %s", directory, evaluation.pk)
        else:
            logger.error("reaper: could not remove %s of evaluation %s", directory, evaluation.pk)


def evaluation_resend_waiting(
    *, now: datetime, min_age_s: float | None = None, hardware: str | None = None
) -> list[int]:
    """Queued rows whose wake-up call is gone (a broker that lost it, a killed cluster
    holding it), sent again once their pool's queue has nothing waiting to hand out.

    Rows count as waiting after `min_age_s` (D2K_EVALUATION_REQUEUE_S); a starting
    worker passes 0 for its own pool (`hardware`): the messages a stopped cluster had
    taken stay locked in the broker until they time out, and nobody else is serving.
    A duplicate call costs nothing: the claim lets one worker win.
    """
    age = settings.D2K_EVALUATION_REQUEUE_S if min_age_s is None else min_age_s
    stale = now - timedelta(seconds=age)
    waiting = Evaluation.objects.filter(status=EvaluationStatus.QUEUED).filter(
        Q(enqueued_at__lt=stale) | Q(enqueued_at__isnull=True)
    )
    if hardware is not None:
        waiting = waiting.filter(target_hardware=hardware)
    idle: dict[str, bool] = {}
    sent = []
    for pk, hardware in waiting.values_list("pk", "target_hardware"):
        if hardware not in idle:
            try:
                idle[hardware] = not get_broker(pool_queue(hardware)).queue_size()
            except Exception:
                logger.exception("reaper: cannot read the queue size of %s", pool_queue(hardware))
                idle[hardware] = False
        if not idle[hardware]:
            continue
        with transaction.atomic():
            if Evaluation.objects.filter(pk=pk, status=EvaluationStatus.QUEUED).update(
                enqueued_at=now
            ):
                evaluation_enqueue(evaluation_id=pk, hardware=hardware)
                sent.append(pk)
    return sent


def evaluation_reap(*, now: datetime | None = None) -> ReapReport:
    """Queue again every evaluation that nobody will finish (docs/operations.md)."""
    now = now or timezone.now()
    requeued, failed = db_retry(
        lambda: evaluation_reap_lost(now=now, dead_workers_only=False),
        what="reaping lost evaluations",
    )
    reenqueued = db_retry(
        lambda: evaluation_resend_waiting(now=now), what="re-sending waiting evaluations"
    )
    report = ReapReport(requeued=requeued, failed=failed, reenqueued=reenqueued)
    if requeued or failed or reenqueued:
        logger.info("reaper: %s", report)
    return report

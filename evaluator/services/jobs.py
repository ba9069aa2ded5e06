"""The evaluation row as a durable job: claim, lease and heartbeat, hand-back, reaping.

The broker (django-q2) only carries wake-up calls naming an evaluation's primary key.
What is queued, who runs what and how often it was tried lives in the Evaluation row,
so a lost broker message, a killed worker or a locked database never loses an
evaluation: the reaper (evaluator.services.reaping) finds every queued row nobody
will take and every running row whose lease ran out, and queues it again
(docs/operations.md).

Every state change is a conditional UPDATE (`WHERE status = … AND worker = …`), which
is atomic on SQLite and PostgreSQL alike: two workers handed the same id, or a worker
and the reaper, cannot both win.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TypeVar

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import F, OuterRef, Q, Subquery
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.tasks import async_task

from evaluator.claimorder import CLAIM_ORDER, claim_order_fields
from evaluator.models import Evaluation, EvaluationStatus
from evaluator.services.pools import pool_queue, worker_hardware

logger = logging.getLogger("evaluator.services.jobs")

TASK_PATH = "evaluator.tasks.evaluation_run_next"
T = TypeVar("T")


# --- the database may be busy ---------------------------------------------------


def db_retry(
    operation: Callable[[], T], *, what: str, attempts: int = 8, first_delay_s: float = 0.2
) -> T:
    """`operation()`, tried again with jittered exponential backoff while the database
    answers an OperationalError (SQLite's `database is locked`, a PostgreSQL restart).

    The last error is raised: the row is then left as it was, and the reaper takes it
    up again, so a claim or a store is delayed, never dropped.
    """
    delay = first_delay_s
    for attempt in range(1, attempts + 1):
        try:
            return operation()
        except OperationalError as exc:
            if attempt == attempts:
                raise
            logger.warning("%s: database busy (%s); try %d of %d", what, exc, attempt, attempts)
            # A broken connection must be reopened, not reused; inside a transaction the
            # caller's atomic block owns the connection and decides.
            if not connection.in_atomic_block:
                connection.close_if_unusable_or_obsolete()
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 10.0)
    raise AssertionError("unreachable")


# --- identity -------------------------------------------------------------------


def worker_id() -> str:
    """This process as the `worker` column names it: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"[:200]


def _lease() -> timedelta:
    return timedelta(seconds=settings.D2K_EVALUATION_LEASE_S)


# --- queueing -------------------------------------------------------------------


def evaluation_enqueue(*, evaluation_id: int, hardware: str | None = None) -> None:
    """Send the wake-up call to the evaluation's pool once the current transaction
    commits (`hardware`: its target, when the caller has it at hand).

    A broker that fails here loses nothing: the row is `queued` with an old
    `enqueued_at`, and the reaper sends the call again.
    """
    if hardware is None:
        hardware = (
            Evaluation.objects.filter(pk=evaluation_id)
            .values_list("target_hardware", flat=True)
            .first()
            or ""
        )
    queue = pool_queue(hardware)

    def send() -> None:
        try:
            async_task(TASK_PATH, evaluation_id, cluster=queue)
        except Exception:
            logger.exception(
                "evaluation %s: the broker refused it; the reaper retries", evaluation_id
            )

    transaction.on_commit(send)


def broker_ping() -> None:
    """Raise when the broker cannot take a message now (an upload answers 503 then)."""
    broker = get_broker()
    if not broker.ping():
        raise ConnectionError("the task broker did not answer")


# --- claiming, heartbeats, hand-back ----------------------------------------------


def evaluation_claim(*, evaluation_id: int, worker: str) -> Evaluation | None:
    """Take a queued evaluation of this worker's pool for `worker`, or None when it is
    not (or no longer) queued, or is another pool's."""
    now = timezone.now()

    def claim() -> int:
        return Evaluation.objects.filter(
            pk=evaluation_id, status=EvaluationStatus.QUEUED, target_hardware=worker_hardware()
        ).update(
            status=EvaluationStatus.RUNNING,
            worker=worker,
            attempts=F("attempts") + 1,
            started_at=now,
            finished_at=None,
            state_changed_at=now,
            heartbeat_at=now,
            lease_expires_at=now + _lease(),
            updated_at=now,
        )

    if not db_retry(claim, what=f"claim of evaluation {evaluation_id}"):
        current = (
            Evaluation.objects.filter(pk=evaluation_id)
            .values("status", "worker", "target_hardware")
            .first()
        )
        if current is None:
            logger.error("evaluation_run: ignoring unknown evaluation id %s", evaluation_id)
        elif current["target_hardware"] != worker_hardware():
            logger.warning(
                "evaluation %s is for the %s pool; this worker serves %s: not taken",
                evaluation_id,
                current["target_hardware"] or "default",
                worker_hardware() or "the default pool",
            )
        else:
            logger.info(
                "evaluation %s is %s (worker %s); not taken again",
                evaluation_id,
                current["status"],
                current["worker"] or "none",
            )
        return None
    return Evaluation.objects.select_related(
        "submission__task", "submission__task_version__task"
    ).get(pk=evaluation_id)


def _owner_served_at() -> Subquery:
    """When the evaluation's owner last had an evaluation start (null: never)."""
    return Subquery(
        Evaluation.objects.filter(
            submission__owner=OuterRef("submission__owner"), started_at__isnull=False
        )
        .order_by("-started_at")
        .values("started_at")[:1]
    )


def evaluation_claim_next(*, worker: str) -> Evaluation | None:
    """Take the next queued evaluation of this worker's pool for `worker`, or None when
    none is queued: round-robin across owners (the owner whose evaluation started
    least recently goes first, one who never had one before anyone), so that one lab's
    500 kernels do not hold back another's 26; within an owner, oldest first, a run
    and its twin together, task by task (evaluator.claimorder).

    PostgreSQL skips rows another claimer has locked; SQLite's immediate
    transactions let one writer at a time choose. The conditional update settles
    any race that remains.
    """

    def claim() -> int | None:
        for _ in range(10):
            with transaction.atomic():
                rows = Evaluation.objects.filter(
                    status=EvaluationStatus.QUEUED, target_hardware=worker_hardware()
                ).annotate(owner_served_at=_owner_served_at(), **claim_order_fields())
                if connection.features.has_select_for_update_skip_locked:
                    rows = rows.select_for_update(skip_locked=True, of=("self",))
                pk = (
                    rows.order_by(F("owner_served_at").asc(nulls_first=True), *CLAIM_ORDER)
                    .values_list("pk", flat=True)
                    .first()
                )
            if pk is None:
                return None
            if evaluation_claim(evaluation_id=pk, worker=worker) is not None:
                return pk
        return None

    pk = db_retry(claim, what="claim of the next evaluation")
    if pk is None:
        return None
    return Evaluation.objects.select_related(
        "submission__task", "submission__task_version__task"
    ).get(pk=pk)


def _owned(evaluation_id: int, worker: str) -> Q:
    return Q(pk=evaluation_id, status=EvaluationStatus.RUNNING, worker=worker)


def evaluation_heartbeat(*, evaluation_id: int, worker: str) -> bool:
    """Extend the lease; False when the row is no longer this worker's (it was reaped).

    A row this connection cannot see at all (the claim is still inside a transaction
    of the caller, as in a test) is no evidence of a lost lease: True.
    """
    now = timezone.now()
    if Evaluation.objects.filter(_owned(evaluation_id, worker)).update(
        heartbeat_at=now, lease_expires_at=now + _lease()
    ):
        return True
    return not Evaluation.objects.filter(pk=evaluation_id).exists()


def evaluation_locked_if_owned(*, evaluation_id: int, worker: str) -> Evaluation | None:
    """Inside a transaction: the row locked for its store, if this worker still holds it."""
    return (
        Evaluation.objects.select_for_update()
        .filter(_owned(evaluation_id, worker))
        .select_related("submission")
        .first()
    )


def evaluation_requeue(
    *,
    evaluation_id: int,
    worker: str,
    reason: str,
    enqueue: bool = True,
    refund_attempt: bool = False,
) -> bool:
    """Hand `worker`'s running evaluation back to the queue after an infrastructure
    failure, with a broker message unless `enqueue` is False (a caller that claims it
    again at once). With `refund_attempt` the claim's attempt is given back (nothing of
    the evaluation ran). False when the row had moved on meanwhile."""
    now = timezone.now()
    rows = Evaluation.objects.filter(
        pk=evaluation_id, status=EvaluationStatus.RUNNING, worker=worker
    )
    refund = {"attempts": F("attempts") - 1} if refund_attempt else {}
    with transaction.atomic():
        changed = rows.update(
            **refund,
            status=EvaluationStatus.QUEUED,
            message=reason,
            last_error=reason,
            state_changed_at=now,
            enqueued_at=now,
            lease_expires_at=None,
            updated_at=now,
        )
        if changed and enqueue:
            evaluation_enqueue(evaluation_id=evaluation_id)
    return bool(changed)


class Heartbeat(threading.Thread):
    """Extends the lease while the evaluator runs; notes when the lease was lost."""

    def __init__(self, *, evaluation_id: int, worker: str) -> None:
        super().__init__(name=f"heartbeat-{evaluation_id}", daemon=True)
        self.evaluation_id, self.worker = evaluation_id, worker
        self.interval_s = max(1.0, settings.D2K_EVALUATION_LEASE_S / 4)
        self.lost = False
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self._stopping.wait(self.interval_s):
                try:
                    if not evaluation_heartbeat(
                        evaluation_id=self.evaluation_id, worker=self.worker
                    ):
                        self.lost = True
                        logger.warning(
                            "evaluation %s: lease lost (reaped meanwhile)", self.evaluation_id
                        )
                        return
                except OperationalError as exc:  # busy: the next beat tries again
                    logger.warning("evaluation %s: heartbeat failed: %s", self.evaluation_id, exc)
        finally:
            connection.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=30)


@contextmanager
def heartbeat(*, evaluation_id: int, worker: str) -> Iterator[Heartbeat]:
    beat = Heartbeat(evaluation_id=evaluation_id, worker=worker)
    beat.start()
    try:
        yield beat
    finally:
        beat.stop()

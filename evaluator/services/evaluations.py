"""Queueing, running, storing and reviewing evaluations (the runner does the CLI part)."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from evaluator.harness.verdict import Verdict, environment_gpu
from evaluator.models import Evaluation, EvaluationStatus, Review, WorkloadResult
from evaluator.services import backoff
from evaluator.services.backoff import (
    worker_backoff_clear,
    worker_backoff_record,
    worker_backoff_wait,
    worker_main_id,
)
from evaluator.services.jobs import (
    db_retry,
    evaluation_claim,
    evaluation_claim_next,
    evaluation_enqueue,
    evaluation_locked_if_owned,
    evaluation_requeue,
    heartbeat,
    worker_id,
)
from evaluator.services.pools import evaluation_target_hardware
from evaluator.services.runner import (
    WorkerError,
    json_safe,
    verdict_from_cli,
    worker_error_verdict,
    workload_rows,
)
from evaluator.services.workdirs import ScratchUnwritable
from evaluator.signals import REVIEW, VERDICT, evaluation_result_changed
from submissions.models import Submission

logger = logging.getLogger("evaluator.services")

LOG_LIMIT = 200_000
# Of a worker error's evaluator stderr, the lines the worker's log keeps (for its operator:
# an attempt that is taken again keeps no log of its own).
STDERR_TAIL_LINES = 40


# --- queueing -------------------------------------------------------------------


def evaluation_create(*, submission: Submission, enqueue: bool = True) -> Evaluation:
    """A new queued evaluation of `submission` (a first run or an admin's re-run)."""
    now = timezone.now()
    run = submission.run
    with transaction.atomic():
        evaluation = Evaluation(
            submission=submission,
            status=EvaluationStatus.QUEUED,
            state_changed_at=now,
            enqueued_at=now,
            target_hardware=evaluation_target_hardware(run_hardware=run.hardware if run else ""),
        )
        evaluation.full_clean()
        evaluation.save()
        if enqueue:
            evaluation_enqueue(evaluation_id=evaluation.pk, hardware=evaluation.target_hardware)
    return evaluation


# --- running --------------------------------------------------------------------


def evaluation_run(*, evaluation_id: Any, requeue: bool = True) -> Evaluation | None:
    """Run the evaluation `evaluation_id` to a verdict and store it, exactly once.

    The row is claimed atomically (a second worker handed the same id leaves it
    alone) and its lease extended by a heartbeat while the evaluator runs. A worker
    error (no valid verdict, a non-zero exit, the safety timeout, or the CLI's own
    `worker_error`) hands it back to the queue while attempts remain: through the
    broker, or at once in this process when `requeue` is False (the management
    command); after the last attempt it is stored as `worker_error`. A worker that
    lost its lease meanwhile (the reaper gave the row to another) stores nothing.
    """
    try:
        evaluation_id = int(evaluation_id)
    except (TypeError, ValueError):
        logger.error("evaluation_run: ignoring malformed evaluation id %r", evaluation_id)
        return None
    worker = worker_id()
    while True:
        if requeue:
            worker_backoff_wait(worker=worker_main_id())
        evaluation = evaluation_claim(evaluation_id=evaluation_id, worker=worker)
        if evaluation is None:
            return Evaluation.objects.filter(pk=evaluation_id).first()
        try:
            finished = _evaluation_attempt(evaluation=evaluation, worker=worker, requeue=requeue)
        except ScratchUnwritable as exc:
            if not requeue:
                raise  # a command run by hand says so; a worker takes the evaluation
            _backoff(exc)
            finished = None
        if finished is not None or requeue:
            return finished or Evaluation.objects.filter(pk=evaluation_id).first()


def evaluation_run_next(*, hint: Any = None) -> Evaluation | None:
    """The queue's entry: run the next queued evaluation (round-robin across owners,
    oldest first within one), whichever message woke us.

    Each queued evaluation has a message, so each message runs one evaluation; but
    taking the queue's next rather than the message's own means that an evaluation a dead
    worker lost, queued again, runs before its owner's later uploads. `hint` (the
    message's id) only names what woke the worker in the log.
    """
    worker = worker_id()
    worker_backoff_wait(worker=worker_main_id())
    evaluation = evaluation_claim_next(worker=worker)
    if evaluation is None:
        known = (pk := _int_or_none(hint)) is not None and Evaluation.objects.filter(pk=pk).exists()
        if hint is not None and not known:
            logger.error("evaluation_run: ignoring unknown evaluation id %r", hint)
        return None
    try:
        finished = _evaluation_attempt(evaluation=evaluation, worker=worker, requeue=True)
    except ScratchUnwritable as exc:
        _backoff(exc)
        finished = None
    return finished or Evaluation.objects.filter(pk=evaluation.pk).first()


def _backoff(error: ScratchUnwritable) -> None:
    """This worker cannot write its scratch folder: it records why and sleeps
    (evaluator.services.backoff), while other workers take the evaluation."""
    backoff.sleep(worker_backoff_record(worker=worker_main_id(), error=error))


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _evaluation_attempt(*, evaluation: Evaluation, worker: str, requeue: bool) -> Evaluation | None:
    """One attempt of a claimed evaluation: the stored evaluation, or None when it went
    back to the queue (or was lost to the reaper meanwhile)."""
    evaluation_id = evaluation.pk
    verdict: Verdict | None = None
    unwritable: ScratchUnwritable | None = None
    with heartbeat(evaluation_id=evaluation_id, worker=worker) as beat:
        try:
            verdict = verdict_from_cli(evaluation)
            reason, log = verdict.message, verdict.log
        except WorkerError as exc:
            logger.warning("evaluation %s: worker error: %s", evaluation_id, exc.reason)
            if exc.log:  # a retried attempt keeps nothing else of it
                tail = "\n".join(exc.log.strip().splitlines()[-STDERR_TAIL_LINES:])
                logger.warning("evaluation %s: the evaluator's stderr:\n%s", evaluation_id, tail)
            reason, log = exc.reason, exc.log
        except ScratchUnwritable as exc:
            unwritable = exc
    if unwritable is not None:
        _evaluation_hand_back(evaluation_id=evaluation_id, worker=worker, error=unwritable)
        raise unwritable
    worker_backoff_clear(worker=worker_main_id())
    if beat.lost:
        logger.warning("evaluation %s: lease lost while running; result dropped", evaluation_id)
        return None
    infrastructure = verdict is None or verdict.status == EvaluationStatus.WORKER_ERROR
    if infrastructure and evaluation.attempts < settings.D2K_EVALUATION_MAX_ATTEMPTS:
        message = f"Attempt {evaluation.attempts} hit a worker error ({reason}); retrying."
        db_retry(
            partial(
                evaluation_requeue,
                evaluation_id=evaluation_id,
                worker=worker,
                reason=message,
                enqueue=requeue,
            ),
            what=f"requeue of evaluation {evaluation_id}",
        )
        return None
    if verdict is None:
        verdict = worker_error_verdict(evaluation=evaluation, reason=reason, log=log)
    return db_retry(
        partial(_evaluation_store, evaluation_id=evaluation_id, worker=worker, verdict=verdict),
        what=f"store of evaluation {evaluation_id}",
    )


def _evaluation_hand_back(*, evaluation_id: int, worker: str, error: ScratchUnwritable) -> None:
    """Nothing of the evaluation ran: back to the queue with its attempt given back, with
    a broker message so that another worker of the pool takes it."""
    logger.warning("evaluation %s: handed back: %s", evaluation_id, error.reason)
    message = f"Worker {worker} {error.reason}; queued again (the attempt does not count)."
    db_retry(
        partial(
            evaluation_requeue,
            evaluation_id=evaluation_id,
            worker=worker,
            reason=message,
            refund_attempt=True,
        ),
        what=f"hand-back of evaluation {evaluation_id}",
    )


def evaluation_fail_for_infrastructure(*, evaluation_id: int, worker: str, reason: str) -> bool:
    """The reaper's last word on a row that lost its worker too often: `worker_error`."""
    with transaction.atomic():
        evaluation = evaluation_locked_if_owned(evaluation_id=evaluation_id, worker=worker)
        if evaluation is None:
            return False
        verdict = worker_error_verdict(evaluation=evaluation, reason=reason, log="")
        evaluation_verdict_write(evaluation=evaluation, verdict=verdict)
    return True


def owner_log_clean(log: str) -> str:
    """The owner's log without the torch profiler's own `USDT:` lines (its probes, printed
    once per profiled call: they drowned what the kernel printed), counted in one line."""
    lines = log.splitlines(keepends=True)
    kept = [line for line in lines if not line.lstrip().startswith("USDT:")]
    dropped = len(lines) - len(kept)
    if not dropped:
        return log
    return "".join(kept) + f"[{dropped} torch-profiler USDT line(s) left out]\n"


def _log_clip(log: str) -> str:
    if len(log) <= LOG_LIMIT:
        return log
    half = LOG_LIMIT // 2
    return f"{log[:half]}\n… [{len(log) - LOG_LIMIT:,} characters cut] …\n{log[-half:]}"


def _evaluation_store(*, evaluation_id: int, worker: str, verdict: Verdict) -> Evaluation | None:
    with transaction.atomic():
        evaluation = evaluation_locked_if_owned(evaluation_id=evaluation_id, worker=worker)
        if evaluation is None:
            # The reaper gave the row to another worker meanwhile: its verdict counts.
            logger.warning(
                "evaluation %s: no longer held by %s; verdict dropped", evaluation_id, worker
            )
            return Evaluation.objects.filter(pk=evaluation_id).first()
        evaluation_verdict_write(evaluation=evaluation, verdict=verdict)
    logger.info("evaluation %s: %s", evaluation.pk, evaluation.status)
    return evaluation


def evaluation_hardware(environment: dict) -> str:
    """The GPU a verdict was timed on; blank for interpret mode, which times nothing."""
    return environment_gpu(environment)[:200]


def evaluation_verdict_write(*, evaluation: Evaluation, verdict: Verdict) -> None:
    """Inside the caller's transaction, with the row locked: the verdict and its results."""
    now = timezone.now()
    evaluation.status = str(verdict.status)
    evaluation.message = verdict.message
    evaluation.flags = [dict(flag) for flag in verdict.flags]
    evaluation.environment = json_safe(verdict.environment)
    evaluation.hardware = evaluation_hardware(verdict.environment)
    evaluation.log = _log_clip(verdict.log)
    evaluation.public_log = _log_clip(owner_log_clean(verdict.public_log))
    evaluation.mode = verdict.mode[:10]
    evaluation.evaluator_version = verdict.evaluator_version[:32]
    evaluation.finished_at = now
    evaluation.state_changed_at = now
    evaluation.lease_expires_at = None
    if verdict.status == EvaluationStatus.WORKER_ERROR:
        evaluation.last_error = verdict.message
    evaluation.review = (
        Review.PENDING if verdict.status == EvaluationStatus.FLAGGED else Review.NONE
    )
    evaluation.full_clean(exclude=["submission"])
    evaluation.save()
    evaluation.results.all().delete()
    rows = workload_rows(verdict)
    for row in rows:
        row.evaluation = evaluation
    WorkloadResult.objects.bulk_create(rows)
    _result_changed_on_commit(evaluation=evaluation, change=VERDICT)


def _result_changed_on_commit(*, evaluation: Evaluation, change: str) -> None:
    """Tell the listeners (the run's state, the scores) once the change is committed."""
    send = partial(
        evaluation_result_changed.send,
        sender=Evaluation,
        evaluation_id=evaluation.pk,
        submission_id=evaluation.submission_id,
        run_id=evaluation.submission.run_id,
        change=change,
    )
    transaction.on_commit(send)


# --- review -------------------------------------------------------------------


def evaluation_review(
    *, evaluation: Evaluation, decision: str, note: str = "", reviewer: User
) -> Evaluation:
    """An admin's decision on a flagged result: `hacked` hides it from rankings (the
    evidence stays), `cleared` lets it count. The status stays `flagged` either way."""
    if decision not in (Review.HACKED, Review.CLEARED):
        raise ValidationError(f"Unknown review decision {decision!r}: use 'hacked' or 'cleared'.")
    if evaluation.status != EvaluationStatus.FLAGGED:
        raise ValidationError(
            f"Evaluation #{evaluation.pk} is {evaluation.status}; "
            "only flagged results are reviewed."
        )
    evaluation.review = decision
    evaluation.review_note = note
    evaluation.reviewed_by = reviewer
    evaluation.reviewed_at = timezone.now()
    evaluation.full_clean(exclude=["submission"])
    evaluation.save(
        update_fields=["review", "review_note", "reviewed_by", "reviewed_at", "updated_at"]
    )
    _result_changed_on_commit(evaluation=evaluation, change=REVIEW)
    return evaluation

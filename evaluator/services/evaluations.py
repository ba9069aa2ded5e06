"""Queueing, running, storing and reviewing evaluations (the runner does the CLI part)."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from evaluator.models import Evaluation, EvaluationStatus, Review, WorkloadResult
from evaluator.services.runner import (
    Verdict,
    WorkerError,
    verdict_from_cli,
    worker_error_verdict,
)
from submissions.models import Submission

logger = logging.getLogger("evaluator.services")

TASK_PATH = "evaluator.tasks.evaluation_run"
MAX_ATTEMPTS = 3
LOG_LIMIT = 200_000


# --- queueing -------------------------------------------------------------------


def evaluation_enqueue(*, evaluation_id: int) -> None:
    """Hand the evaluation to the queue once the current transaction commits."""
    transaction.on_commit(lambda: async_task(TASK_PATH, evaluation_id))


def evaluation_create(*, submission: Submission, enqueue: bool = True) -> Evaluation:
    """A new queued evaluation of `submission` (a first run or an admin's re-run)."""
    with transaction.atomic():
        evaluation = Evaluation(submission=submission, status=EvaluationStatus.QUEUED)
        evaluation.full_clean()
        evaluation.save()
        if enqueue:
            evaluation_enqueue(evaluation_id=evaluation.pk)
    return evaluation


# --- running --------------------------------------------------------------------


def evaluation_run(*, evaluation_id: int, requeue: bool = True) -> Evaluation | None:
    """Run one evaluation to a verdict and store it.

    A worker error (no valid verdict, a non-zero exit, the safety timeout, or the
    CLI's own `worker_error`) is retried while attempts < MAX_ATTEMPTS: through the
    queue, or at once in this process when `requeue` is False (the management
    command). Unknown ids and finished evaluations are logged and left alone.
    """
    while True:
        evaluation = _evaluation_claim(evaluation_id)
        if evaluation is None or evaluation.status != EvaluationStatus.RUNNING:
            return evaluation
        verdict: Verdict | None = None
        try:
            verdict = verdict_from_cli(evaluation)
            reason, log = verdict.message, verdict.log
        except WorkerError as exc:
            logger.warning("evaluation %s: worker error: %s", evaluation.pk, exc.reason)
            reason, log = exc.reason, exc.log
        retry = evaluation.attempts < MAX_ATTEMPTS and (
            verdict is None or verdict.status == EvaluationStatus.WORKER_ERROR
        )
        if retry:
            _evaluation_requeue(evaluation=evaluation, reason=reason, enqueue=requeue)
            if requeue:
                return evaluation
            continue
        if verdict is None:
            verdict = worker_error_verdict(evaluation=evaluation, reason=reason, log=log)
        return _evaluation_store(evaluation=evaluation, verdict=verdict)


def _evaluation_claim(evaluation_id: Any) -> Evaluation | None:
    try:
        evaluation_id = int(evaluation_id)
    except (TypeError, ValueError):
        logger.error("evaluation_run: ignoring malformed evaluation id %r", evaluation_id)
        return None
    with transaction.atomic():
        evaluation = Evaluation.objects.select_for_update().filter(pk=evaluation_id).first()
        if evaluation is None:
            logger.error("evaluation_run: ignoring unknown evaluation id %s", evaluation_id)
            return None
        if evaluation.is_finished:
            logger.info("evaluation %s is already %s; not re-run", evaluation_id, evaluation.status)
            return evaluation
        evaluation.status = EvaluationStatus.RUNNING
        evaluation.started_at = timezone.now()
        evaluation.finished_at = None
        evaluation.worker = f"{socket.gethostname()}:{os.getpid()}"[:200]
        evaluation.attempts += 1
        evaluation.save(
            update_fields=[
                "status",
                "started_at",
                "finished_at",
                "worker",
                "attempts",
                "updated_at",
            ]
        )
    return Evaluation.objects.select_related(
        "submission__task", "submission__task_version__task"
    ).get(pk=evaluation_id)


def _evaluation_requeue(*, evaluation: Evaluation, reason: str, enqueue: bool) -> None:
    evaluation.status = EvaluationStatus.QUEUED
    evaluation.message = f"Attempt {evaluation.attempts} hit a worker error ({reason}); retrying."
    evaluation.save(update_fields=["status", "message", "updated_at"])
    if enqueue:
        evaluation_enqueue(evaluation_id=evaluation.pk)


def _log_clip(log: str) -> str:
    if len(log) <= LOG_LIMIT:
        return log
    half = LOG_LIMIT // 2
    return f"{log[:half]}\n… [{len(log) - LOG_LIMIT:,} characters cut] …\n{log[-half:]}"


def _evaluation_store(*, evaluation: Evaluation, verdict: Verdict) -> Evaluation:
    with transaction.atomic():
        evaluation.status = verdict.status
        evaluation.message = verdict.message
        evaluation.flags = verdict.flags
        evaluation.environment = verdict.environment
        evaluation.log = _log_clip(verdict.log)
        evaluation.mode = verdict.mode
        evaluation.evaluator_version = verdict.evaluator_version
        evaluation.finished_at = timezone.now()
        evaluation.review = (
            Review.PENDING if verdict.status == EvaluationStatus.FLAGGED else Review.NONE
        )
        evaluation.full_clean(exclude=["submission"])
        evaluation.save()
        evaluation.results.all().delete()
        for result in verdict.workloads:
            result.evaluation = evaluation
        WorkloadResult.objects.bulk_create(verdict.workloads)
        if run_id := evaluation.submission.run_id:
            transaction.on_commit(lambda: _run_refresh_state(run_id=run_id))
    logger.info("evaluation %s: %s", evaluation.pk, evaluation.status)
    return evaluation


def _run_refresh_state(*, run_id: int) -> None:
    # Imported here: runs.services builds on submissions.services, which imports this module.
    from runs.services import run_refresh_state

    run_refresh_state(run_id=run_id)


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
    return evaluation

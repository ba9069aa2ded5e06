"""Machine assessments: what the detectors find in a submission's source and what the
counter rules read from its verdict's profiler counters, recomputed with its scores."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from evaluator.models import Evaluation
from scoring.formulas import counts_for_scoring
from scoring.models import Assessment, AssessmentKind, AssessmentSource
from submissions.models import Submission
from task_catalog.models import DesignProperty, Workload
from taskformat.counter_rules import (
    CounterRuleError,
    counter_assess,
    counter_pass_failed,
    pass_failed,
)
from taskformat.detectors import DetectorError, DetectorResult, assess
from taskformat.spec import Mode, WorkloadRole

logger = logging.getLogger("scoring")


def evaluation_counts(evaluation: Evaluation | None) -> bool:
    """Correct for scoring: `correct`, or `flagged` and cleared by an admin; never a
    confirmed hack."""
    if evaluation is None:
        return False
    return counts_for_scoring(status=evaluation.status, review=evaluation.review)


def _machine_write(
    *,
    submission: Submission,
    prop: DesignProperty,
    source: str,
    result: DetectorResult | None,
) -> None:
    rows = Assessment.objects.filter(
        kind=AssessmentKind.IMPLEMENTED, submission=submission, property=prop, source=source
    )
    if result is None:
        rows.delete()
        return
    Assessment.objects.update_or_create(
        kind=AssessmentKind.IMPLEMENTED,
        submission=submission,
        property=prop,
        source=source,
        defaults={
            "task_id": submission.task_id,
            "value": result.value,
            "rationale": result.rationale,
            "evidence": list(result.evidence),
            "evidence_kind": result.kind,
            "who": None,
            "assessed_at": timezone.now(),
        },
    )


def assessments_machine_refresh(*, submission: Submission, evaluation: Evaluation | None) -> None:
    """Recompute the detector and counter assessments of `submission` (its source, and the
    counters of its latest finished verdict); a result that can no longer be drawn is
    removed, never kept stale. The source counts only where it ran: in a `cuda` verdict,
    the jit functions the profiler saw launched (`launched_kernels`); the detectors fold
    the launches' constants into the kernels' branches (taskformat.properties)."""
    launched = launched_kernels_of(evaluation)
    timed, failed = [], ""
    if evaluation is not None and evaluation.mode == Mode.CUDA and evaluation_counts(evaluation):
        flops = dict(
            Workload.objects.filter(version_id=submission.task_version_id).values_list(
                "name", "flops"
            )
        )
        timed = [
            {"name": r.name, "counters": r.counters, "flops": flops.get(r.name)}
            for r in evaluation.results.all()
            if r.role == WorkloadRole.TIMED and not r.hidden
        ]
        note = str((evaluation.environment or {}).get("counters") or "")
        failed = note if pass_failed(note) else ""
    with transaction.atomic():
        for prop in DesignProperty.objects.filter(task_id=submission.task_id):
            try:
                found = assess(
                    prop.detector or {"kind": "manual"}, submission.source, launched=launched
                )
            except (DetectorError, KeyError, TypeError) as exc:
                logger.warning("detector of %s cannot run: %s", prop, exc)
                found = None
            _machine_write(
                submission=submission, prop=prop, source=AssessmentSource.DETECTOR, result=found
            )
            counted = counter_pass_failed(failed) if prop.counters and failed else None
            if prop.counters and timed and counted is None:
                try:
                    counted = counter_assess(prop.counters, timed)
                except CounterRuleError as exc:
                    logger.warning("counter rule of %s cannot run: %s", prop, exc)
            _machine_write(
                submission=submission, prop=prop, source=AssessmentSource.COUNTERS, result=counted
            )


def launched_kernels_of(evaluation: Evaluation | None) -> list[str] | None:
    """The submission's own kernels its verdict saw launched; None where no profiler
    named them (interpret mode, an older verdict): the source's reachability stands."""
    if evaluation is None or evaluation.mode != "cuda" or not evaluation.environment:
        return None
    names = evaluation.environment.get("launched_kernels")
    if not isinstance(names, list) or not names:
        return None
    return [n for n in names if isinstance(n, str)]

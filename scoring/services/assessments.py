"""Writes of assessments: machine ones (detectors, counters) computed from a submission
and its verdict, judges' through the API, admins' through the admin."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import User
from evaluator.models import Evaluation
from runs.models import Proposal, Run
from scoring.models import Assessment, AssessmentKind, AssessmentSource
from submissions.models import Submission
from task_catalog.models import DesignProperty, Task
from taskformat.counter_rules import CounterRuleError, counter_assess
from taskformat.detectors import DetectorError, DetectorResult, assess
from taskformat.properties import declared_evidence

logger = logging.getLogger("scoring")

MAX_ITEMS = 500
MAX_RATIONALE = 10_000
MAX_EVIDENCE_CHARS = 20_000
ITEM_KEYS = {
    "kind",
    "submission",
    "run",
    "task",
    "property",
    "value",
    "rationale",
    "evidence",
    "judge",
}


class AssessmentsInvalid(Exception):
    """Some items of a batch are invalid; `errors` lists them ({"index", "errors"})."""

    def __init__(self, errors: list[dict[str, Any]]):
        super().__init__(f"{len(errors)} invalid item(s)")
        self.errors = errors


def evaluation_counts(evaluation: Evaluation | None) -> bool:
    """Correct for scoring: `correct`, or `flagged` and cleared by an admin; never a
    confirmed hack."""
    if evaluation is None or evaluation.review == "hacked":
        return False
    return evaluation.status == "correct" or (
        evaluation.status == "flagged" and evaluation.review == "cleared"
    )


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
    timed = []
    if evaluation is not None and evaluation.mode == "cuda" and evaluation_counts(evaluation):
        timed = [
            {"name": r.name, "counters": r.counters}
            for r in evaluation.results.all()
            if r.role == "timed" and not r.hidden
        ]
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
            counted = None
            if prop.counters and timed:
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


def property_assessed_by(prop: DesignProperty) -> str | None:
    """The evidence kind a property's machine assessment can come from; None where only
    a judge or an admin can decide it."""
    return declared_evidence(prop.detector, prop.counters)


# --- judges -----------------------------------------------------------------------------


def _item_validate(
    raw: Any, *, seen: set[tuple[Any, ...]]
) -> tuple[dict[str, Any] | None, list[str]]:
    if not isinstance(raw, Mapping):
        return None, ["an item is a JSON object"]
    errors: list[str] = []
    unknown = set(raw) - ITEM_KEYS
    if unknown:
        errors.append(f"unknown keys {sorted(unknown)}")
    kind = raw.get("kind")
    if kind not in AssessmentKind.values:
        errors.append(f"`kind` must be one of {AssessmentKind.values}")
    value = raw.get("value")
    if not isinstance(value, bool):
        errors.append("`value` must be true or false")
    rationale = raw.get("rationale")
    if not isinstance(rationale, str) or not rationale.strip():
        errors.append("`rationale` must be a non-empty string")
    elif len(rationale) > MAX_RATIONALE:
        errors.append(f"`rationale` is longer than {MAX_RATIONALE} characters")
    evidence = raw.get("evidence", [])
    if not isinstance(evidence, list | dict):
        errors.append("`evidence` must be a list or an object")
    elif len(json.dumps(evidence)) > MAX_EVIDENCE_CHARS:
        errors.append(f"`evidence` is longer than {MAX_EVIDENCE_CHARS} characters as JSON")
    judge = raw.get("judge", "")
    if not isinstance(judge, str) or len(judge) > 200:
        errors.append("`judge` must be a string of at most 200 characters")
    key = raw.get("property")
    if not isinstance(key, str) or not key:
        errors.append("`property` must be a property key")
    target: dict[str, Any] = {}
    if kind == AssessmentKind.IMPLEMENTED:
        submission_id = raw.get("submission")
        submission = (
            Submission.objects.filter(pk=submission_id).first()
            if isinstance(submission_id, int) and not isinstance(submission_id, bool)
            else None
        )
        if submission is None:
            errors.append(f"no submission {submission_id!r}")
        else:
            target = {"submission": submission, "task_id": submission.task_id}
    elif kind == AssessmentKind.PROPOSED:
        run_id, slug = raw.get("run"), raw.get("task")
        run = (
            Run.objects.filter(pk=run_id).first()
            if isinstance(run_id, int) and not isinstance(run_id, bool)
            else None
        )
        task = Task.objects.filter(slug=slug).first() if isinstance(slug, str) else None
        if run is None:
            errors.append(f"no run {run_id!r}")
        if task is None:
            errors.append(f"no task {slug!r}")
        if run and task:
            if not Proposal.objects.filter(run=run, task=task).exists():
                errors.append(f"run #{run.pk} proposed no design for {task.slug}")
            target = {"run": run, "task_id": task.pk}
    prop = None
    if target and isinstance(key, str):
        prop = DesignProperty.objects.filter(task_id=target["task_id"], key=key).first()
        if prop is None:
            errors.append(f"the task has no property {key!r}")
    if prop is not None:
        identity = (kind, target.get("submission"), target.get("run"), prop.pk)
        if identity in seen:
            errors.append("the same property of the same target appears twice in the batch")
        seen.add(identity)
    if errors:
        return None, errors
    return {
        "kind": kind,
        "property": prop,
        "submission": target.get("submission"),
        "run": target.get("run"),
        "task_id": target["task_id"],
        "value": value,
        "rationale": rationale.strip() if isinstance(rationale, str) else "",
        "evidence": evidence,
        "judge": judge,
    }, []


def assessment_record(
    *, items: Any, user: User, source: str = AssessmentSource.JUDGE
) -> list[Assessment]:
    """Store a batch of judge (or admin) assessments, each replacing that source's earlier
    one for the same property and target. Every item is checked first: on any error
    AssessmentsInvalid lists them all and nothing is stored."""
    if source not in (AssessmentSource.JUDGE, AssessmentSource.ADMIN):
        raise ValueError(f"assessment_record stores judge or admin assessments, not {source!r}")
    if not isinstance(items, list) or not items:
        raise AssessmentsInvalid([{"index": None, "errors": ["send a non-empty JSON list"]}])
    if len(items) > MAX_ITEMS:
        raise AssessmentsInvalid(
            [{"index": None, "errors": [f"at most {MAX_ITEMS} items per request"]}]
        )
    seen: set[tuple[Any, ...]] = set()
    cleaned, errors = [], []
    for index, raw in enumerate(items):
        item, problems = _item_validate(raw, seen=seen)
        if problems:
            errors.append({"index": index, "errors": problems})
        else:
            cleaned.append(item)
    if errors:
        raise AssessmentsInvalid(errors)
    stored = []
    now = timezone.now()
    with transaction.atomic():
        for item in cleaned:
            assert item is not None
            assessment, _ = Assessment.objects.update_or_create(
                kind=item["kind"],
                submission=item["submission"],
                run=item["run"],
                task_id=item["task_id"],
                property=item["property"],
                source=source,
                defaults={
                    "value": item["value"],
                    "rationale": item["rationale"],
                    "evidence": item["evidence"],
                    "judge": item["judge"],
                    "who": user,
                    "assessed_at": now,
                },
            )
            stored.append(assessment)
        _scores_refresh_on_commit(assessments=stored)
    return stored


def assessment_admin_save(*, assessment: Assessment, user: User) -> Assessment:
    """An admin's assessment from the admin form. Editing another source's row leaves it
    as it was and records the admin's own (all sources are kept; admin wins)."""
    if assessment.pk and assessment.source != AssessmentSource.ADMIN:
        assessment.pk = None
        assessment.id = None
        assessment._state.adding = True
    assessment.source = AssessmentSource.ADMIN
    assessment.who = user
    assessment.assessed_at = timezone.now()
    submission = assessment.submission if assessment.submission_id else None
    if submission is not None:
        assessment.task_id = submission.task_id
    # `field=None` matches NULL in Django's filters: one lookup for both kinds.
    target: dict[str, Any] = {
        "submission_id": assessment.submission_id,
        "run_id": assessment.run_id,
    }
    existing = Assessment.objects.filter(
        **target,
        kind=assessment.kind,
        task_id=assessment.task_id,
        property_id=assessment.property_id,
        source=AssessmentSource.ADMIN,
    ).first()
    if existing is not None and existing.pk != assessment.pk:
        assessment.pk = assessment.id = existing.pk
        assessment._state.adding = False
    with transaction.atomic():
        assessment.full_clean()
        assessment.save()
        _scores_refresh_on_commit(assessments=[assessment])
    return assessment


def assessment_admin_delete(*, assessment: Assessment) -> None:
    with transaction.atomic():
        assessment.delete()
        _scores_refresh_on_commit(assessments=[assessment])


def _scores_refresh_on_commit(*, assessments: Sequence[Assessment]) -> None:
    from scoring.services.scores import scores_refresh

    submission_ids = {a.submission_id for a in assessments if a.submission_id}
    run_ids = {a.run_id for a in assessments if a.run_id}
    transaction.on_commit(
        lambda: scores_refresh(submission_ids=submission_ids, run_ids=run_ids, machine=False)
    )

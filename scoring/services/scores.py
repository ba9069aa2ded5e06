"""Refreshing the materialised scores: a submission's TaskScore and a run's RunScore are
recomputed from the rows whenever a verdict, a review, an assessment or a pair changes."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from evaluator.models import FINISHED_STATUSES, Evaluation
from runs.models import Proposal, Run, Trace
from scoring.models import Assessment, AssessmentKind, RunScore, TaskScore
from scoring.selectors.assessments import assessments_effective_by_property, property_rows
from scoring.selectors.formulas import (
    LEVELS,
    TaskOutcome,
    correctness_rate,
    fast_p,
    geomean_speedup,
    implementation_score,
    performance_score,
    task_speedup,
)
from scoring.services.assessments import assessments_machine_refresh, evaluation_counts
from scoring.services.version import scores_version_bump
from submissions.models import Submission
from task_catalog.models import DesignProperty, Task

logger = logging.getLogger("scoring")


def evaluation_latest_finished(*, submission: Submission) -> Evaluation | None:
    """The newest finished evaluation of `submission` (a re-run still queued leaves the
    scores on the verdict before it), with its workload results."""
    return (
        Evaluation.objects.filter(submission=submission, status__in=FINISHED_STATUSES)
        .prefetch_related("results")
        .order_by("-created_at", "-pk")
        .first()
    )


def _effective_values(
    *, properties: list[DesignProperty], assessments: Iterable[Assessment]
) -> dict[str, bool | None]:
    effective = assessments_effective_by_property(assessments)
    return {p.key: (effective[p.pk].value if p.pk in effective else None) for p in properties}


def task_score_refresh(*, submission: Submission) -> TaskScore:
    """Recompute the submission's TaskScore from its latest finished verdict and its
    implemented assessments."""
    evaluation = evaluation_latest_finished(submission=submission)
    counts = evaluation_counts(evaluation)
    speedup = sol = None
    hardware = ""
    if evaluation is not None and counts and evaluation.mode == "cuda" and evaluation.hardware:
        timed = [r for r in evaluation.results.all() if r.role == "timed" and not r.hidden]
        speedup = task_speedup(workload_speedups=[r.speedup for r in timed])
        fractions = [r.sol_fraction for r in timed]
        if speedup is not None:
            hardware = evaluation.hardware
            if fractions and all(f is not None for f in fractions):
                sol = sum(f for f in fractions if f is not None) / len(fractions)
    properties = list(DesignProperty.objects.filter(task_id=submission.task_id))
    # Only a correct kernel earns implementation credit: an incorrect one's properties
    # are scored as a missing kernel's (its assessments are still kept and shown).
    values = (
        _effective_values(
            properties=properties,
            assessments=Assessment.objects.filter(
                kind=AssessmentKind.IMPLEMENTED, submission=submission
            ),
        )
        if counts
        else {}
    )
    implementation = implementation_score(tasks=[(property_rows(properties), values)])
    score, _ = TaskScore.objects.update_or_create(
        submission=submission,
        defaults={
            "run_id": submission.run_id,
            "task_id": submission.task_id,
            "evaluation": evaluation,
            "hardware": hardware,
            "status": evaluation.status if evaluation else "queued",
            "counts": counts,
            "speedup": speedup,
            "sol_fraction": sol,
            "implementation": implementation,
        },
    )
    return score


def run_tasks(*, run: Run) -> list[Task]:
    """The tasks a run is scored over: the catalog's current tasks and any task the run
    touched (as on the run page); a task without a kernel counts as missing."""
    touched = (
        set(Submission.objects.filter(run=run).values_list("task_id", flat=True))
        | set(Trace.objects.filter(run=run).values_list("task_id", flat=True))
        | set(Proposal.objects.filter(run=run).values_list("task_id", flat=True))
    )
    return list(
        Task.objects.filter(Q(current_version__isnull=False) | Q(pk__in=touched)).order_by(
            "position", "slug"
        )
    )


def _outcomes(*, run: Run, tasks: list[Task]) -> tuple[list[TaskOutcome], dict[int, TaskScore]]:
    scores = {s.task_id: s for s in TaskScore.objects.filter(run=run)}
    outcomes = [
        TaskOutcome(
            task=t.slug,
            counts=bool(scores.get(t.pk) and scores[t.pk].counts),
            speedup=scores[t.pk].speedup if t.pk in scores else None,
        )
        for t in tasks
    ]
    return outcomes, scores


def _untimed_reason(scores: list[TaskScore]) -> str:
    counted = [s for s in scores if s.counts]
    if not counted:
        return "not timed: no task is correct"
    untimed = [s for s in counted if s.speedup is None]
    if untimed:
        return (
            f"not timed: {len(untimed)} of {len(counted)} correct tasks have no GPU timing "
            "(interpret mode checks correctness only)"
        )
    gpus = sorted({s.hardware for s in counted})
    if len(gpus) > 1:
        return f"not comparable: the tasks were timed on more than one GPU ({', '.join(gpus)})"
    return ""


def _level_scores(
    *, run: Run, tasks: list[Task], kind: str, scores: dict[int, TaskScore]
) -> dict[str, float | None]:
    properties: dict[int, list[DesignProperty]] = {}
    for p in DesignProperty.objects.filter(task__in=tasks).order_by("level", "position"):
        properties.setdefault(p.task_id, []).append(p)
    if kind == AssessmentKind.IMPLEMENTED:
        rows = Assessment.objects.filter(
            kind=kind, submission_id__in=implementation_counted_submissions(scores=scores)
        )
    else:
        rows = Assessment.objects.filter(kind=kind, run=run)
        if not rows.exists():
            return dict.fromkeys(("L1", "L2", "L3", "combined"))
    by_task: dict[int, list[Assessment]] = {}
    for a in rows:
        by_task.setdefault(a.task_id, []).append(a)
    pooled = []
    for task in tasks:
        props = properties.get(task.pk, [])
        values = _effective_values(properties=props, assessments=by_task.get(task.pk, []))
        pooled.append((property_rows(props), values))
    return implementation_score(tasks=pooled)


def implementation_counted_submissions(*, scores: dict[int, TaskScore]) -> list[int]:
    """Which tasks count for the implementation score: the submissions whose verdict
    counts (correct, or flagged and cleared). An incorrect kernel, a pending flag and a
    confirmed hack are scored as a missing kernel."""
    return [s.submission_id for s in scores.values() if s.counts]


def implementation_tasks_counted(
    *, tasks: list[Task], scores: dict[int, TaskScore]
) -> dict[str, dict[str, int]]:
    """Per level (and combined): how many of the run's tasks have properties there
    (`total`) and how many of them counted (`counted`: their kernel is correct)."""
    levels: dict[int, set[str]] = {}
    for task_id, level in DesignProperty.objects.filter(task__in=tasks).values_list(
        "task_id", "level"
    ):
        levels.setdefault(task_id, set()).add(level)
    out = {b: {"counted": 0, "total": 0} for b in (*LEVELS, "combined")}
    for task in tasks:
        found = levels.get(task.pk, set())
        counted = bool(scores.get(task.pk) and scores[task.pk].counts)
        for bucket in (*found, "combined") if found else ():
            out[bucket]["total"] += 1
            out[bucket]["counted"] += counted
    return out


def implementation_provisional_tasks(*, scores: dict[int, TaskScore]) -> int:
    """How many counted tasks were judged in interpret mode, from their source alone
    (no profiler named the kernels that ran): their properties are provisional."""
    ids = [s.evaluation_id for s in scores.values() if s.counts and s.evaluation_id]
    return Evaluation.objects.filter(pk__in=ids, mode="interpret").count()


def run_score_refresh(*, run: Run) -> RunScore:
    """Recompute the run's RunScore from its TaskScores, assessments, traces and its twin."""
    tasks = run_tasks(run=run)
    outcomes, scores = _outcomes(run=run, tasks=tasks)
    reason = _untimed_reason(list(scores.values()))
    timed = not reason
    counted = [s for s in scores.values() if s.counts]
    hardware = counted[0].hardware if timed else ""
    geomean, n = None, 0
    if timed:
        twin = None
        if run.pair_id is not None and (pair := Run.objects.filter(pk=run.pair_id).first()):
            twin, _ = _outcomes(run=pair, tasks=run_tasks(run=pair))
        geomean, n = geomean_speedup(outcomes=outcomes, twin=twin)
    traces = list(Trace.objects.filter(run=run).only("turns_used", "tokens_in", "tokens_out"))
    turns = [t.turns_used for t in traces if t.turns_used is not None]
    score, _ = RunScore.objects.update_or_create(
        run=run,
        defaults={
            "hardware": hardware,
            "timed": timed,
            "untimed_reason": reason,
            "tasks_total": len(outcomes),
            "tasks_correct": sum(o.counts for o in outcomes),
            "correctness_rate": correctness_rate(outcomes=outcomes),
            "performance_score": performance_score(outcomes=outcomes) if timed else None,
            "geomean_speedup": geomean,
            "geomean_n": n,
            "fast_p": fast_p(outcomes=outcomes) if timed else None,
            "implementation": {
                **_level_scores(
                    run=run, tasks=tasks, kind=AssessmentKind.IMPLEMENTED, scores=scores
                ),
                "tasks": implementation_tasks_counted(tasks=tasks, scores=scores),
                "provisional": implementation_provisional_tasks(scores=scores),
            },
            "discovery": _level_scores(
                run=run, tasks=tasks, kind=AssessmentKind.PROPOSED, scores=scores
            ),
            "turns": sum(turns) if turns else None,
            "tokens": sum(t.tokens_in + t.tokens_out for t in traces) if traces else None,
            "refreshed_at": timezone.now(),
        },
    )
    return score


def scores_refresh(
    *,
    submission_ids: Iterable[int] = (),
    run_ids: Iterable[int] = (),
    machine: bool = True,
) -> None:
    """Refresh the scores that depend on these submissions and runs: the machine
    assessments (when `machine`) and TaskScore of each submission, then the RunScore of
    each run involved and of its twin (whose pair geomean depends on it)."""
    runs = set(run_ids)
    with transaction.atomic():
        # First, so that every refresh takes the version row's lock before any score row's
        # (the same order everywhere: no deadlock between two refreshes on PostgreSQL).
        scores_version_bump()
        for submission in Submission.objects.filter(pk__in=set(submission_ids)):
            if machine:
                assessments_machine_refresh(
                    submission=submission,
                    evaluation=evaluation_latest_finished(submission=submission),
                )
            task_score_refresh(submission=submission)
            if submission.run_id:
                runs.add(submission.run_id)
        found = list(Run.objects.filter(pk__in=runs))
        twins = {r.pair_id for r in found if r.pair_id} - runs
        for run in [*found, *Run.objects.filter(pk__in=twins)]:
            run_score_refresh(run=run)


def scores_refresh_all() -> int:
    """Recompute every assessment a machine draws and every score (after a catalog
    reload changed detectors or properties); returns the number of submissions."""
    ids = list(Submission.objects.values_list("pk", flat=True))
    for start in range(0, len(ids), 200):
        scores_refresh(submission_ids=ids[start : start + 200])
    scores_refresh(run_ids=Run.objects.values_list("pk", flat=True))
    return len(ids)

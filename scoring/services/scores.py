"""Refreshing the materialised scores: a submission's TaskScore and a run's RunScore are
recomputed from the rows whenever a verdict, a review, an assessment or a pair changes."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from evaluator.models import FINISHED_STATUSES, Evaluation
from runs.models import Run, Trace
from scoring.formulas import (
    BUCKETS,
    LEVELS,
    TaskOutcome,
    TaskParts,
    correctness_rate,
    fast_p,
    geomean_speedup,
    implementation_parts,
    implementation_score,
    performance_score,
    pooled_score,
    task_speedup,
)
from scoring.models import Assessment, AssessmentKind, RunScore, TaskScore
from scoring.selectors.assessments import assessments_effective_by_property, property_rows
from scoring.selectors.catalog import run_catalog_tasks
from scoring.services.machine import assessments_machine_refresh, evaluation_counts
from scoring.services.version import scores_version_bump
from submissions.models import Submission
from task_catalog.models import DesignProperty, Task
from taskformat.spec import Mode, WorkloadRole

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
    if evaluation is not None and counts and evaluation.mode == Mode.CUDA and evaluation.hardware:
        timed = [
            r for r in evaluation.results.all() if r.role == WorkloadRole.TIMED and not r.hidden
        ]
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


def _run_gpus(*, run: Run) -> set[str]:
    """The GPUs the run's kernels were evaluated on (cuda mode, any verdict)."""
    return set(
        Evaluation.objects.filter(submission__run=run, mode=Mode.CUDA)
        .exclude(hardware="")
        .values_list("hardware", flat=True)
        .distinct()
    )


def _timing(*, run: Run, scores: list[TaskScore]) -> tuple[str, str]:
    """The run's GPU kind and why its speed scores are not comparable ("" when they are).
    The GPU kind is the GPU its correct tasks were timed on; failing that, the one GPU
    its kernels ran on, else the GPU its manifest names. A run with nothing correct has
    comparable speed scores (all 0)."""
    counted = [s for s in scores if s.counts]
    gpus = sorted({s.hardware for s in counted if s.speedup is not None})
    untimed = [s for s in counted if s.speedup is None]
    reason = ""
    if untimed:
        reason = (
            f"not timed: {len(untimed)} of {len(counted)} correct tasks have no GPU timing "
            "(interpret mode checks correctness only)"
        )
    elif len(gpus) > 1:
        reason = f"not comparable: the tasks were timed on more than one GPU ({', '.join(gpus)})"
    if len(gpus) == 1:
        return gpus[0], reason
    ran = _run_gpus(run=run)
    return (next(iter(ran)) if len(ran) == 1 else run.hardware), reason


def _level_parts(
    *, run: Run, tasks: list[Task], kind: str, scores: dict[int, TaskScore]
) -> dict[str, dict[str, list[float]]] | None:
    """Per task slug, [credited weight, total weight] per bucket; None for discovery
    before anyone assessed a proposal of the run."""
    properties: dict[int, list[DesignProperty]] = {}
    for p in DesignProperty.objects.filter(task__in=tasks).order_by("level", "position", "pk"):
        properties.setdefault(p.task_id, []).append(p)
    if kind == AssessmentKind.IMPLEMENTED:
        rows = Assessment.objects.filter(
            kind=kind, submission_id__in=implementation_counted_submissions(scores=scores)
        )
    else:
        rows = Assessment.objects.filter(kind=kind, run=run)
        if not rows.exists():
            return None
    by_task: dict[int, list[Assessment]] = {}
    for a in rows:
        by_task.setdefault(a.task_id, []).append(a)
    parts = {}
    for task in tasks:
        props = properties.get(task.pk, [])
        values = _effective_values(properties=props, assessments=by_task.get(task.pk, []))
        parts[task.slug] = implementation_parts(properties=property_rows(props), values=values)
    return parts


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
    return Evaluation.objects.filter(pk__in=ids, mode=Mode.INTERPRET).count()


def run_score_refresh(*, run: Run) -> RunScore:
    """Recompute the run's RunScore over the tasks of its catalog version (a task it has
    no kernel for, or whose kernel failed, is flagged or is not evaluated yet, scores 0)
    from its TaskScores, assessments, traces and its twin."""
    tasks = run_catalog_tasks(run=run)
    outcomes, scores = _outcomes(run=run, tasks=tasks)
    hardware, reason = _timing(run=run, scores=list(scores.values()))
    timed = not reason
    geomean, n = None, 0
    if timed:
        twin = None
        if run.pair_id is not None and (pair := Run.objects.filter(pk=run.pair_id).first()):
            twin, _ = _outcomes(run=pair, tasks=run_catalog_tasks(run=pair))
        geomean, n = geomean_speedup(outcomes=outcomes, twin=twin)
    traces = {
        t.task_id: t
        for t in Trace.objects.filter(run=run).only(
            "task_id", "turns_used", "tokens_in", "tokens_out"
        )
    }
    turns = [t.turns_used for t in traces.values() if t.turns_used is not None]
    implementation = _level_parts(
        run=run, tasks=tasks, kind=AssessmentKind.IMPLEMENTED, scores=scores
    )
    discovery = _level_parts(run=run, tasks=tasks, kind=AssessmentKind.PROPOSED, scores=scores)
    parts = [
        TaskParts(
            task=task.slug,
            counts=outcome.counts,
            speedup=outcome.speedup if timed else None,
            implementation=(implementation or {}).get(task.slug, {}),
            discovery=(discovery or {}).get(task.slug, {}),
            turns=traces[task.pk].turns_used if task.pk in traces else None,
        )
        for task, outcome in zip(tasks, outcomes, strict=True)
    ]
    submitted = Submission.objects.filter(run=run).values_list("pk", flat=True)
    finished = Evaluation.objects.filter(submission_id__in=submitted, status__in=FINISHED_STATUSES)
    kernels = len(submitted)
    pending = kernels - finished.values("submission_id").distinct().count()
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
                **pooled_score((implementation or {}).values()),
                "tasks": implementation_tasks_counted(tasks=tasks, scores=scores),
                "provisional": implementation_provisional_tasks(scores=scores),
            },
            "discovery": (
                pooled_score(discovery.values())
                if discovery is not None
                else dict.fromkeys(BUCKETS)
            ),
            "turns": sum(turns) if turns else None,
            "tokens": (
                sum(t.tokens_in + t.tokens_out for t in traces.values()) if traces else None
            ),
            "tasks": [dataclasses.asdict(p) for p in parts],
            "kernels": kernels,
            "pending": pending,
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

"""Reads of the evaluator app.

Hidden workloads are correctness-only and never shown outside the staff: for
everyone else their names are replaced by an alias (also inside the verdict's
message and log) and their messages are withheld.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    F,
    Max,
    Min,
    OuterRef,
    Prefetch,
    Q,
    Subquery,
    Sum,
)
from django.utils import timezone

from accounts.models import User
from evaluator.claimorder import in_claim_order
from evaluator.harness.verdict import environment_gpu, reference_host_bound_calls
from evaluator.models import (
    EXPERT_USERNAME,
    FINISHED_STATUSES,
    Evaluation,
    EvaluationStatus,
    WorkerBeat,
    WorkerState,
    WorkloadResult,
)
from evaluator.services.pools import pool_queue
from submissions.models import Submission
from task_catalog.models import Task
from taskformat.spec import Mode

RESULT_FIELDS = (
    "name",
    "role",
    "hidden",
    "status",
    "message",
    "max_abs_err",
    "rel_err",
    "median_ms",
    "ref_median_ms",
    "speedup",
    "achieved_tflops",
    "achieved_tbps",
    "sol_fraction",
    "timing",
    "counters",
)


@dataclass(frozen=True)
class EvaluationView:
    """What a given viewer may see of one evaluation."""

    evaluation: Evaluation
    message: str
    log: str
    results: list[dict[str, Any]]

    @property
    def is_timed(self) -> bool:
        return any(r["median_ms"] is not None for r in self.results)


def evaluation_gpu(*, evaluation: Evaluation) -> str:
    """The GPU a verdict was timed on: the stored column, else what its environment
    names (rows stored before the column existed); blank for interpret mode."""
    if evaluation.hardware:
        return evaluation.hardware
    return environment_gpu(evaluation.environment)


def workload_result_host_bound_calls(*, result: WorkloadResult) -> tuple[int, int] | None:
    """(host-bound calls, calls) of a timed workload whose reference was mostly bound by
    its host's CPU, else None (its speedup then depends on the host as well)."""
    return reference_host_bound_calls(result.timing)


def evaluation_latest_for_submission(*, submission: Submission) -> Evaluation | None:
    """The newest evaluation of `submission` with its workload results (two queries)."""
    return (
        Evaluation.objects.filter(submission=submission)
        .prefetch_related(Prefetch("results", queryset=WorkloadResult.objects.order_by("position")))
        .order_by("-created_at", "-pk")
        .first()
    )


def evaluation_latest_by_submission(*, submission_ids: Iterable[int]) -> dict[int, Evaluation]:
    """The newest evaluation of each of `submission_ids` with its workload results, by
    submission id (two queries whatever the count); submissions never evaluated are absent."""
    ids = list(submission_ids)
    if not ids:
        return {}
    newest = Evaluation.objects.filter(submission=OuterRef("submission")).order_by(
        "-created_at", "-pk"
    )
    evaluations = (
        Evaluation.objects.filter(submission_id__in=ids)
        .filter(pk=Subquery(newest.values("pk")[:1]))
        .prefetch_related(Prefetch("results", queryset=WorkloadResult.objects.order_by("position")))
    )
    return {e.submission_id: e for e in evaluations}


def evaluation_latest_states(*, submission_ids: Iterable[int]) -> dict[int, Evaluation]:
    """The newest evaluation of each of `submission_ids` with its status and mode only, by
    submission id (one query): what a run's table and state show, without the logs,
    environments and workload results that `evaluation_latest_by_submission` reads."""
    ids = list(submission_ids)
    if not ids:
        return {}
    newest = Evaluation.objects.filter(submission=OuterRef("submission")).order_by(
        "-created_at", "-pk"
    )
    evaluations = (
        Evaluation.objects.filter(submission_id__in=ids)
        .filter(pk=Subquery(newest.values("pk")[:1]))
        .only("pk", "submission_id", "status", "mode")
    )
    return {e.submission_id: e for e in evaluations}


def evaluation_view_for_viewer(
    *, evaluation: Evaluation, user: User | AnonymousUser
) -> EvaluationView:
    """The evaluation as `user` may see it (results must be prefetched or are fetched)."""
    results = [{f: getattr(r, f) for f in RESULT_FIELDS} for r in evaluation.results.all()]
    message = evaluation.message
    if user.is_authenticated and user.is_staff:
        return EvaluationView(
            evaluation=evaluation, message=message, log=evaluation.log, results=results
        )
    log = evaluation.public_log
    hidden_count = 0
    aliases: dict[str, str] = {}
    for row in results:
        if row["hidden"]:
            hidden_count += 1
            alias = f"hidden workload {hidden_count}"
            aliases[row["name"]] = alias
            row.update(name=alias, message="", timing=None, counters=None)
    # Longest names first, so that one name that prefixes another is not half-replaced.
    for name in sorted(aliases, key=len, reverse=True):
        message = message.replace(name, aliases[name])
        log = log.replace(name, aliases[name])
    return EvaluationView(evaluation=evaluation, message=message, log=log, results=results)


def evaluation_verdict_line(*, evaluation: Evaluation) -> str:
    """One line: `evaluation #7 of submission #3 (row_softmax v1): correct — 4/4 workloads…`."""
    submission = evaluation.submission
    results = list(evaluation.results.all())
    passed = sum(1 for r in results if r.status == "correct")
    parts = [
        f"evaluation #{evaluation.pk} of submission #{submission.pk} "
        f"({submission.task_version}): {evaluation.status}",
    ]
    if results:
        parts.append(f"{passed}/{len(results)} workloads correct")
    if evaluation.mode:
        parts.append(f"mode {evaluation.mode}")
    if evaluation.message:
        parts.append(evaluation.message.splitlines()[0])
    return " — ".join(parts)


@dataclass(frozen=True)
class JobView:
    """Where an evaluation stands as a job, and what happens next, in one sentence."""

    state: str
    seconds_in_state: int | None
    attempt: int
    max_attempts: int
    worker: str
    heartbeat_at: datetime | None
    lease_expires_at: datetime | None
    queue_position: int | None
    next_step: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "seconds_in_state": self.seconds_in_state,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "worker": self.worker,
            "heartbeat_at": self.heartbeat_at,
            "lease_expires_at": self.lease_expires_at,
            "queue_position": self.queue_position,
            "next_step": self.next_step,
        }


def _ago(now: datetime, then: datetime | None) -> str:
    if then is None:
        return "never"
    seconds = max(0, int((now - then).total_seconds()))
    return f"{seconds} s ago" if seconds < 120 else f"{seconds // 60} min ago"


def evaluation_job_view(*, evaluation: Evaluation, now: datetime | None = None) -> JobView:
    """The job's state for the submission page and the API (one query while queued)."""
    now = now or timezone.now()
    since = evaluation.state_changed_at or evaluation.created_at
    limit = settings.D2K_EVALUATION_MAX_ATTEMPTS
    position = None
    if evaluation.status == EvaluationStatus.QUEUED:
        position = Evaluation.objects.filter(
            status=EvaluationStatus.QUEUED, created_at__lt=evaluation.created_at
        ).count()
        ahead = f"{position} evaluation(s) ahead of it" if position else "next in line"
        if evaluation.attempts:
            next_step = (
                f"Attempt {evaluation.attempts} of {limit} did not finish "
                f"({evaluation.last_error or 'no reason recorded'}). Waiting for a worker to "
                f"try again ({ahead})."
            )
        else:
            next_step = f"Waiting for a worker ({ahead})."
    elif evaluation.status == EvaluationStatus.RUNNING:
        expired = evaluation.lease_expires_at is not None and evaluation.lease_expires_at < now
        if expired:
            next_step = (
                f"The worker {evaluation.worker} stopped sending heartbeats "
                f"({_ago(now, evaluation.heartbeat_at)}): the reaper queues the evaluation "
                "again within a minute."
            )
        else:
            next_step = (
                f"Running on {evaluation.worker} (attempt {evaluation.attempts} of {limit}); "
                f"last heartbeat {_ago(now, evaluation.heartbeat_at)}."
            )
    else:
        next_step = "Finished."
    return JobView(
        state=evaluation.status if not evaluation.is_finished else "finished",
        seconds_in_state=max(0, int((now - since).total_seconds())) if since else None,
        attempt=evaluation.attempts,
        max_attempts=limit,
        worker=evaluation.worker,
        heartbeat_at=evaluation.heartbeat_at,
        lease_expires_at=evaluation.lease_expires_at,
        queue_position=position,
        next_step=next_step,
    )


@dataclass(frozen=True)
class PoolSeen:
    """A worker pool as its live workers last reported: how many, how many of them take
    work (not backing off), and the newest beat."""

    hardware: str
    queue: str
    workers: int
    last_seen_at: datetime | None
    age_s: float | None
    queued: int
    ready: int = 0


def _live_since(now: datetime) -> datetime:
    return now - timedelta(seconds=settings.D2K_WORKER_LIVE_S)


def worker_pools_seen(*, now: datetime | None = None) -> list[PoolSeen]:
    """Every pool that has a live worker or a queued evaluation, with its freshest
    heartbeat; a worker whose last report is older than D2K_WORKER_LIVE_S is not counted."""
    now = now or timezone.now()
    beats = (
        WorkerBeat.objects.filter(seen_at__gte=_live_since(now))
        .values("hardware", "queue")
        .annotate(
            workers=Count("pk"),
            ready=Count("pk", filter=Q(state=WorkerState.OK)),
            last=Max("seen_at"),
        )
        .order_by("hardware")
    )
    queued = dict(
        Evaluation.objects.filter(status=EvaluationStatus.QUEUED)
        .values("target_hardware")
        .annotate(n=Count("pk"))
        .values_list("target_hardware", "n")
    )
    pools = [
        PoolSeen(
            hardware=b["hardware"],
            queue=b["queue"],
            workers=b["workers"],
            ready=b["ready"],
            last_seen_at=b["last"],
            age_s=round((now - b["last"]).total_seconds(), 1),
            queued=queued.get(b["hardware"], 0),
        )
        for b in beats
    ]
    # A pool with work waiting and no worker at all is the one an operator must see.
    served = {p.hardware for p in pools}
    pools += [
        PoolSeen(
            hardware=hardware,
            queue=pool_queue(hardware),
            workers=0,
            last_seen_at=None,
            age_s=None,
            queued=n,
        )
        for hardware, n in sorted(queued.items())
        if hardware not in served
    ]
    return pools


@dataclass(frozen=True)
class WorkerBackingOff:
    """A live worker that takes no work for now, and why."""

    worker: str
    hardware: str
    state: str
    reason: str
    backoff_s: float
    backoff_until: datetime | None


@dataclass(frozen=True)
class WorkersSeen:
    """The workers as /healthz reports them: live ones only (a report at most
    `live_window_s` old), how many of them take work, and those backing off."""

    live: int
    ready: int
    stale: int
    live_window_s: int
    backing_off: list[WorkerBackingOff]


def workers_seen(*, now: datetime | None = None) -> WorkersSeen:
    """Every worker's last report, split into live and stale (one query)."""
    now = now or timezone.now()
    since = _live_since(now)
    beats = list(
        WorkerBeat.objects.only(
            "worker", "hardware", "seen_at", "state", "state_reason", "backoff_s", "backoff_until"
        ).order_by("worker")
    )
    live = [b for b in beats if b.seen_at >= since]
    return WorkersSeen(
        live=len(live),
        ready=sum(1 for b in live if b.state == WorkerState.OK),
        stale=len(beats) - len(live),
        live_window_s=settings.D2K_WORKER_LIVE_S,
        backing_off=[
            WorkerBackingOff(
                worker=b.worker,
                hardware=b.hardware,
                state=b.state,
                reason=b.state_reason,
                backoff_s=b.backoff_s,
                backoff_until=b.backoff_until,
            )
            for b in live
            if b.state != WorkerState.OK
        ],
    )


@dataclass(frozen=True)
class BaselinePending:
    """A GPU where the expert was measured on an earlier version of a task but not yet on
    its current one: the task's baseline and "of expert" figures there are missing until
    the expert is re-measured (`manage.py queue_expert_baselines`)."""

    slug: str
    version: int
    gpu: str


def baselines_pending(*, task: Task | None = None) -> list[BaselinePending]:
    """Every (task, GPU) whose expert result is on an earlier task version only, ordered by
    task and GPU; `task` keeps one task (one query)."""
    evaluations = Evaluation.objects.filter(
        submission__owner__username=EXPERT_USERNAME,
        mode=Mode.CUDA,
        status__in=sorted(FINISHED_STATUSES),
        submission__task__current_version__isnull=False,
    ).exclude(hardware="")
    if task is not None:
        evaluations = evaluations.filter(submission__task_id=task.pk)
    measured: dict[tuple[str, int, str], bool] = {}
    for slug, number, gpu, on_current in (
        evaluations.annotate(
            on_current=ExpressionWrapper(
                Q(submission__task_version_id=F("submission__task__current_version_id")),
                output_field=BooleanField(),
            )
        )
        .values_list(
            "submission__task__slug",
            "submission__task__current_version__number",
            "hardware",
            "on_current",
        )
        .distinct()
    ):
        key = (slug, number, gpu)
        measured[key] = measured.get(key, False) or bool(on_current)
    return [
        BaselinePending(slug=slug, version=number, gpu=gpu)
        for (slug, number, gpu), done in sorted(measured.items())
        if not done
    ]


# --- a pool's pace, and what waits ahead in its queue ----------------------------

PACE_SAMPLE = 50  # the pool's last verdicts its pace is measured on …
PACE_WINDOW = timedelta(hours=24)  # … within this long


@dataclass(frozen=True)
class PoolPace:
    """How fast a pool gets through its queue, as measured on its recent verdicts.

    `per_evaluation_s` is one evaluation's median wall time (claim to verdict);
    `interval_s` the seconds between two of the pool's verdicts while it is busy, the
    figure an estimate multiplies (None, with `basis` saying why, when there is none)."""

    hardware: str
    slots: int
    per_evaluation_s: float | None
    interval_s: float | None
    basis: str


def pool_pace(*, hardware: str, now: datetime | None = None) -> PoolPace:
    """The pool's pace (two queries): `slots` is what its live workers run at once; the
    interval is its throughput (verdicts over the span they came in) when the sample is a
    busy stretch (verdicts no further apart than one evaluation lasts), else the median
    wall time shared among the slots."""
    now = now or timezone.now()
    slots = (
        WorkerBeat.objects.filter(hardware=hardware, seen_at__gte=_live_since(now)).aggregate(
            n=Sum("slots")
        )["n"]
        or 0
    )
    sample: list[tuple[datetime, datetime]] = [
        (start, end)
        for start, end in Evaluation.objects.filter(
            target_hardware=hardware,
            status__in=sorted(FINISHED_STATUSES),
            started_at__isnull=False,
            finished_at__gte=now - PACE_WINDOW,
        )
        .order_by("-finished_at")
        .values_list("started_at", "finished_at")[:PACE_SAMPLE]
        if start is not None and end is not None
    ]
    walls = [max(0.0, (end - start).total_seconds()) for start, end in sample]
    if not slots:
        return PoolPace(hardware, 0, None, None, "no live worker for this pool")
    if not walls:
        return PoolPace(hardware, slots, None, None, "no measured evaluation yet")
    median = statistics.median(walls)
    span = (sample[0][1] - sample[-1][1]).total_seconds()
    if len(sample) >= 2 and span > 0 and span / (len(sample) - 1) <= median:
        interval = span / (len(sample) - 1)
        basis = f"throughput of the pool's last {len(sample)} verdicts"
    else:
        interval = median / slots
        basis = f"median time of the pool's last {len(sample)} evaluations over {slots} at once"
    return PoolPace(hardware, slots, round(median, 1), interval, basis)


def pool_ahead(*, hardware: str, owner_id: int, among: Iterable[int]) -> tuple[int, int]:
    """For the first and the last, in claim order, of `owner_id`'s queued evaluations
    `among` (pks): how many of the pool's evaluations go before it (three queries). That
    is every one running, and the queued ones the fair queue claims first
    (evaluation_claim_next): round-robin across owners, so each other owner has one
    claimed per turn of this owner's, and in its last turn those served less recently
    before it; within the owner, those before it in claim order (evaluator.claimorder)."""
    rows: list[dict[str, Any]] = [
        dict(row)
        for row in Evaluation.objects.filter(
            target_hardware=hardware,
            status__in=[EvaluationStatus.QUEUED, EvaluationStatus.RUNNING],
        )
        .values("submission__owner_id")
        .annotate(
            running=Count("pk", filter=Q(status=EvaluationStatus.RUNNING)),
            waiting=Count("pk", filter=Q(status=EvaluationStatus.QUEUED)),
            oldest=Min("created_at", filter=Q(status=EvaluationStatus.QUEUED)),
        )
        .order_by()
    ]
    running = sum(r["running"] for r in rows)
    queued = [r for r in rows if r["waiting"]]
    served = dict(
        Evaluation.objects.filter(
            submission__owner_id__in=[r["submission__owner_id"] for r in queued],
            started_at__isnull=False,
        )
        .values("submission__owner_id")
        .annotate(last=Max("started_at"))
        .values_list("submission__owner_id", "last")
        .order_by()
    )

    def turn(row: dict[str, Any]) -> tuple[bool, datetime | None, datetime | None]:
        last = served.get(row["submission__owner_id"])
        return (last is not None, last, row["oldest"])  # never served first, then the oldest

    mine = next((r for r in queued if r["submission__owner_id"] == owner_id), None)
    if mine is None:
        return running, running
    own = in_claim_order(
        Evaluation.objects.filter(
            target_hardware=hardware,
            status=EvaluationStatus.QUEUED,
            submission__owner_id=owner_id,
        )
    )
    wanted = set(among)
    places = [place for place, pk in enumerate(own) if pk in wanted] or [0]
    others = [(r["waiting"], turn(r) < turn(mine)) for r in queued if r is not mine]
    first, last = (
        running + fair_claims_before(own_before=place, others=others)
        for place in (places[0], places[-1])
    )
    return first, last


def fair_claims_before(*, own_before: int, others: Iterable[tuple[int, bool]]) -> int:
    """How many queued evaluations a round-robin queue claims before an owner's one that
    has `own_before` of the owner's own ahead of it, given every other owner's (queued
    count, whether it goes before this owner in a turn)."""
    return own_before + sum(min(waiting, own_before + int(first)) for waiting, first in others)


def pace_eta_s(*, pace: PoolPace, ahead: int) -> int | None:
    """Seconds until the verdict of an evaluation with `ahead` of the pool's before it:
    it starts once all but `slots - 1` of those have finished, then takes one
    evaluation's time. None when the pool has no measured pace."""
    if pace.interval_s is None or pace.per_evaluation_s is None or not pace.slots:
        return None
    starts_in = max(0, ahead - pace.slots + 1) * pace.interval_s
    return max(0, round(starts_in + pace.per_evaluation_s))

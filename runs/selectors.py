"""Reads of the runs app. `run_get_for_viewer` is the one way to a run (and its traces)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from django.contrib.auth.models import AnonymousUser
from django.core.files.storage import default_storage
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.http import Http404
from django.utils import timezone
from django.utils.safestring import SafeString

from accounts.models import User
from evaluator.models import FINISHED_STATUSES, Evaluation, EvaluationStatus
from evaluator.selectors import evaluation_latest_states, pace_eta_s, pool_ahead, pool_pace
from runs.models import UNACCEPTED_STATES, Proposal, Run, RunState, Trace
from runs.scanners import problems_redacted, redact_text
from runs.traces import KNOWN_TYPES, MALFORMED, TraceEvent, page_of_line, trace_page_read
from scoring.models import TaskScore
from scoring.selectors.catalog import catalog_digest, run_catalog_tasks
from submissions.models import Submission
from task_catalog.models import Task
from task_catalog.rendering import markdown_render
from taskformat.spec import Mode

CONDITION_NONE = "none"  # a run given no guidance
EXAMPLE_LABEL = "Example data written by hand, not an agent's output."


def catalog_version_current() -> str:
    """A short digest naming the catalog as it is now: every task's current version hash.
    Two runs uploaded against the same task versions share it."""
    return catalog_digest()[0]


def viewer_sees_raw(*, user: User | AnonymousUser, run: Run) -> bool:
    """Whether `user` sees the run's traces and proposals as uploaded (its owner and
    staff) rather than with secrets redacted (everyone else)."""
    return bool(user.is_authenticated and (user.is_staff or run.owner_id == user.pk))


def _can_view(*, user: User | AnonymousUser, run: Run) -> bool:
    return run.is_public or viewer_sees_raw(user=user, run=run)


def run_get_for_viewer(*, user: User | AnonymousUser, pk: int | str) -> Run:
    """The run if `user` may see it (public runs to all, private ones to the owner and
    staff); anything else, a malformed id included, is a 404."""
    try:
        pk = int(pk)
    except (TypeError, ValueError) as exc:
        raise Http404("No such run.") from exc
    run = Run.objects.select_related("owner", "pair").filter(pk=pk).first()
    if run is None or not _can_view(user=user, run=run):
        raise Http404("No such run.")
    return run


def run_pair_for_viewer(*, user: User | AnonymousUser, run: Run) -> Run | None:
    """The run's twin if `user` may see it (`run` from `run_get_for_viewer`: its pair is
    joined), else None."""
    return run.pair if run.pair and _can_view(user=user, run=run.pair) else None


def run_list_for_viewer(*, user: User | AnonymousUser) -> QuerySet[Run]:
    """Runs `user` may see, newest first."""
    runs = Run.objects.select_related("owner")
    if user.is_authenticated and user.is_staff:
        return runs
    visible = Q(is_public=True)
    if user.is_authenticated:
        visible |= Q(owner_id=user.pk)
    return runs.filter(visible)


def run_state_derive(*, run: Run) -> str:
    """The state from the submissions' latest evaluations: complete once every kernel's
    evaluation has finished, evaluating before. A run not accepted yet keeps its state
    (receiving, validating, rejected)."""
    if run.state in UNACCEPTED_STATES:
        return run.state
    ids = list(Submission.objects.filter(run=run).values_list("pk", flat=True))
    return _state(run=run, submission_ids=ids, latest=evaluation_latest_states(submission_ids=ids))


def _state(*, run: Run, submission_ids: list[int], latest: dict[int, Evaluation]) -> str:
    if run.state in UNACCEPTED_STATES:
        return run.state
    if all(i in latest and latest[i].is_finished for i in submission_ids):
        return RunState.COMPLETE
    return RunState.EVALUATING


# What two runs of a pair share: their uplift compares like with like.
PAIR_KEYS = (
    ("catalog_version", "catalog version"),
    ("hardware", "GPU"),
    ("model", "model"),
    ("agent", "agent"),
)


def run_pair_refusal(*, run: Run, other: Run) -> str:
    """Why two runs cannot be a pair ("" when they can): one without guidance and one
    with it, of the same catalog version, GPU kind, model and agent."""
    if run.state in UNACCEPTED_STATES or other.state in UNACCEPTED_STATES:
        return "Only accepted runs pair: a run being validated or rejected does not."
    if (run.condition == CONDITION_NONE) == (other.condition == CONDITION_NONE):
        return "A pair is one run without guidance and one with guidance."
    differ = [
        f"{label} {getattr(run, name)!r} ≠ {getattr(other, name)!r}"
        for name, label in PAIR_KEYS
        if getattr(run, name) != getattr(other, name)
    ]
    if differ:
        return (
            "A pair's runs share their catalog version, GPU, model and agent; these differ: "
            + "; ".join(differ)
            + "."
        )
    return ""


def run_pair_candidates(*, run: Run) -> QuerySet[Run]:
    """The owner's runs that may be paired with `run`: the other side of the guidance
    divide, of the same catalog version, GPU kind, model and agent."""
    others = (
        Run.objects.filter(
            owner_id=run.owner_id, **{name: getattr(run, name) for name, _ in PAIR_KEYS}
        )
        .exclude(pk=run.pk)
        .exclude(state__in=UNACCEPTED_STATES)
    )
    if run.condition == CONDITION_NONE:
        return others.exclude(condition=CONDITION_NONE)
    return others.filter(condition=CONDITION_NONE)


# --- the run page -------------------------------------------------------------


@dataclass(frozen=True)
class TaskResult:
    """One run's outcome on one task."""

    submission_id: int | None
    status: str  # an evaluation status, or "missing"
    counts: bool  # correct for scoring (scoring.formulas.counts_for_scoring)
    speedup: float | None  # the stored task speedup (scoring's TaskScore)
    comparable: bool  # timed on a GPU (cuda mode), not in the interpreter
    trace: Trace | None
    proposal: SafeString | None

    @property
    def is_correct(self) -> bool:
        return self.counts

    @property
    def is_finished(self) -> bool:
        """The kernel's evaluation has its verdict (False while queued or running, and for
        a task the run left out)."""
        return self.status in FINISHED_STATUSES


@dataclass(frozen=True)
class TaskRow:
    task: Task
    mine: TaskResult
    twin: TaskResult | None


@dataclass(frozen=True)
class RunProgress:
    """Where an unfinished run's evaluations stand, its place in its pool's queue and
    the time to its last verdict, with how that estimate was made."""

    total: int
    finished: int
    running: int
    waiting: int  # queued, or not queued yet
    hardware: str  # the pool (blank: the default pool)
    queue_position: int | None  # the pool's evaluations ahead; None: none of it waits
    eta_seconds: int | None  # None: no estimate, `basis` says why
    per_evaluation_s: float | None
    slots: int
    basis: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "finished": self.finished,
            "running": self.running,
            "waiting": self.waiting,
            "hardware": self.hardware,
            "queue_position": self.queue_position,
            "eta_seconds": self.eta_seconds,
            "per_evaluation_s": self.per_evaluation_s,
            "slots": self.slots,
            "basis": self.basis,
        }


def run_progress(*, run: Run, now: datetime | None = None) -> RunProgress:
    """The run's progress (seven queries at most): its kernels' latest evaluations counted,
    the evaluations of its pool ahead of its first waiting one (0 while one of its own
    runs), and the seconds to its last verdict at the pool's measured pace."""
    now = now or timezone.now()
    total = Submission.objects.filter(run=run).count()
    newest = Evaluation.objects.filter(submission=OuterRef("submission")).order_by(
        "-created_at", "-pk"
    )
    latest = list(
        Evaluation.objects.filter(submission__run=run, pk=Subquery(newest.values("pk")[:1]))
        .only("pk", "status", "target_hardware", "created_at", "started_at")
        .order_by("created_at", "pk")
    )
    finished = sum(e.status in FINISHED_STATUSES for e in latest)
    running = [e for e in latest if e.status == EvaluationStatus.RUNNING]
    queued = [e for e in latest if e.status == EvaluationStatus.QUEUED]
    # The pool of its first waiting evaluation (all of a run's go to one pool).
    pool_of = queued or running or latest
    hardware = pool_of[0].target_hardware if pool_of else run.hardware
    pace = pool_pace(hardware=hardware, now=now)
    position = None
    eta = pace_eta_s(pace=pace, ahead=0) if running or queued else 0
    if queued:
        ahead_first, ahead_last = pool_ahead(
            hardware=hardware, owner_id=run.owner_id, among=[e.pk for e in queued]
        )
        position = 0 if running else ahead_first
        eta = pace_eta_s(pace=pace, ahead=ahead_last)
    elif running and eta is not None:
        # The last verdict is that of the evaluation that started last.
        started = max(e.started_at or now for e in running)
        eta = max(0, eta - int((now - started).total_seconds()))
    return RunProgress(
        total=total,
        finished=finished,
        running=len(running),
        waiting=max(0, total - finished - len(running)),
        hardware=hardware,
        queue_position=position,
        eta_seconds=eta,
        per_evaluation_s=pace.per_evaluation_s,
        slots=pace.slots,
        basis=pace.basis,
    )


@dataclass(frozen=True)
class RunDetail:
    run: Run
    state: str
    pair: Run | None
    pair_state: str | None
    rows: list[TaskRow]
    example_label: str | None
    progress: RunProgress | None = None  # while the run is evaluating

    @property
    def correct(self) -> int:
        return sum(r.mine.is_correct for r in self.rows)

    @property
    def trace_problem_count(self) -> int:
        return sum(r.mine.trace.problem_count for r in self.rows if r.mine.trace)


def _results(
    run: Run, *, with_proposals: bool, stored: dict[int, TaskScore], redacted: bool = True
) -> tuple[dict[int, TaskResult], str]:
    """The run's outcome per task id, and its derived state (from the same rows)."""
    submissions = {
        s.task_id: s for s in Submission.objects.filter(run=run).only("pk", "task_id", "run_id")
    }
    ids = [s.pk for s in submissions.values()]
    latest = evaluation_latest_states(submission_ids=ids)
    # The pages' offsets are for the trace's own pages, not the run's.
    traces = {
        t.task_id: t
        for t in Trace.objects.filter(run=run)
        .select_related("task")
        .defer("pages", "redacted_pages")
    }
    proposals = (
        {p.task_id: p.text for p in Proposal.objects.filter(run=run)} if with_proposals else {}
    )
    results = {}
    for task_id in set(submissions) | set(traces) | set(proposals):
        submission = submissions.get(task_id)
        evaluation = latest.get(submission.pk) if submission else None
        status = (
            "missing" if submission is None else (evaluation.status if evaluation else "queued")
        )
        text = proposals.get(task_id)
        score = stored.get(submission.pk) if submission else None
        if text is not None and redacted:
            text = redact_text(text)[0]
        results[task_id] = TaskResult(
            submission_id=submission.pk if submission else None,
            status=status,
            counts=bool(score and score.counts),
            speedup=score.speedup if score else None,
            comparable=bool(evaluation and evaluation.mode == Mode.CUDA),
            trace=traces.get(task_id),
            # An agent's proposal: its images would be fetched from wherever it points.
            proposal=markdown_render(text, images=False) if text is not None else None,
        )
    return results, _state(run=run, submission_ids=ids, latest=latest)


_MISSING = TaskResult(
    submission_id=None,
    status="missing",
    counts=False,
    speedup=None,
    comparable=False,
    trace=None,
    proposal=None,
)


def run_detail(*, run: Run, user: User | AnonymousUser) -> RunDetail:
    """Everything the run page and `GET /api/runs/<id>/` show: the run, its derived state,
    one row per task of its catalog version (and per task either run touched) with the
    twin beside it; speedups and correctness are the stored scores."""
    if run.state in (RunState.VALIDATING, RunState.REJECTED):
        # No row of the bundle exists yet (or ever): only the state and the errors show.
        return RunDetail(
            run=run, state=run.state, pair=None, pair_state=None, rows=[], example_label=None
        )
    pair = run_pair_for_viewer(user=user, run=run)
    # The stored task scores of both runs, in one query.
    stored = {
        s.submission_id: s
        for s in TaskScore.objects.filter(run_id__in=[run.pk, *([pair.pk] if pair else [])])
        .only("submission_id", "counts", "speedup")
        .order_by()
    }
    mine, state = _results(
        run,
        with_proposals=True,
        stored=stored,
        redacted=not viewer_sees_raw(user=user, run=run),
    )
    theirs, pair_state = _results(pair, with_proposals=False, stored=stored) if pair else ({}, None)
    pinned = run_catalog_tasks(run=run)
    extra = (set(mine) | set(theirs)) - {t.pk for t in pinned}
    tasks = sorted(
        [*pinned, *Task.objects.filter(pk__in=extra)], key=lambda t: (t.position, t.slug)
    )
    rows = [
        TaskRow(
            task=task,
            mine=mine.get(task.pk, _MISSING),
            twin=theirs.get(task.pk, _MISSING) if pair else None,
        )
        for task in tasks
    ]
    return RunDetail(
        run=run,
        state=state,
        pair=pair,
        pair_state=pair_state,
        rows=rows,
        example_label=EXAMPLE_LABEL if run.is_example else None,
        progress=run_progress(run=run) if state == RunState.EVALUATING else None,
    )


# --- traces -------------------------------------------------------------------


@dataclass(frozen=True)
class TracePage:
    trace: Trace
    events: list[TraceEvent]
    page: int
    page_count: int
    event_type: str | None
    final_page: int | None
    redacted: bool = False

    @property
    def has_previous(self) -> bool:
        return self.page > 0

    @property
    def has_next(self) -> bool:
        return self.page + 1 < self.page_count

    @property
    def count(self) -> int:
        """The events over all pages of this view: the trace's, or those of its type."""
        if self.event_type:
            return int(self.trace.event_types.get(self.event_type, 0))
        return self.trace.event_count

    @property
    def is_past_end(self) -> bool:
        """A page number beyond the last page (the page shows it empty)."""
        return self.page >= self.page_count


def trace_get_for_viewer(*, user: User | AnonymousUser, run_pk: int | str, task: str) -> Trace:
    """The trace of `task` in a run `user` may see, or a 404."""
    run = run_get_for_viewer(user=user, pk=run_pk)
    trace = Trace.objects.select_related("run", "task").filter(run=run, task__slug=task).first()
    if trace is None:
        raise Http404("No trace for this task in this run.")
    return trace


def trace_event_types(*, trace: Trace) -> dict[str, int]:
    """The trace's event types with their counts, in the order the type filter offers
    them: the schema's types first, then others, `malformed` last."""
    order = sorted(trace.event_types, key=lambda t: (t not in KNOWN_TYPES, t == MALFORMED, t))
    return {t: int(trace.event_types[t]) for t in order}


def trace_is_redacted_for(*, user: User | AnonymousUser, trace: Trace) -> bool:
    """Whether `user` is shown the trace's redacted copy: it has one (secrets were
    found) and `user` is neither the owner nor staff."""
    return bool(trace.redacted_file) and not viewer_sees_raw(user=user, run=trace.run)


def trace_page(
    *, trace: Trace, page: Any = 0, event_type: str | None = None, redacted: bool = False
) -> TracePage:
    """One page of the trace, decompressed from its own gzip member(s) only; from the
    redacted copy when `redacted` (trace_is_redacted_for) and the trace has one."""
    try:
        number = max(0, int(page))
    except (TypeError, ValueError):
        number = 0
    event_type = event_type or None
    redacted = redacted and bool(trace.redacted_file)
    name = trace.redacted_file.name if redacted else trace.file.name
    problems = trace.problems
    if redacted:
        problems = problems_redacted(problems)
    with default_storage.open(str(name), "rb") as handle:
        events, count = trace_page_read(
            handle=handle,
            pages=trace.redacted_pages if redacted else trace.pages,
            submit_lines=trace.submit_lines,
            page=number,
            event_type=event_type,
            problems=problems,
            problems_complete=len(trace.problems) >= trace.problem_count,
        )
    # The jump to the final kernel always lands on the unfiltered page that holds it.
    final_page = None
    if trace.final_submit_line is not None:
        final_page = page_of_line(pages=trace.pages, line=trace.final_submit_line)
    return TracePage(
        trace=trace,
        events=events,
        page=min(number, count - 1) if events else number,
        page_count=count,
        event_type=event_type,
        final_page=final_page,
        redacted=redacted,
    )


def trace_raw_open(*, trace: Trace, redacted: bool = False) -> tuple[IO[bytes], str]:
    """The stored file (the uploaded trace, gzip-compressed) opened for reading, and the
    name it downloads as; the redacted copy when `redacted` and the trace has one."""
    if redacted and trace.redacted_file:
        handle = default_storage.open(str(trace.redacted_file.name), "rb")
        return handle, f"run{trace.run_id}-{trace.task.slug}.redacted.jsonl.gz"
    handle = default_storage.open(str(trace.file.name), "rb")
    return handle, f"run{trace.run_id}-{trace.task.slug}.jsonl.gz"

"""The task × run matrix: each run's outcome on each task, from its latest evaluations."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Avg, Case, Count, F, FloatField, OuterRef, Q, QuerySet, Subquery, When
from django.db.models.functions import Exp, Ln

from evaluator.models import Evaluation
from moderation.selectors import run_rankable_q
from runs.models import Run
from task_catalog.models import Task, Workload
from taskformat.spec import Mode

from ..filters import Filters
from ..tables import Column, Table
from .common import evaluation_counts

MATRIX_PAGE = 40

_TIMED = Q(results__role=Workload.Role.TIMED)
_LOG_SPEEDUP = Ln(
    Case(When(results__speedup__gt=0, then=F("results__speedup")), output_field=FloatField())
)


@dataclass(frozen=True)
class Cell:
    status: str  # an evaluation status, or "missing" (no kernel for the task)
    review: str = ""
    counts: bool = False
    speedup: float | None = None  # task geomean; counting, GPU-timed cells only
    submission_id: int | None = None


@dataclass(frozen=True)
class Matrix:
    tasks: list[Task]
    runs: list[Run]
    cells: dict[tuple[int, int], Cell]  # (task id, run id) -> cell
    page: int
    page_count: int

    def row(self, task: Task) -> list[Cell]:
        return [self.cells.get((task.pk, run.pk), _MISSING) for run in self.runs]

    @property
    def rows(self) -> list[tuple[Task, list[Cell]]]:
        return [(task, self.row(task)) for task in self.tasks]


_MISSING = Cell(status="missing")


def run_filtered(*, filters: Filters) -> QuerySet[Run]:
    """Public runs matching the filters, newest first (no query until read)."""
    runs = Run.objects.filter(run_rankable_q())
    for name in ("hardware", "condition", "model", "agent", "catalog_version"):
        value = getattr(filters, name)
        if value:
            runs = runs.filter(**{name: value})
    if filters.since:
        runs = runs.filter(finished_at__date__gte=filters.since)
    if filters.until:
        runs = runs.filter(finished_at__date__lte=filters.until)
    return runs.order_by("-finished_at", "-pk")


def task_run_matrix(*, filters: Filters, page_size: int = MATRIX_PAGE) -> Matrix:
    """One page of the filtered runs as columns, the catalog's tasks as rows (4 queries).

    A cell is the run's latest evaluation of its kernel for the task: its status, and
    for a result that counts and was timed on a GPU, the task speedup (geometric mean of
    the timed workloads' speedups).
    """
    runs_qs = run_filtered(filters=filters)
    total = runs_qs.count()
    page_count = max(1, -(-total // page_size))
    page = min(filters.page, page_count)
    runs = list(runs_qs[(page - 1) * page_size : page * page_size])
    tasks = _catalog_tasks()
    cells = run_cells(run_ids=[r.pk for r in runs])
    return Matrix(tasks=tasks, runs=runs, cells=cells, page=page, page_count=page_count)


def _catalog_tasks() -> list[Task]:
    return list(Task.objects.filter(current_version__isnull=False).order_by("position", "slug"))


def run_cells(*, run_ids: list[int]) -> dict[tuple[int, int], Cell]:
    """(task id, run id) -> the run's latest evaluation of its kernel for the task (1 query)."""
    newest = Evaluation.objects.filter(submission=OuterRef("submission")).order_by(
        "-created_at", "-pk"
    )
    evaluations = (
        Evaluation.objects.filter(submission__run_id__in=run_ids)
        .filter(pk=Subquery(newest.values("pk")[:1]))
        .annotate(
            timed=Count("results", filter=_TIMED),
            positive=Count("results", filter=_TIMED & Q(results__speedup__gt=0)),
            score=Exp(Avg(_LOG_SPEEDUP, filter=_TIMED)),
        )
        .values(
            "submission_id",
            "submission__run_id",
            "submission__task_id",
            "status",
            "review",
            "mode",
            "hardware",
            "timed",
            "positive",
            "score",
        )
    )
    cells: dict[tuple[int, int], Cell] = {}
    for e in evaluations:
        counts = evaluation_counts(status=e["status"], review=e["review"])
        timed = e["mode"] == Mode.CUDA and bool(e["hardware"]) and e["timed"] > 0
        cells[(e["submission__task_id"], e["submission__run_id"])] = Cell(
            status=e["status"],
            review=e["review"],
            counts=counts,
            speedup=e["score"] if counts and timed and e["positive"] == e["timed"] else None,
            submission_id=e["submission_id"],
        )
    return cells


MATRIX_COLUMNS = (
    Column("task", "Task"),
    Column("run_id", "Run"),
    Column("model", "Model"),
    Column("agent", "Agent"),
    Column("condition", "Condition"),
    Column("status", "Status", "The latest evaluation's status, or missing."),
    Column(
        "speedup",
        "Task speedup",
        "Geometric mean of the timed workloads' speedups.",
        "higher",
        True,
    ),
)


def matrix_table(*, matrix: Matrix) -> Table:
    """The matrix as one record per (task, run) cell, for the export."""
    rows = [
        {
            "task": task.slug,
            "run_id": run.pk,
            "model": run.model,
            "agent": run.agent,
            "condition": run.condition,
            "status": cell.status,
            "speedup": cell.speedup,
        }
        for task, cells in matrix.rows
        for run, cell in zip(matrix.runs, cells, strict=True)
    ]
    return Table(name="task-run-matrix", columns=MATRIX_COLUMNS, rows=rows)


@dataclass(frozen=True)
class Comparison:
    a: Run
    b: Run
    rows: list[tuple[Task, Cell, Cell, float | None]]  # task, a, b, speedup of b over a


def run_comparison(*, a: Run, b: Run) -> Comparison:
    """Two runs side by side, task by task (2 queries); the ratio where both have a speedup."""
    cells = run_cells(run_ids=[a.pk, b.pk])
    rows = []
    for task in _catalog_tasks():
        ca, cb = cells.get((task.pk, a.pk), _MISSING), cells.get((task.pk, b.pk), _MISSING)
        ratio = cb.speedup / ca.speedup if ca.speedup and cb.speedup else None
        rows.append((task, ca, cb, ratio))
    return Comparison(a=a, b=b, rows=rows)


COMPARISON_COLUMNS = (
    Column("task", "Task"),
    Column("a_status", "Status A"),
    Column("a_speedup", "Speedup A", "Task speedup of run A.", "higher", True),
    Column("b_status", "Status B"),
    Column("b_speedup", "Speedup B", "Task speedup of run B.", "higher", True),
    Column("ratio", "B / A", "Speedup of run B over run A on the task.", "higher", True),
)


def comparison_table(*, comparison: Comparison) -> Table:
    rows = [
        {
            "task": task.slug,
            "a_status": ca.status,
            "a_speedup": ca.speedup,
            "b_status": cb.status,
            "b_speedup": cb.speedup,
            "ratio": ratio,
        }
        for task, ca, cb, ratio in comparison.rows
    ]
    name = f"compare-{comparison.a.pk}-{comparison.b.pk}"
    return Table(name=name, columns=COMPARISON_COLUMNS, rows=rows)


def run_filter_choices() -> dict[str, list[str]]:
    """The values each run filter can take among public runs (one query)."""
    names = ("hardware", "condition", "model", "agent", "catalog_version")
    seen: dict[str, set[str]] = {name: set() for name in names}
    for values in Run.objects.filter(run_rankable_q()).values_list(*names).distinct():
        for name, value in zip(names, values, strict=True):
            if value:
                seen[name].add(value)
    return {name: sorted(values) for name, values in seen.items()}

"""Reads of assessments: the effective one per property, the submission page's view,
the rubric a judge is given."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.http import Http404

from evaluator.models import Evaluation
from scoring.formulas import LEVELS, PropertyRow, property_credits
from scoring.models import SOURCE_PRECEDENCE, Assessment, AssessmentKind, AssessmentSource
from submissions.models import Submission
from task_catalog.models import DesignProperty, Task
from taskformat.properties import declared_evidence

_RANK = {source: rank for rank, source in enumerate(SOURCE_PRECEDENCE)}

IMPLEMENTED_MEANS = (
    "The code (or, for a proposal, the design text) does what the description says. "
    "A property whose dependencies are not all implemented earns no weight."
)


def assessment_effective(assessments: Iterable[Assessment]) -> Assessment | None:
    """The assessment of highest precedence: admin > judge > counters > detector."""
    ranked = sorted(assessments, key=lambda a: _RANK[AssessmentSource(a.source)])
    return ranked[0] if ranked else None


def assessments_effective_by_property(
    assessments: Iterable[Assessment],
) -> dict[int, Assessment]:
    """Property id → its effective assessment, for assessments of one target."""
    grouped: dict[int, list[Assessment]] = defaultdict(list)
    for a in assessments:
        grouped[a.property_id].append(a)
    return {pk: found for pk, rows in grouped.items() if (found := assessment_effective(rows))}


def property_rows(properties: Iterable[DesignProperty]) -> list[PropertyRow]:
    return [
        PropertyRow(
            key=p.key, level=p.level, weight=p.weight, depends_on=tuple(map(str, p.depends_on))
        )
        for p in properties
    ]


@dataclass(frozen=True)
class PropertyView:
    property: DesignProperty
    effective: Assessment | None
    others: list[Assessment]
    credited: bool  # implemented and every dependency implemented
    counters_note: str  # why counters could not decide, for a property with a counter rule
    # The strongest evidence a machine can judge it from; None: judge/admin-assessed.
    assessed_by: str | None = None
    judge_assessed: bool = False

    def as_dict(self) -> dict[str, Any]:
        """What the submission page shows of the property, as the API gives it: the
        effective assessment (`implemented` is None when none), and each other source's."""
        p, a = self.property, self.effective
        return {
            "key": p.key,
            "level": p.level,
            "title": p.title,
            "weight": p.weight,
            "depends_on": list(p.depends_on),
            "implemented": None if a is None else a.value,
            "credited": self.credited,
            "source": None if a is None else a.source,
            "judge": "" if a is None else a.judge,
            "rationale": "" if a is None else a.rationale,
            "evidence": [] if a is None else a.evidence,
            "evidence_kind": None if a is None else (a.evidence_kind or None),
            "judge_assessed": self.judge_assessed,
            "counters_note": self.counters_note,
            "others": [
                {"source": o.source, "value": o.value, "rationale": o.rationale}
                for o in self.others
            ],
        }


@dataclass(frozen=True)
class LevelView:
    level: str
    properties: list[PropertyView]


def submission_properties_view(
    *, submission: Submission, evaluation: Evaluation | None
) -> list[LevelView]:
    """The submission page's properties per level: the effective assessment with its
    source, rationale and evidence, the other sources kept beside it."""
    properties = list(DesignProperty.objects.filter(task_id=submission.task_id))
    assessments = list(
        Assessment.objects.filter(kind=AssessmentKind.IMPLEMENTED, submission=submission)
        .select_related("who")
        .order_by("assessed_at")
    )
    effective = assessments_effective_by_property(assessments)
    values = {p.key: (effective[p.pk].value if p.pk in effective else None) for p in properties}
    credits = property_credits(properties=property_rows(properties), values=values)
    note = counters_not_read_reason(evaluation=evaluation)
    levels = []
    for level in LEVELS:
        views = []
        for p in (p for p in properties if p.level == level):
            chosen = effective.get(p.pk)
            has_counter_result = any(
                a.property_id == p.pk and a.source == "counters" for a in assessments
            )
            views.append(
                PropertyView(
                    property=p,
                    effective=chosen,
                    others=[a for a in assessments if a.property_id == p.pk and a is not chosen],
                    credited=credits[p.key],
                    counters_note=note if p.counters and not has_counter_result else "",
                    assessed_by=(by := declared_evidence(p.detector, p.counters)),
                    judge_assessed=by is None,
                )
            )
        if views:
            levels.append(LevelView(level=level, properties=views))
    return levels


def counters_not_read_reason(*, evaluation: Evaluation | None) -> str:
    """Why a finished evaluation has no counters to decide a counter rule with."""
    if evaluation is None or not evaluation.is_finished:
        return "counters not read: no finished evaluation yet"
    if evaluation.mode != "cuda":
        return "counters not read: the evaluation ran in the interpreter, without a GPU"
    if evaluation.status != "correct" and evaluation.review != "cleared":
        return f"counters not read: the verdict is {evaluation.status}"
    reason = evaluation.environment.get("counters") if evaluation.environment else None
    return f"counters not read: {reason}" if reason else "counters not read: no reason recorded"


def task_rubric(*, slug: str) -> dict[str, Any]:
    """What a judge is given: each property with its level, weight, description,
    dependencies and what counts as implemented."""
    task = Task.objects.filter(slug=slug).first()
    if task is None:
        raise Http404("No such task.")
    return {
        "task": task.slug,
        "title": task.title,
        "implemented_means": IMPLEMENTED_MEANS,
        "properties": [
            {
                "key": p.key,
                "level": p.level,
                "title": p.title,
                "weight": p.weight,
                "description": p.description,
                "depends_on": list(p.depends_on),
                "implemented_when": p.description or p.title,
                "detector": p.detector or {"kind": "manual"},
                "counters": p.counters,
                "machine_evidence": declared_evidence(p.detector, p.counters),
            }
            for p in task.properties.order_by("level", "position", "pk")
        ],
    }

"""Each enum has one set of values: the database's choices are the harness's and the task
format's (evaluator.harness.verdict, taskformat.spec)."""

import pytest

from evaluator.harness.verdict import Status
from evaluator.models import (
    FINISHED_STATUSES,
    Evaluation,
    EvaluationMode,
    EvaluationStatus,
    WorkloadResult,
)
from scoring.formulas import LEVELS
from task_catalog.models import Level, Workload
from taskformat.spec import Level as SpecLevel
from taskformat.spec import Mode, WorkloadRole


@pytest.mark.parametrize(
    ("django_values", "spec_values"),
    [
        (set(FINISHED_STATUSES), {s.value for s in Status}),
        (set(EvaluationStatus) - {"queued", "running"}, {s.value for s in Status}),
        (set(Level.values), {level.value for level in SpecLevel}),
        (set(Workload.Role.values), {role.value for role in WorkloadRole}),
        (set(LEVELS), {level.value for level in SpecLevel}),
        (set(EvaluationMode.values), {mode.value for mode in Mode}),
        ({v for v, _ in Evaluation._meta.get_field("mode").choices}, {m.value for m in Mode}),
        (
            {v for v, _ in WorkloadResult._meta.get_field("role").choices},
            {role.value for role in WorkloadRole},
        ),
    ],
)
def test_the_database_choices_are_the_harness_and_format_enums(django_values, spec_values):
    assert django_values == spec_values

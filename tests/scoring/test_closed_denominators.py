"""Closed denominators pinned to the run's catalog version, and pairs of comparable runs."""

import pytest
from django.core.exceptions import ValidationError
from django.forms.models import model_to_dict

from runs.services import run_pair
from scoring.models import CatalogVersion, RunScore
from scoring.services import scores_refresh, scores_refresh_all
from scoring.services.catalog import catalog_version_pin
from tests.factories import RunFactory, SubmissionFactory, TaskVersionFactory

pytestmark = pytest.mark.django_db


def kernel(task, run):
    return SubmissionFactory(task=task, task_version=task.current_version, run=run)


def stored(run):
    score = RunScore.objects.get(run=run)
    return {k: v for k, v in model_to_dict(score).items() if k not in ("id", "refreshed_at")}


def test_a_task_added_to_the_catalog_changes_no_stored_score_of_an_older_run(scored_task, finish):
    second = TaskVersionFactory(task__slug="second", task__position=1).task
    version = catalog_version_pin()
    assert sorted(CatalogVersion.objects.get(digest=version).tasks) == sorted(
        [scored_task.slug, "second"]
    )
    run = RunFactory(catalog_version=version)
    finish(kernel(scored_task, run), speedups=(2.0, 8.0))
    finish(kernel(second, run), status="incorrect")
    before = stored(run)
    assert (before["tasks_total"], before["tasks_correct"]) == (2, 1)
    assert before["performance_score"] == pytest.approx(4.0 / 2)

    TaskVersionFactory(task__slug="third", task__position=2)  # the catalog grows
    assert catalog_version_pin() != version
    scores_refresh_all()

    assert stored(run) == before


@pytest.mark.parametrize("status", ["incorrect", "flagged", "compile_error"])
def test_a_run_with_nothing_correct_scores_zero_not_null(scored_task, finish, status):
    run = RunFactory(catalog_version=catalog_version_pin(), hardware="declared GPU")
    finish(kernel(scored_task, run), status=status)
    score = RunScore.objects.get(run=run)
    assert score.timed and score.hardware == "NVIDIA H200"  # the GPU its kernel ran on
    assert score.correctness_rate == 0.0 and score.performance_score == 0.0
    assert score.fast_p and all(share == 0.0 for _, share in score.fast_p)
    assert score.geomean_speedup is None and score.geomean_n == 0


def test_missing_and_unevaluated_tasks_count_in_the_denominators(scored_task, finish):
    TaskVersionFactory(task__slug="missing", task__position=1)
    queued = TaskVersionFactory(task__slug="queued", task__position=2).task
    run = RunFactory(catalog_version=catalog_version_pin())
    finish(kernel(scored_task, run), speedups=(3.0,))
    kernel(queued, run)  # submitted, never evaluated
    scores_refresh(run_ids=[run.pk])
    score = RunScore.objects.get(run=run)
    assert (score.tasks_total, score.tasks_correct) == (3, 1)
    assert score.performance_score == pytest.approx(3.0 / 3)
    assert (score.kernels, score.pending) == (2, 1)
    assert [t["task"] for t in score.tasks] == [scored_task.slug, "missing", "queued"]


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("catalog_version", "ffffffffffff", "catalog version"),
        ("hardware", "NVIDIA B200", "GPU"),
        ("model", "other-model", "model"),
        ("agent", "other-agent", "agent"),
    ],
)
def test_pairing_by_hand_refuses_runs_that_are_not_comparable_and_says_why(field, value, named):
    without = RunFactory()
    guided = RunFactory(owner=without.owner, levels=["L1"], **{field: value})
    with pytest.raises(ValidationError, match=named):
        run_pair(run=without, other=guided, user=without.owner)
    without.refresh_from_db()
    assert without.pair_id is None

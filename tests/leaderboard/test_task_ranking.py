"""The per-task ranking: which results count, one ranking per GPU, best per entrant, read
from the materialised TaskScores (refreshed on every verdict and review)."""

import pytest

from evaluator.services import evaluation_review
from leaderboard.selectors import task_ranking
from scoring.services import scores_refresh
from tests.factories import (
    EvaluationFactory,
    RunFactory,
    SubmissionFactory,
    TaskVersionFactory,
    UserFactory,
    WorkloadResultFactory,
    task_with_workloads,
)

pytestmark = pytest.mark.django_db


def make_task(*, timed=2):
    return task_with_workloads(timed=[f"timed_{i}" for i in range(timed)], hidden=["secret"])


def evaluate(task, owner, speedups, **kwargs):
    submission = SubmissionFactory(
        owner=owner,
        task=task,
        task_version=task.current_version,
        is_public=kwargs.pop("is_public", True),
        run=kwargs.pop("run", None),
    )
    evaluation = EvaluationFactory(submission=submission, **kwargs)
    for i, speedup in enumerate(speedups):
        WorkloadResultFactory(
            evaluation=evaluation,
            name=f"timed_{i}",
            median_ms=1.0,
            ref_median_ms=speedup,
            speedup=speedup,
        )
    WorkloadResultFactory(
        evaluation=evaluation, name="secret", role="untimed", hidden=True, speedup=100.0
    )
    refreshed(evaluation)
    return evaluation


def refreshed(evaluation):
    """The scores as the evaluation's finish (evaluator.services) leaves them."""
    scores_refresh(submission_ids=[evaluation.submission_id], machine=False)
    return evaluation


def test_ranking_takes_each_owners_best_eligible_result(django_assert_num_queries):
    task = make_task()
    alice, bob, carol = UserFactory(username="alice"), UserFactory(username="bob"), UserFactory()
    evaluate(task, alice, [2.0, 8.0])  # geomean 4
    best_alice = evaluate(task, alice, [5.0, 5.0])  # 5
    evaluate(task, bob, [3.0, 3.0])
    evaluate(task, bob, [50.0, 50.0], status="incorrect")
    evaluate(task, bob, [50.0, 50.0], mode="interpret")
    evaluate(task, bob, [50.0, 50.0], status="flagged", review="pending")
    evaluate(task, bob, [50.0, 50.0], review="hacked")
    evaluate(task, carol, [50.0, 50.0], is_public=False)
    old = TaskVersionFactory(task=task, make_current=False)
    other = SubmissionFactory(owner=carol, task=task, task_version=old)
    refreshed(WorkloadResultFactory(evaluation__submission=other, speedup=90.0).evaluation)

    # the scores, their workload results, the expert's timings per GPU
    with django_assert_num_queries(3):
        rows = task_ranking(task=task)

    assert [(r.rank, r.owner) for r in rows] == [(1, "alice"), (2, "bob")]
    assert rows[0].speedup == pytest.approx(5.0)
    assert rows[0].evaluation_id == best_alice.pk
    assert rows[0].workload_speedups == {"timed_0": 5.0, "timed_1": 5.0}
    assert rows[1].speedup == pytest.approx(3.0)


@pytest.mark.parametrize(
    "status, review, ranks",
    [
        ("correct", "", True),
        ("flagged", "cleared", True),
        ("flagged", "pending", False),
        ("flagged", "hacked", False),
        ("correct", "hacked", False),
        ("incorrect", "", False),
    ],
)
def test_a_result_ranks_when_it_counts(status, review, ranks):
    task = make_task()
    evaluate(task, UserFactory(username="alice"), [2.0, 2.0], status=status, review=review)
    assert [r.owner for r in task_ranking(task=task)] == (["alice"] if ranks else [])


def test_a_flagged_result_an_admin_clears_ranks(django_capture_on_commit_callbacks):
    task = make_task()
    flagged = evaluate(
        task, UserFactory(username="alice"), [3.0, 3.0], status="flagged", review="pending"
    )
    assert task_ranking(task=task) == []

    with django_capture_on_commit_callbacks(execute=True):
        evaluation_review(evaluation=flagged, decision="cleared", reviewer=UserFactory())

    [row] = task_ranking(task=task)
    assert (row.owner, row.status, row.evaluation_id) == ("alice", "flagged", flagged.pk)


def test_a_submission_ranks_with_its_latest_verdict():
    task = make_task()
    first = evaluate(task, UserFactory(username="alice"), [4.0, 4.0])
    assert [r.evaluation_id for r in task_ranking(task=task)] == [first.pk]

    refreshed(EvaluationFactory(submission=first.submission, status="incorrect"))

    assert task_ranking(task=task) == []


def test_a_timed_workload_marked_hidden_is_neither_shown_nor_counted():
    task = make_task()
    evaluation = evaluate(task, UserFactory(), [4.0, 4.0])
    WorkloadResultFactory(evaluation=evaluation, name="timed_secret", hidden=True, speedup=0.5)
    refreshed(evaluation)

    [row] = task_ranking(task=task)

    assert row.speedup == pytest.approx(4.0)
    assert row.workload_speedups == {"timed_0": 4.0, "timed_1": 4.0}


def test_results_on_different_gpus_are_never_ranked_together():
    task = make_task()
    alice, bob, carol = (UserFactory(username=n) for n in ("alice", "bob", "carol"))
    evaluate(task, alice, [4.0, 4.0], hardware="NVIDIA B200")
    evaluate(task, bob, [3.0, 3.0], hardware="NVIDIA H200")
    evaluate(task, carol, [2.0, 2.0], hardware="NVIDIA H200")
    evaluate(task, alice, [9.0, 9.0], hardware="NVIDIA H200")

    rows = task_ranking(task=task)

    assert [(r.hardware, r.rank, r.owner) for r in rows] == [
        ("NVIDIA B200", 1, "alice"),
        ("NVIDIA H200", 1, "alice"),
        ("NVIDIA H200", 2, "bob"),
        ("NVIDIA H200", 3, "carol"),
    ]
    only = task_ranking(task=task, hardware="NVIDIA B200")
    assert [(r.owner, r.speedup) for r in only] == [("alice", pytest.approx(4.0))]
    assert [r.owner for r in task_ranking(task=task, limit=1)] == ["alice", "alice"]


def test_a_cuda_result_without_a_named_gpu_never_ranks():
    task = make_task()
    evaluate(task, UserFactory(), [2.0, 2.0], hardware="")
    assert task_ranking(task=task) == []


def test_each_run_is_its_own_entrant_and_private_runs_never_rank():
    task = make_task()
    alice = UserFactory(username="alice")
    first = RunFactory(owner=alice, model="m1")
    second = RunFactory(owner=alice, model="m2", levels=["L1"], is_example=True)
    hidden = RunFactory(owner=alice, is_public=False)
    evaluate(task, alice, [2.0, 2.0], run=first)
    evaluate(task, alice, [3.0, 3.0], run=second)
    evaluate(task, alice, [9.0, 9.0], run=hidden)
    evaluate(task, alice, [1.5, 1.5])

    rows = task_ranking(task=task)

    assert [(r.run_id, r.is_example) for r in rows] == [
        (second.pk, True),
        (first.pk, False),
        (None, False),
    ]
    assert rows[0].run_label == "m2 · agent-y · L1"


def test_ranking_skips_results_without_a_timing():
    task = make_task()
    evaluation = evaluate(task, UserFactory(), [2.0])
    WorkloadResultFactory(evaluation=evaluation, name="timed_1", speedup=None)
    refreshed(evaluation)
    assert task_ranking(task=task) == []

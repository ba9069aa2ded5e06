import pytest

from task_catalog.models import Workload
from task_catalog.selectors import geometric_mean, task_get_public, task_list, task_ranking
from tests.factories import (
    DesignPropertyFactory,
    EvaluationFactory,
    GuidanceFactory,
    SubmissionFactory,
    TaskVersionFactory,
    UserFactory,
    WorkloadFactory,
    WorkloadResultFactory,
)

pytestmark = pytest.mark.django_db


def make_task(*, timed=2, props=("L1", "L1", "L3")):
    version = TaskVersionFactory()
    for i in range(timed):
        WorkloadFactory(version=version, name=f"timed_{i}")
    WorkloadFactory(version=version, name="secret", role=Workload.Role.HIDDEN)
    WorkloadFactory(version=version, name="check_public", role=Workload.Role.CHECK)
    WorkloadFactory(version=version, name="check_secret", role=Workload.Role.CHECK, hidden=True)
    for level in props:
        DesignPropertyFactory(task=version.task, level=level)
    for level in ("L1", "L2"):
        GuidanceFactory(task=version.task, level=level)
    return version.task


def test_task_list_counts_timed_workloads_and_properties_per_level_in_one_query(
    django_assert_num_queries,
):
    make_task(timed=3)
    make_task(timed=1, props=("L2",))
    TaskVersionFactory(make_current=False)  # a task without a current version is not listed

    with django_assert_num_queries(1):
        rows = list(task_list())

    assert [
        (r.timed_workloads, r.properties_L1, r.properties_L2, r.properties_L3) for r in rows
    ] == [
        (3, 2, 0, 1),
        (1, 0, 1, 0),
    ]
    assert all(r.current_version.number for r in rows)


def test_task_get_public_never_returns_hidden_workloads(django_assert_num_queries):
    task = make_task()

    with django_assert_num_queries(4):
        found = task_get_public(slug=task.slug)
        names = [w.name for w in found.current_version.public_workloads]
        levels = [g.level for g in found.guidance.all()]
        props = list(found.properties.all())

    assert names == ["timed_0", "timed_1", "check_public"]
    assert levels == ["L1", "L2"]
    assert len(props) == 3


def test_task_get_public_unknown_slug_is_none():
    assert task_get_public(slug="nope") is None


def evaluate(task, owner, speedups, **kwargs):
    submission = SubmissionFactory(
        owner=owner,
        task=task,
        task_version=task.current_version,
        is_public=kwargs.pop("is_public", True),
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
        evaluation=evaluation, name="secret", role="hidden", hidden=True, speedup=100.0
    )
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
    WorkloadResultFactory(evaluation=EvaluationFactory(submission=other), speedup=90.0)

    with django_assert_num_queries(2):
        rows = task_ranking(task=task)

    assert [(r.rank, r.owner) for r in rows] == [(1, "alice"), (2, "bob")]
    assert rows[0].speedup == pytest.approx(5.0)
    assert rows[0].evaluation_id == best_alice.pk
    assert rows[0].workload_speedups == {"timed_0": 5.0, "timed_1": 5.0}
    assert rows[1].speedup == pytest.approx(3.0)


def test_ranking_skips_results_without_a_timing():
    task = make_task()
    evaluation = evaluate(task, UserFactory(), [2.0])
    WorkloadResultFactory(evaluation=evaluation, name="timed_1", speedup=None)
    assert task_ranking(task=task) == []


@pytest.mark.parametrize(
    "values, expected", [([4.0], 4.0), ([2.0, 8.0], 4.0), ([1.0, 10.0, 100.0], 10.0)]
)
def test_geometric_mean(values, expected):
    assert geometric_mean(values) == pytest.approx(expected)


@pytest.mark.parametrize("values", [[], [0.0, 2.0], [-1.0]])
def test_geometric_mean_rejects_non_positive_or_empty(values):
    with pytest.raises(ValueError):
        geometric_mean(values)

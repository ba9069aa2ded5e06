import pytest

from task_catalog.models import Workload
from task_catalog.selectors import task_get_public, task_list
from tests.factories import (
    DesignPropertyFactory,
    GuidanceFactory,
    TaskVersionFactory,
    WorkloadFactory,
)

pytestmark = pytest.mark.django_db


def make_task(*, timed=2, props=("L1", "L1", "L3")):
    version = TaskVersionFactory()
    for i in range(timed):
        WorkloadFactory(version=version, name=f"timed_{i}")
    WorkloadFactory(version=version, name="secret", role=Workload.Role.UNTIMED)
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

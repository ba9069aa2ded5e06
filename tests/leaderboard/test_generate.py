import pytest
from django.core.management import call_command

from runs.models import Run
from scoring.models import RunScore
from tests.factories import DesignPropertyFactory, TaskVersionFactory, WorkloadFactory

pytestmark = pytest.mark.django_db


def test_the_generated_runs_are_labelled_paired_and_scored():
    for slug in ("a", "b"):
        version = TaskVersionFactory(task__slug=slug)
        WorkloadFactory(version=version, name="timed_a")
        DesignPropertyFactory(task=version.task)

    call_command("leaderboard_example", runs=4)

    runs = list(Run.objects.all())
    assert len(runs) == 4 and all(r.is_example and "Generated" in r.notes for r in runs)
    assert all(r.pair_id for r in runs)
    assert RunScore.objects.filter(run__in=runs, tasks_total=2).count() == 4

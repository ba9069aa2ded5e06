"""The experts' reference figures on the home page and the leaderboard, beside the same
figures against the baselines of the tasks' earlier versions. Every speedup below is a
made-up test value."""

import pytest
from django.urls import reverse

from evaluator.services import EXPERT_USERNAME
from leaderboard.selectors.board import expert_reference_rows
from runs.selectors import catalog_version_current
from scoring.models import TaskScore
from tests.factories import SubmissionFactory, TaskFactory, TaskVersionFactory, UserFactory
from tests.leaderboard.test_board_views import pair

pytestmark = pytest.mark.django_db

H200 = "NVIDIA H200"


def expert_score(version, speedup, *, hardware=H200, counts=True):
    expert = UserFactory._meta.model.objects.filter(username=EXPERT_USERNAME).first()
    submission = SubmissionFactory(
        owner=expert or UserFactory(username=EXPERT_USERNAME),
        task_version=version,
        task=version.task,
    )
    return TaskScore.objects.create(
        submission=submission,
        task=version.task,
        hardware=hardware,
        status="correct" if counts else "incorrect",
        counts=counts,
        speedup=speedup,
    )


@pytest.fixture
def catalog():
    """Three tasks: `moved` had a strawman baseline in v1 (10×) and a fair one in v2 (2×);
    `same` never changed (3×); `owed` was measured under v1 only (8×)."""
    moved, same, owed = (TaskFactory(slug=s) for s in ("moved", "same", "owed"))
    old = TaskVersionFactory(task=moved)
    expert_score(old, 10.0)
    expert_score(TaskVersionFactory(task=moved), 2.0)
    expert_score(TaskVersionFactory(task=same), 3.0)
    expert_score(TaskVersionFactory(task=owed), 8.0)
    TaskVersionFactory(task=owed)  # its current version, not measured yet
    return moved, same, owed


def test_the_reference_counts_current_versions_and_earlier_ones_beside_it(catalog):
    [row] = expert_reference_rows(hardware=H200)
    # Current: moved 2×, same 3×, owed missing; over the catalog's 3 tasks.
    assert row["geomean_n"] == 2 and row["tasks_total"] == 3
    assert row["performance_score"] == pytest.approx((2.0 + 3.0) / 3)
    assert row["geomean_speedup"] == pytest.approx((2.0 * 3.0) ** 0.5)
    # Earlier: moved and owed by their v1 scores, same by its only one.
    earlier = row["earlier"]
    assert earlier["tasks"] == 2 and earlier["geomean_n"] == 3
    assert earlier["performance_score"] == pytest.approx((10.0 + 3.0 + 8.0) / 3)
    assert earlier["geomean_speedup"] == pytest.approx((10.0 * 3.0 * 8.0) ** (1 / 3))


def test_no_earlier_figures_where_no_task_changed():
    expert_score(TaskVersionFactory(task=TaskFactory(slug="same")), 3.0)
    [row] = expert_reference_rows(hardware=H200)
    assert row["earlier"] is None and row["performance_score"] == pytest.approx(3.0)


def test_a_gpu_with_only_earlier_scores_has_no_reference_row():
    version = TaskVersionFactory(task=TaskFactory(slug="owed"))
    expert_score(version, 8.0, hardware="NVIDIA B200")
    TaskVersionFactory(task=version.task)
    assert expert_reference_rows(hardware="NVIDIA B200") == []


def test_home_and_leaderboard_show_both(client, catalog):
    # A published pair of the current catalog on the H200: the home page's board.
    pair(model="m1", catalog_version=catalog_version_current())
    html = client.get(reverse("leaderboard:home")).content.decode()
    assert 'id="home-reference" data-hardware="NVIDIA H200"' in html
    assert "Performance Score 1.67, geomean speedup 2.45× (N=2 of 3 tasks)" in html
    assert "(2 tasks re-measured since): Performance Score 7.00" in html
    assert "#the-experts-scores-against-the-fair-baselines" in html
    board = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert "earlier versions (2 tasks): Performance Score 7.00" in board


def test_a_board_of_another_catalog_version_shows_no_reference(client, catalog):
    pair(model="m1", catalog_version="0ld000000000")
    assert 'id="home-reference"' not in client.get(reverse("leaderboard:home")).content.decode()

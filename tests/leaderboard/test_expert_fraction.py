"""A timed result's fraction of the catalog's expert on the same GPU and task version:
per workload on the submission page and in its API, per task in the task page's ranking.
Every time below is a made-up test value."""

import pytest
from django.urls import reverse

from evaluator.services import EXPERT_USERNAME
from leaderboard.selectors import evaluation_expert_fractions, expert_timings, task_ranking
from scoring.services import scores_refresh
from task_catalog.models import Workload
from tests.factories import (
    EvaluationFactory,
    SubmissionFactory,
    TaskVersionFactory,
    UserFactory,
    WorkloadFactory,
    WorkloadResultFactory,
    token_client,
)

pytestmark = pytest.mark.django_db

H200, B200 = "NVIDIA H200", "NVIDIA B200"


@pytest.fixture
def version():
    version = TaskVersionFactory(task__slug="row_softmax")
    for name in ("small", "big"):
        WorkloadFactory(version=version, name=name)
    WorkloadFactory(version=version, name="secret", role=Workload.Role.UNTIMED)
    return version


def evaluated(version, *, owner=None, hardware=H200, medians=None, speedups=None, **kwargs):
    """A finished evaluation of a public submission with the given public timed medians
    (ms) and speedups by workload, and a hidden result that is never compared."""
    submission = SubmissionFactory(
        owner=owner or UserFactory(), task_version=version, task=version.task
    )
    evaluation = EvaluationFactory(submission=submission, hardware=hardware, **kwargs)
    for name, median in (medians or {"small": 1.0, "big": 4.0}).items():
        speedup = (speedups or {}).get(name, 2.0)
        WorkloadResultFactory(
            evaluation=evaluation,
            name=name,
            median_ms=median,
            ref_median_ms=median * speedup,
            speedup=speedup,
        )
    WorkloadResultFactory(
        evaluation=evaluation, name="secret", role="untimed", hidden=True, median_ms=0.1
    )
    scores_refresh(submission_ids=[submission.pk], machine=False)
    return evaluation


def expert():
    return UserFactory(username=EXPERT_USERNAME)


# --- the selector -----------------------------------------------------------------------


def test_expert_timings_take_the_experts_newest_gpu_result_per_gpu(
    version, django_assert_num_queries
):
    evaluated(version, owner=expert(), medians={"small": 9.0, "big": 9.0})
    newest = evaluated(version, owner=expert(), speedups={"small": 4.0, "big": 1.0})
    on_b200 = evaluated(version, owner=expert(), hardware=B200, medians={"small": 0.5})
    # Not the expert's, not on a GPU, or on another version: never the yardstick.
    evaluated(version, medians={"small": 0.01, "big": 0.01})
    evaluated(version, owner=expert(), mode="interpret", hardware="")
    evaluated(TaskVersionFactory(task=version.task), owner=expert(), medians={"small": 0.01})

    with django_assert_num_queries(1):
        timings = expert_timings(task_version_id=version.pk)

    assert set(timings) == {H200, B200}
    h200 = timings[H200]
    assert h200.evaluation_id == newest.pk
    assert h200.medians_ms == {"small": 1.0, "big": 4.0}
    assert h200.task_speedup == pytest.approx(2.0)
    assert timings[B200].evaluation_id == on_b200.pk
    assert set(expert_timings(task_version_id=version.pk, hardware=B200)) == {B200}


@pytest.mark.parametrize(
    "expert_ms, this_ms, fraction",
    [
        (1.0, 2.0, 0.5),
        (1.0, 1.0, 1.0),
        (3.0, 2.0, 1.5),
    ],
)
def test_a_workloads_fraction_is_the_experts_median_over_its_own(
    version, expert_ms, this_ms, fraction
):
    evaluated(version, owner=expert(), medians={"small": expert_ms, "big": 1.0})
    evaluation = evaluated(version, medians={"small": this_ms, "big": 1.0})

    fractions = evaluation_expert_fractions(submission=evaluation.submission, evaluation=evaluation)

    assert fractions == pytest.approx({"small": fraction, "big": 1.0})


def test_there_is_no_fraction_without_an_expert_result_on_that_gpu(version):
    evaluated(version, owner=expert(), hardware=H200)
    evaluation = evaluated(version, hardware=B200)

    assert (
        evaluation_expert_fractions(submission=evaluation.submission, evaluation=evaluation) == {}
    )


def test_a_workload_the_expert_has_no_time_for_has_no_fraction(version):
    evaluated(version, owner=expert(), medians={"small": 1.0})
    evaluation = evaluated(version)

    fractions = evaluation_expert_fractions(submission=evaluation.submission, evaluation=evaluation)

    assert fractions == {"small": 1.0}


def test_an_evaluation_not_timed_on_a_gpu_asks_for_no_expert(version, django_assert_num_queries):
    evaluated(version, owner=expert())
    evaluation = evaluated(version, mode="interpret", hardware="")
    evaluation.results.all()._fetch_all()

    with django_assert_num_queries(0):
        fractions = evaluation_expert_fractions(
            submission=evaluation.submission, evaluation=evaluation
        )

    assert fractions == {}


# --- the task page's ranking ------------------------------------------------------------


@pytest.mark.parametrize("entrants", [2, 6])
def test_each_ranking_row_is_its_task_speedup_over_the_experts_on_that_gpu(
    version, entrants, django_assert_num_queries
):
    evaluated(version, owner=expert(), speedups={"small": 2.0, "big": 2.0})
    for i in range(entrants):
        evaluated(version, speedups={"small": 1.0 + i, "big": 1.0 + i})
    evaluated(version, hardware=B200, speedups={"small": 8.0, "big": 8.0})

    # the scores, their workload results, the expert's timings per GPU: whatever the rows
    with django_assert_num_queries(3):
        rows = task_ranking(task=version.task)

    fractions = {(r.hardware, round(r.speedup, 6)): r.expert_fraction for r in rows}
    assert fractions[(H200, 2.0)] == pytest.approx(1.0)
    assert fractions[(H200, 1.0)] == pytest.approx(0.5)
    assert fractions[(B200, 8.0)] is None  # no expert result on that GPU
    expert_row = next(r for r in rows if r.is_expert)
    assert expert_row.expert_fraction == pytest.approx(1.0)


def test_the_task_page_ranking_shows_the_fraction_of_the_expert(client, version):
    evaluated(version, owner=expert(), speedups={"small": 2.0, "big": 2.0})
    evaluated(version, owner=UserFactory(username="alice"), speedups={"small": 3.0, "big": 3.0})

    html = client.get(reverse("task_catalog:detail", args=[version.task.slug])).content.decode()

    assert '<th class="num" title="Task speedup over the expert\'s on this GPU">Of expert' in html
    assert '<td class="num">3.00×</td>\n        <td class="num">150.0%</td>' in html


def test_the_ranking_api_gives_each_rows_fraction_of_the_expert(client, version):
    evaluated(version, owner=expert(), speedups={"small": 2.0, "big": 2.0})
    evaluated(version, owner=UserFactory(username="alice"), speedups={"small": 1.0, "big": 1.0})
    evaluated(version, owner=UserFactory(username="bob"), hardware=B200)

    rows = client.get(f"/api/tasks/{version.task.slug}/ranking/").json()

    assert {(r["hardware"], r["owner"]): r["expert_fraction"] for r in rows} == {
        (H200, EXPERT_USERNAME): 1.0,
        (H200, "alice"): 0.5,
        (B200, "bob"): None,
    }


# --- the submission page and its API ----------------------------------------------------


def test_the_submission_page_shows_each_workloads_fraction_of_the_expert(client, version):
    evaluated(version, owner=expert(), medians={"small": 1.0, "big": 2.0})
    evaluation = evaluated(version, medians={"small": 2.0, "big": 1.0})

    html = client.get(reverse("submissions:detail", args=[evaluation.submission.pk]))
    html = html.content.decode()

    assert '<th class="num">of expert</th>' in html
    assert '<td class="num">50.0 %</td>' in html
    assert '<td class="num">200.0 %</td>' in html
    assert '"of expert" is the catalog\'s expert time over this time' in html


def test_the_submission_page_shows_a_dash_without_an_expert_on_that_gpu(client, version):
    evaluated(version, owner=expert(), hardware=B200)
    evaluation = evaluated(version)

    html = client.get(reverse("submissions:detail", args=[evaluation.submission.pk]))
    cells = html.content.decode().split('<th class="num">of expert</th>')[1]

    assert "%" not in cells.split("</table>")[0]
    assert "where the expert has no result on NVIDIA H200" in html.content.decode()


@pytest.mark.parametrize(
    "baseline_source, label, note",
    [
        ("class Model:\n    pass\n", "baseline ms", "against the task's baseline"),
        ("", "reference ms", "against the task's reference"),
    ],
)
def test_the_submission_page_labels_the_time_it_was_timed_against(
    client, baseline_source, label, note
):
    version = TaskVersionFactory(baseline_source=baseline_source)
    WorkloadFactory(version=version, name="small")
    evaluation = evaluated(version, medians={"small": 1.0})

    html = client.get(reverse("submissions:detail", args=[evaluation.submission.pk]))
    html = html.content.decode().replace("&#x27;", "'")

    assert f'<th class="num">{label}</th>' in html
    assert f"Speedup is {note}" in html


@pytest.mark.parametrize("workloads", [2, 6])
def test_the_submission_api_gives_each_workloads_fraction_of_the_expert(
    version, workloads, django_assert_num_queries
):
    medians = {f"w{i}": 1.0 for i in range(workloads)}
    evaluated(version, owner=expert(), medians={"w0": 3.0, "w1": 1.0})
    owner = UserFactory()
    evaluation = evaluated(version, owner=owner, medians=medians)
    api = token_client(owner)
    url = f"/api/submissions/{evaluation.submission.pk}/"
    api.get(url)  # the token's first use writes when it was used

    # token+user, submission, evaluation, its results, the expert's results on its GPU,
    # the task's design properties and their assessments: constant in the workloads
    with django_assert_num_queries(7):
        results = api.get(url).json()["evaluation"]["results"]

    fractions = {r["name"]: r["expert_fraction"] for r in results}
    assert fractions == {
        "w0": 3.0,
        "w1": 1.0,
        **{f"w{i}": None for i in range(2, workloads)},
        "hidden workload 1": None,
    }

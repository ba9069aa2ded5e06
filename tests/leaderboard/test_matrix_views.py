"""The task × run matrix, the run comparison and the confirmed hacks, with their exports."""

import csv
import io

import pytest
from django.urls import reverse

from tests.factories import (
    EvaluationFactory,
    RunFactory,
    SubmissionFactory,
    UserFactory,
    WorkloadResultFactory,
    task_with_workloads,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def tasks():
    return [
        task_with_workloads(task__slug=slug, task__position=position, timed=["timed_a"], hidden=[])
        for position, slug in enumerate(("row_softmax", "layernorm_fwd"))
    ]


def kernel(run, task, *, status="correct", speedups=(2.0, 8.0), **extra):
    submission = SubmissionFactory(
        owner=run.owner, run=run, task=task, task_version=task.current_version
    )
    evaluation = EvaluationFactory(submission=submission, status=status, **extra)
    for i, s in enumerate(speedups):
        WorkloadResultFactory(evaluation=evaluation, name=f"timed_{i}", speedup=s)
    return evaluation


def test_matrix_shows_speedups_and_marks_failures_by_status(client, tasks):
    softmax, layernorm = tasks
    run = RunFactory(model="m1")
    kernel(run, softmax)  # geomean 4
    kernel(run, layernorm, status="timeout", speedups=())
    other = RunFactory(model="m2", hardware="NVIDIA B200")

    response = client.get(reverse("leaderboard:matrix"))
    html = response.content.decode()

    assert response.status_code == 200
    assert "4.00×" in html
    assert 'class="num cell status-timeout"' in html
    assert 'data-figure="matrix-figure"' in html and 'id="matrix-figure"' in html
    assert f"/runs/{other.pk}/" in html
    filtered = client.get(reverse("leaderboard:matrix"), {"hardware": "NVIDIA B200"})
    assert f"/runs/{run.pk}/" not in filtered.content.decode()


def test_matrix_exports_the_filtered_view_as_csv_and_json(client, tasks):
    run = RunFactory(model="m1")
    kernel(run, tasks[0])
    RunFactory(model="m2")

    response = client.get(reverse("leaderboard:matrix"), {"model": "m1", "format": "csv"})

    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["task"], r["run_id"], r["status"]) for r in rows] == [
        ("row_softmax", str(run.pk), "correct"),
        ("layernorm_fwd", str(run.pk), "missing"),
    ]
    assert float(rows[0]["speedup"]) == pytest.approx(4.0)
    data = client.get(reverse("leaderboard:matrix"), {"model": "m1", "format": "json"}).json()
    assert data[0]["speedup"] == pytest.approx(4.0) and data[1]["speedup"] is None


def test_matrix_rejects_a_bad_filter_with_a_400(client):
    response = client.get(reverse("leaderboard:matrix"), {"since": "not-a-date"})
    assert response.status_code == 400
    assert "Enter a valid date" in response.content.decode()


def test_matrix_query_count_does_not_grow_with_the_runs(client, tasks, django_assert_num_queries):
    for _ in range(6):
        run = RunFactory()
        for task in tasks:
            kernel(run, task)
    # session-less request: the data version, run count, run page, tasks, cells, filter
    # choices; then, until the data changes, the version only
    with django_assert_num_queries(6):
        assert client.get(reverse("leaderboard:matrix")).status_code == 200
    with django_assert_num_queries(1):
        assert client.get(reverse("leaderboard:matrix")).status_code == 200


def test_compare_puts_two_runs_side_by_side_with_the_ratio(client, tasks):
    a, b = RunFactory(), RunFactory(levels=["L1"])
    kernel(a, tasks[0], speedups=(2.0,))
    kernel(b, tasks[0], speedups=(6.0,))
    kernel(b, tasks[1], status="incorrect")

    html = client.get(reverse("leaderboard:compare"), {"a": a.pk, "b": b.pk}).content.decode()

    assert "3.00×" in html
    assert "status-incorrect" in html
    data = client.get(
        reverse("leaderboard:compare"), {"a": a.pk, "b": b.pk, "format": "json"}
    ).json()
    assert data[0]["ratio"] == pytest.approx(3.0)
    assert data[1] == {
        "task": "layernorm_fwd",
        "a_status": "missing",
        "a_speedup": None,
        "b_status": "incorrect",
        "b_speedup": None,
        "ratio": None,
    }


@pytest.mark.parametrize("query", [{}, {"a": "1"}])
def test_compare_without_two_runs_is_a_400(client, query):
    assert client.get(reverse("leaderboard:compare"), query).status_code == 400


def test_compare_never_shows_a_private_run(client, tasks):
    a, b = RunFactory(), RunFactory(is_public=False)
    response = client.get(reverse("leaderboard:compare"), {"a": a.pk, "b": b.pk})
    assert response.status_code == 404


def test_confirmed_hacks_are_listed_with_their_evidence(client, tasks):
    submission = SubmissionFactory(
        owner=UserFactory(username="mallory"), task=tasks[0], task_version=tasks[0].current_version
    )
    EvaluationFactory(
        submission=submission,
        status="flagged",
        review="hacked",
        flags=[{"check": "output_cache", "detail": "returned the same tensor twice"}],
        review_note="caches outputs across calls",
    )
    EvaluationFactory(status="flagged", review="cleared")

    html = client.get(reverse("leaderboard:hacks")).content.decode()
    assert "mallory" in html
    assert "output_cache: returned the same tensor twice" in html
    assert "caches outputs across calls" in html
    rows = client.get(reverse("leaderboard:hacks"), {"format": "json"}).json()
    assert [r["owner"] for r in rows] == ["mallory"]

"""Repeated runs on the boards: entries, intervals, tied ranks, paired uplift intervals,
the paper table; and the page, the API and the CSV of each table agreeing."""

import csv
import io
import json

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from runs.models import Run
from scoring.models import RunScore
from tests.factories import RunFactory, UserFactory

pytestmark = pytest.mark.django_db

TASKS = [f"t{i}" for i in range(8)]


def attempt(*, owner, model, speedups, levels=(), is_example=False):
    """A run scored over TASKS: a task correct with its speedup, or failed for None."""
    run = RunFactory(owner=owner, model=model, levels=list(levels), is_example=is_example)
    parts = [
        {
            "task": t,
            "counts": s is not None,
            "speedup": s,
            "implementation": {
                "L1": [1.0 if s else 0.0, 1.0],
                "combined": [1.0 if s else 0.0, 1.0],
            },
            "discovery": {},
            "turns": 10,
        }
        for t, s in zip(TASKS, speedups, strict=True)
    ]
    correct = [s for s in speedups if s is not None]
    RunScore.objects.create(
        run=run,
        hardware="NVIDIA H200",
        timed=True,
        tasks_total=len(TASKS),
        tasks_correct=len(correct),
        correctness_rate=len(correct) / len(TASKS),
        performance_score=sum(correct) / len(TASKS),
        geomean_speedup=None,
        geomean_n=0,
        implementation={
            "L1": 100 * len(correct) / len(TASKS),
            "combined": 100 * len(correct) / len(TASKS),
        },
        discovery={},
        turns=10 * len(TASKS),
        tasks=parts,
    )
    return run


THREE_WITHOUT = (
    [1.0, None, 2.0, None, 1.0, None, 1.5, None],
    [1.0, 1.0, None, None, 1.0, None, 1.5, None],
    [None, None, 2.0, None, 1.0, 1.0, 1.5, None],
)
THREE_WITH = (
    [2.0, 2.0, 2.0, None, 2.0, 1.0, 1.5, None],
    [2.0, 2.0, 2.0, 2.0, 2.0, None, 1.5, None],
    [2.0, 1.0, 2.0, None, 2.0, 1.0, 1.5, 2.0],
)


def campaign(model="m1"):
    owner = UserFactory()
    without = [attempt(owner=owner, model=model, speedups=s) for s in THREE_WITHOUT]
    guided = [attempt(owner=owner, model=model, speedups=s, levels=["L1"]) for s in THREE_WITH]
    return without, guided


def test_three_attempts_make_one_entry_with_a_mean_and_an_interval(client):
    without, _ = campaign()
    rows = client.get("/api/leaderboard/", {"condition": "none"}).json()
    [row] = rows
    assert row["attempts"] == 3 and row["run_ids"] == [r.pk for r in without]
    rates = [r.score.correctness_rate for r in without]
    assert row["correctness_rate"] == pytest.approx(sum(rates) / 3)
    low, high = row["correctness_rate_ci"]
    assert low <= row["correctness_rate"] <= high
    assert row["performance_score_ci"] and row["turns_ci"] == [80.0, 80.0]
    # Seeded: the same runs give the same interval on every request.
    assert client.get("/api/leaderboard/", {"condition": "none"}).json() == rows


def test_the_paired_uplift_has_its_paired_interval(client):
    campaign()
    [record] = client.get("/api/leaderboard/paired/").json()
    assert (record["attempts_without"], record["attempts_with"]) == (3, 3)
    low, high = record["uplift_performance_score_ci"]
    assert low <= record["performance_score_uplift"] <= high
    assert record["uplift_correctness_rate_ci"] is not None
    html = client.get(reverse("leaderboard:paired")).content.decode()
    assert "pt" in html and "[+" in html  # a rate's uplift in points, with its interval


def test_overlapping_intervals_are_tied_ranks_and_one_run_has_no_interval(client):
    campaign("m1")
    campaign("m2")  # the same figures: the two entries' intervals overlap
    alone = attempt(owner=UserFactory(), model="solo", speedups=[None] * 8)
    rows = client.get("/api/leaderboard/", {"condition": "none"}).json()
    by_model = {r["model"]: r for r in rows}
    assert by_model["m1"]["rank"] == by_model["m2"]["rank"] == 1
    assert by_model["m1"]["tied"] and by_model["m2"]["tied"]
    solo = by_model["solo"]
    assert solo["run_ids"] == [alone.pk] and solo["attempts"] == 1
    assert solo["performance_score"] == 0.0 and solo["performance_score_ci"] is None
    assert solo["rank"] == 3 and not solo["tied"]
    html = client.get(reverse("leaderboard:leaderboard"), {"condition": "none"}).content.decode()
    assert "1 attempt, no interval" in html and '<td class="rank">=1</td>' in html


def test_the_paper_table_as_page_api_csv_and_latex(client):
    campaign()
    [record] = client.get("/api/leaderboard/paper/").json()
    assert record["model"] == "m1" and record["with_condition"] == "L1"
    assert record["uplift_implementation_L1_ci"] is not None
    csv_rows = list(
        csv.DictReader(
            io.StringIO(client.get("/api/leaderboard/paper/", {"format": "csv"}).content.decode())
        )
    )
    assert csv_rows[0]["performance_score_uplift"] == str(record["performance_score_uplift"])
    latex = client.get("/api/leaderboard/paper/", {"format": "latex"}).content.decode()
    assert "\\begin{tabular}" in latex and "m1 / agent-y" in latex and "$\\to$" in latex
    page = client.get(reverse("leaderboard:paper"), {"format": "latex"})
    assert page.content.decode() == latex
    html = client.get(reverse("leaderboard:paper")).content.decode()
    assert 'id="paper-latex"' in html and "m1 · agent-y" in html
    assert client.get(reverse("leaderboard:paper"), {"format": "pdf"}).status_code == 400


def _csv(text):
    return list(csv.DictReader(io.StringIO(text)))


def _as_csv(value):
    if value is None:
        return ""
    return str(value)


figures = st.lists(
    st.lists(
        st.one_of(st.none(), st.floats(0.1, 9.0).map(lambda x: round(x, 2))), min_size=8, max_size=8
    ),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=8,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: each example is slow
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(without=figures, guided=figures)
def test_page_api_and_csv_of_each_table_agree(client, without, guided):
    Run.objects.all().delete()
    owner = UserFactory()
    for s in without:
        attempt(owner=owner, model="p", speedups=s)
    for s in guided:
        attempt(owner=owner, model="p", speedups=s, levels=["L1", "L2"])
    for api, page in (
        ("/api/leaderboard/", reverse("leaderboard:leaderboard")),
        ("/api/leaderboard/paired/", reverse("leaderboard:paired")),
        ("/api/leaderboard/paper/", reverse("leaderboard:paper")),
    ):
        records = client.get(api).json()
        assert json.loads(client.get(page, {"format": "json"}).content) == records
        rows = _csv(client.get(api, {"format": "csv"}).content.decode())
        assert rows == [{k: _as_csv(v) for k, v in r.items()} for r in records]
        assert _csv(client.get(page, {"format": "csv"}).content.decode()) == rows
        html = client.get(page).content.decode()
        for record in records:
            ids = record.get("run_ids") or record["without_run_ids"]
            assert f"/runs/{ids[0]}/" in html or f'id="paper-{ids[0]}-' in html
            score = record.get("performance_score", record.get("performance_score_without"))
            assert (f"{score:.2f}" if score is not None else "—") in html


def test_a_chart_with_no_data_says_why_and_draws_nothing(client):
    run = attempt(owner=UserFactory(), model="m", speedups=[None] * 8)
    html = client.get(reverse("leaderboard:charts"), {"runs": str(run.pk)}).content.decode()
    assert 'id="chart-discovery-empty"' in html
    assert "No chart: nobody has assessed these runs&#x27; proposals yet." in html
    assert 'data-figure="discovery"' not in html

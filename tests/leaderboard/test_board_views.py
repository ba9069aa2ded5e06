"""The run leaderboard, its paired view, the API and the exports, on materialised scores."""

import csv
import io
import re

import pytest
from django.urls import reverse

from scoring.models import RunScore
from tests.factories import RunFactory

pytestmark = pytest.mark.django_db


def scored(*, hardware="NVIDIA H200", ps=1.5, correct=0.9, impl=None, disc=None, turns=300, **run):
    run = RunFactory(hardware=hardware, **run)
    implementation = impl or {"L1": 60.0, "L2": 50.0, "L3": 40.0, "combined": 50.0}
    RunScore.objects.create(
        run=run,
        hardware=hardware,
        timed=bool(hardware),
        tasks_total=26,
        tasks_correct=round(26 * correct),
        correctness_rate=correct,
        performance_score=ps,
        geomean_speedup=ps + 0.2,
        geomean_n=20,
        fast_p=[[0.0, correct], [1.0, 0.5]],
        implementation=implementation,
        discovery=disc or {"combined": 30.0},
        turns=turns,
    )
    return run


def pair(*, model="m1", hardware="NVIDIA H200", without=1.46, with_=1.95, **extra):
    a = scored(model=model, hardware=hardware, ps=without, **extra)
    b = scored(model=model, hardware=hardware, ps=with_, levels=["L1", "L2", "L3"], **extra)
    a.pair, b.pair = b, a
    a.save()
    b.save()
    return a, b


def test_leaderboard_compares_one_gpu_kind_and_one_catalog_version(client):
    older = scored(model="d", ps=5.0, catalog_version="old000000000")
    best = scored(model="a", ps=2.0)
    worse = scored(model="b", ps=1.0)
    other = scored(model="c", hardware="NVIDIA B200", ps=9.0)

    html = client.get(reverse("leaderboard:leaderboard")).content.decode()

    # The GPU most runs of the newest catalog version used; never another GPU or version.
    assert f'id="entry-{other.pk}"' not in html and f'id="entry-{older.pk}"' not in html
    assert html.index(f'id="entry-{best.pk}"') < html.index(f'id="entry-{worse.pk}"')
    assert 'title="Correct tasks / tasks of the catalog version' in html
    assert "Higher is better." in html and 'data-figure="leaderboard-figure"' in html
    html = client.get(reverse("leaderboard:leaderboard"), {"hardware": "NVIDIA B200"})
    assert f'id="entry-{other.pk}"' in html.content.decode()
    rows = client.get("/api/leaderboard/", {"catalog_version": "old000000000"}).json()
    assert [r["run_ids"] for r in rows] == [[older.pk]]


def test_leaderboard_filters_and_sorts_through_the_url(client):
    a = scored(model="m1", ps=2.0)
    b = scored(model="m2", ps=1.0, levels=["L1"])

    html = client.get(reverse("leaderboard:leaderboard"), {"model": "m2"}).content.decode()
    assert f'id="entry-{b.pk}"' in html and f'id="entry-{a.pk}"' not in html
    html = client.get(reverse("leaderboard:leaderboard"), {"sort": "performance_score"}).content
    assert html.index(f'id="entry-{b.pk}"'.encode()) < html.index(f'id="entry-{a.pk}"'.encode())
    bad = client.get(reverse("leaderboard:leaderboard"), {"sort": "nope"})
    assert bad.status_code == 400 and "Unknown sort column" in bad.content.decode()


def test_the_api_and_the_export_answer_the_filtered_view(client):
    a = scored(model="m1", ps=2.0, is_example=True)
    scored(model="m2")

    data = client.get("/api/leaderboard/", {"model": "m1"}).json()
    assert [(r["run_ids"], r["performance_score"], r["is_example"]) for r in data] == [
        ([a.pk], 2.0, True)
    ]
    assert data[0]["attempts"] == 1 and data[0]["performance_score_ci"] is None
    response = client.get("/api/leaderboard/", {"model": "m1", "format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    [row] = csv.DictReader(io.StringIO(response.content.decode()))
    assert row["run_ids"] == f"[{a.pk}]" and row["implementation_L1"] == "60.0"
    assert row["attempts"] == "1" and row["performance_score_ci"] == ""
    page = client.get(reverse("leaderboard:leaderboard"), {"model": "m1", "format": "csv"})
    assert page.content == response.content
    assert client.get("/api/leaderboard/", {"since": "x"}).json()["detail"].startswith("since")


def test_paired_view_shows_the_uplift_per_metric(client):
    without, guided = pair(without=1.46, with_=1.95)

    html = client.get(reverse("leaderboard:paired")).content.decode()
    assert f'id="pair-{without.pk}-L1+L2+L3"' in html and "+0.49" in html
    [record] = client.get("/api/leaderboard/paired/").json()
    assert record["without_run_ids"] == [without.pk] and record["with_run_ids"] == [guided.pk]
    assert record["uplift_performance_score_ci"] is None
    assert record["performance_score_uplift"] == pytest.approx(0.49)


def test_discovery_is_given_per_level_in_the_leaderboard_and_its_exports(client):
    run = scored(disc={"L1": 40.0, "L2": 20.0, "L3": None, "combined": 30.0})

    html = client.get(reverse("leaderboard:leaderboard")).content.decode()
    [row] = client.get("/api/leaderboard/").json()
    [csv_row] = csv.DictReader(
        io.StringIO(client.get("/api/leaderboard/", {"format": "csv"}).content.decode())
    )

    assert (row["discovery_L1"], row["discovery_L2"], row["discovery_L3"]) == (40.0, 20.0, None)
    assert (csv_row["discovery_L1"], csv_row["discovery_L3"]) == ("40.0", "")
    assert ">Disc. L2</a>" in html
    # one cell per header in every row: the per-level cells line up with their columns
    table = html[html.index('<table class="leaderboard') : html.index("</table>")]
    headers = len(re.findall(r"<th[ >]", table[: table.index("</thead>")]))
    run_row = table[table.index(f'id="entry-{run.pk}"') :]
    run_row = run_row[: run_row.index("</tr>")]
    assert run_row.count("<td") == headers


def test_paired_view_shows_discovery_per_level_and_turns_with_their_uplift(client):
    _, guided = pair(disc={"L1": 10.0, "L2": 0.0, "L3": None, "combined": 5.0}, turns=320)
    guided.score.discovery = {"L1": 30.0, "L2": 20.0, "L3": None, "combined": 25.0}
    guided.score.turns = 280
    guided.score.save()

    html = client.get(reverse("leaderboard:paired")).content.decode()
    [record] = client.get("/api/leaderboard/paired/").json()

    assert record["discovery_L1_uplift"] == pytest.approx(20.0)
    assert record["discovery_L3_uplift"] is None
    assert record["turns_uplift"] == -40
    assert "10.0 %" in html and "30.0 %" in html
    assert '<td class="num uplift">+20.0 pt</td>' in html
    assert '<td class="num uplift">-40</td>' in html


def test_home_shows_every_published_pair_and_one_chart(client):
    pair(model="m1")
    hidden, _ = pair(model="secret-model")
    hidden.is_public = False
    hidden.save()

    html = client.get(reverse("leaderboard:home")).content.decode()
    assert "m1 · agent-y" in html and "secret-model" not in html
    assert 'data-figure="headline-figure"' in html


@pytest.mark.parametrize("runs", [5, 15])
def test_pages_query_count_is_constant_in_the_number_of_runs(
    client, runs, django_assert_num_queries
):
    for i in range(runs):
        pair(model=f"m{i}")
    pages = [reverse(f"leaderboard:{name}") for name in ("leaderboard", "paired", "home")]
    # The data version, then (built once per version) the board's catalog version and GPU,
    # the filter choices, the scores, the current catalog (the experts' reference rows
    # join only the current catalog's board; these runs are of another), the baselines
    # a new task version lacks, and the entries' provenance (their kernels' evaluations,
    # their owners' uploads).
    with django_assert_num_queries(8):
        assert client.get(pages[0]).status_code == 200
    # version, the board's scope, filter choices, the pairs, their provenance (kernels,
    # owners' uploads)
    with django_assert_num_queries(6):
        assert client.get(pages[1]).status_code == 200
    # version, the board's scope, the pairs, the current catalog (the experts' reference
    # joins only its board: not here), catalog size, latest evaluations
    with django_assert_num_queries(6):
        assert client.get(pages[2]).status_code == 200
    for page in pages:  # built: the version only
        with django_assert_num_queries(1):
            assert client.get(page).status_code == 200


def test_the_filters_show_the_catalog_version_and_gpu_the_board_compares(client):
    scored(model="a", catalog_version="cafe00000000")
    html = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert '<option value="cafe00000000" selected>' in html
    assert '<option value="NVIDIA H200" selected>' in html

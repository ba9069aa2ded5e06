"""The run pages: upload form, run page with its twin, the trace viewer, the schemas."""

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from runs.models import Run
from runs.services import run_create_from_bundle
from runs.traces import PAGE_LINES
from scoring.models import RunScore
from tests.factories import UserFactory
from tests.runs.bundles import good_files, long_trace, make_zip

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(run_tasks, fake_cli, django_capture_on_commit_callbacks):
    """A public pair: a run without guidance and its twin with guidance."""
    owner = UserFactory(username="ada")

    def create(files, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            kwargs.setdefault("is_public", True)
            return run_create_from_bundle(owner=owner, data=make_zip(files), **kwargs)

    plain = create(good_files("row_softmax"))
    guided = create(good_files("row_softmax", "layernorm_fwd", levels=["L1"]))
    return plain, guided


def test_the_run_page_shows_manifest_state_tasks_twin_and_safe_proposals(client, stored):
    plain, guided = stored
    html = client.get(f"/runs/{guided.pk}/").content.decode()
    assert f"Run #{guided.pk} · model-x · agent-y" in html
    assert "<code>L1</code>" in html and "complete" in html
    assert f'href="/runs/{plain.pk}/">run #{plain.pk}</a>' in html
    assert 'id="task-row_softmax"' in html and 'id="task-layernorm_fwd"' in html
    assert f"/runs/{guided.pk}/traces/row_softmax/" in html
    assert "<strong>everything</strong>" in html
    assert "Example data written by hand" not in html
    submission = guided.submissions.get(task__slug="row_softmax")
    back = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert f'<a href="/runs/{guided.pk}/">run #{guided.pk}</a>' in back


def test_proposals_are_rendered_without_scripts(client, run_tasks, fake_cli):
    files = good_files("row_softmax")
    files["proposals/row_softmax.md"] = (
        "# Plan\n\n<script>alert(1)</script> **bold** <img src=x onerror=alert(2)>"
    )
    run = run_create_from_bundle(owner=UserFactory(), data=make_zip(files), is_public=True)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "<strong>bold</strong>" in html
    assert "<script>alert(1)" not in html and "onerror" not in html


def test_a_proposal_loads_no_remote_image_on_the_page_or_in_the_api(client, run_tasks, fake_cli):
    files = good_files("row_softmax")
    files["proposals/row_softmax.md"] = "![tracker](https://evil.example/pixel.png)\n"
    run = run_create_from_bundle(owner=UserFactory(), data=make_zip(files), is_public=True)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'alt="tracker"' in html and "evil.example" not in html
    assert "evil.example" not in client.get(f"/api/runs/{run.pk}/").content.decode()


def test_an_example_run_carries_the_label_on_its_pages(client, run_tasks, fake_cli):
    run = run_create_from_bundle(
        owner=UserFactory(), data=make_zip(good_files()), is_public=True, is_example=True
    )
    for url in (f"/runs/{run.pk}/", f"/runs/{run.pk}/traces/row_softmax/"):
        html = client.get(url).content.decode()
        assert "Example data written by hand, not an agent&#x27;s output." in html
    assert client.get(f"/api/runs/{run.pk}/").json()["example_label"] == (
        "Example data written by hand, not an agent's output."
    )


def test_a_private_run_and_its_traces_are_404_to_others(client, run_tasks, fake_cli):
    owner = UserFactory()
    run = run_create_from_bundle(owner=owner, data=make_zip(good_files()), is_public=False)
    assert client.get(f"/runs/{run.pk}/").status_code == 404
    assert client.get(f"/runs/{run.pk}/traces/row_softmax/").status_code == 404
    assert client.get(f"/runs/{run.pk}/traces/row_softmax/raw/").status_code == 404
    client.force_login(owner)
    assert client.get(f"/runs/{run.pk}/").status_code == 200
    assert f"#{run.pk}" in client.get("/runs/").content.decode()
    client.force_login(UserFactory(is_staff=True))
    assert client.get(f"/runs/{run.pk}/traces/row_softmax/").status_code == 200


def test_the_upload_form_stores_a_run_and_redirects_to_it(client, run_tasks, fake_cli):
    client.force_login(UserFactory())
    bundle = SimpleUploadedFile("run.zip", make_zip(good_files()))
    response = client.post("/runs/new/", {"bundle": bundle, "is_public": "on"})
    run = Run.objects.get()
    assert response.status_code == 302 and response.url == f"/runs/{run.pk}/"


def test_the_upload_form_lists_every_problem_and_stores_nothing(client, run_tasks):
    client.force_login(UserFactory())
    files = good_files()
    files["kernels/nope.py"] = "x = 1\n"
    files["manifest.json"] = "{"
    bundle = SimpleUploadedFile("run.zip", make_zip(files))
    response = client.post("/runs/new/", {"bundle": bundle})
    html = response.content.decode()
    assert response.status_code == 400
    assert "nothing was stored" in html
    assert "<code>kernels/nope.py</code>: Unknown task &#x27;nope&#x27;." in html
    assert "<code>manifest.json</code>, line 1: Invalid JSON" in html
    assert Run.objects.count() == 0


def test_the_upload_form_needs_a_sign_in(client):
    assert client.get("/runs/new/").status_code == 302


def test_the_trace_viewer_pages_filters_diffs_and_jumps_to_the_final_kernel(
    client, run_tasks, fake_cli
):
    files = good_files()
    files["kernels/row_softmax.py"] = "class ModelNew:\n    BLOCK = 500\n"
    files["traces/row_softmax.jsonl"] = long_trace("row_softmax")
    run = run_create_from_bundle(owner=UserFactory(), data=make_zip(files), is_public=True)
    trace = run.traces.get()
    assert trace.event_count == 1 + 699 + 2 + 2 + 1
    assert trace.final_submit_turn == 500
    url = f"/runs/{run.pk}/traces/row_softmax/"
    first = client.get(url).content.decode()
    assert first.count('class="ev ev-') == PAGE_LINES
    assert "page 1 of 4" in first
    assert (
        f'href="?page={trace.final_submit_line // PAGE_LINES}#line-{trace.final_submit_line}"'
        in first
    )
    final_page = client.get(url, {"page": trace.final_submit_line // PAGE_LINES}).content.decode()
    assert f'id="line-{trace.final_submit_line}"' in final_page
    assert "the final kernel" in final_page
    assert "-    BLOCK = 250" in final_page.replace("</span>", "").replace('<span class="gd">', "")
    submits = client.get(url, {"type": "submit"}).content.decode()
    assert submits.count('class="ev ev-submit') == 2 and "page 1 of 1" in submits
    last = client.get(url, {"page": 3}).content.decode()
    assert "mystery" in last and "ev-malformed" in last
    assert "Not JSON" in last
    assert trace.problems == [
        {
            "line": 705,
            "message": "Not JSON: Expecting property name enclosed in double quotes (column 2).",
        }
    ]
    run_page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Trace problems" in run_page
    assert 'traces/row_softmax/?page=3#line-705">line 705</a>: Not JSON: Expecting' in run_page


def test_the_raw_trace_downloads_as_the_original_lines_gzipped(client, run_tasks, fake_cli):
    import gzip

    files = good_files()
    run = run_create_from_bundle(owner=UserFactory(), data=make_zip(files), is_public=True)
    response = client.get(f"/runs/{run.pk}/traces/row_softmax/raw/")
    assert response["Content-Type"] == "application/gzip"
    assert (
        gzip.decompress(b"".join(response.streaming_content)).decode()
        == files["traces/row_softmax.jsonl"]
    )


def test_the_owner_pairs_and_unpairs_by_hand(client, stored):
    plain, guided = stored
    client.force_login(plain.owner)
    client.post(f"/runs/{plain.pk}/pair/", {"other": ""})
    plain.refresh_from_db(), guided.refresh_from_db()
    assert plain.pair_id is None and guided.pair_id is None
    client.post(f"/runs/{plain.pk}/pair/", {"other": guided.pk})
    plain.refresh_from_db(), guided.refresh_from_db()
    assert plain.pair_id == guided.pk and guided.pair_id == plain.pk


def test_someone_else_cannot_pair_a_run(client, stored):
    plain, guided = stored
    client.force_login(UserFactory())
    client.post(f"/runs/{plain.pk}/pair/", {"other": ""})
    plain.refresh_from_db()
    assert plain.pair_id == guided.pk


@pytest.mark.parametrize("name", ["manifest-v1", "trace-v1"])
def test_the_schemas_are_published_at_a_stable_url(client, name):
    response = client.get(f"/schemas/runs/{name}.json")
    assert response.status_code == 200
    assert json.loads(response.content)["$id"] == f"/schemas/runs/{name}.json"
    assert client.get("/schemas/runs/other.json").status_code == 404


def test_the_run_page_and_its_json_take_a_fixed_number_of_queries(
    client, stored, django_assert_num_queries
):
    # The count does not grow with the tasks: one query per kind of row, per side (the
    # latest evaluations' status and mode, without their workload results; the run's state
    # comes from the same rows), one for both runs' stored task scores, one for
    # the tasks of the run's (pinned) catalog version, and one for both runs' scores; the
    # per-level charts draw those scores and read nothing more; one query for the cell
    # verdicts.
    level_scores_set(*stored)
    for run in stored:  # one task, then two
        with django_assert_num_queries(13):
            client.get(f"/api/runs/{run.pk}/")
        # The public's page is built once per data version: the API's, the moderation log,
        # the data version and the run again (read under the version it is cached by) ...
        with django_assert_num_queries(16):
            html = client.get(f"/runs/{run.pk}/").content.decode()
        assert 'data-figure="run-implementation"' in html
        # ... then served: the run (whether the viewer may see it) and the data version.
        with django_assert_num_queries(2):
            assert client.get(f"/runs/{run.pk}/").content.decode() == html


LEVELS_PLAIN = {"L1": 40.0, "L2": 20.0, "L3": None, "combined": 30.0}
LEVELS_GUIDED = {"L1": 90.0, "L2": 60.0, "L3": None, "combined": 75.0}


def level_scores_set(plain, guided, discovery=None):
    """Give a pair implementation scores per level (L3 not scored), as the detectors would."""
    RunScore.objects.filter(run=plain).update(implementation=LEVELS_PLAIN)
    RunScore.objects.filter(run=guided).update(
        implementation=LEVELS_GUIDED, **({"discovery": discovery} if discovery else {})
    )


def figure_of(html, name):
    found = re.search(rf'<script id="{name}" type="application/json">(.*?)</script>', html)
    return json.loads(found.group(1)) if found else None


def test_the_run_page_charts_its_levels_beside_its_twin_with_the_local_plotly(client, stored):
    plain, guided = stored
    level_scores_set(plain, guided)

    html = client.get(f"/runs/{guided.pk}/").content.decode()

    assert 'id="level-charts"' in html
    assert 'id="chart-run-implementation" data-figure="run-implementation">' in html
    figure = figure_of(html, "run-implementation")
    assert [t["name"] for t in figure["data"]] == [
        f"#{plain.pk} twin (none)",
        f"#{guided.pk} this run (L1)",
    ]
    assert [t["y"] for t in figure["data"]] == [[40.0, 20.0, None, 30.0], [90.0, 60.0, None, 75.0]]
    assert figure["layout"]["xaxis"]["ticktext"][0] == "L1<br>uplift +50.0"
    assert [a["text"] for a in figure["layout"]["annotations"]] == ["not<br>scored"] * 2
    assert figure_of(html, "run-discovery") is None  # nobody assessed the proposals
    assert '<script src="/static/vendor/plotly/plotly.min.js">' in html
    assert "js/charts.js" in html and "cdn" not in html.lower()
    assert f'href="/leaderboard/charts/?runs={plain.pk},{guided.pk}"' in html
    # The table still has every figure, for a page read without JavaScript.
    assert 'id="score-implementation-L1"><th>implementation L1</th><td class="num">90.0' in html


def test_the_run_page_charts_discovery_where_the_run_has_it(client, stored):
    plain, guided = stored
    discovery = {"L1": 100.0, "L2": None, "L3": None, "combined": 100.0}
    level_scores_set(plain, guided, discovery=discovery)

    html = client.get(f"/runs/{plain.pk}/").content.decode()

    figure = figure_of(html, "run-discovery")
    assert [t["y"] for t in figure["data"]] == [
        [None, None, None, None],
        [100.0, None, None, 100.0],
    ]
    assert 'data-figure="run-discovery"' in html


def test_a_private_run_charts_its_levels_without_a_breakdowns_link(client, stored):
    plain, guided = stored
    level_scores_set(plain, guided)
    Run.objects.filter(pk=guided.pk).update(is_public=False)
    client.force_login(guided.owner)

    html = client.get(f"/runs/{guided.pk}/").content.decode()

    assert 'data-figure="run-implementation"' in html
    assert "/leaderboard/charts/" not in html  # that page shows public runs only


@pytest.mark.parametrize("computed", [True, False], ids=["no level scored", "not computed"])
def test_a_run_without_level_scores_shows_no_chart_and_loads_no_plotly(client, stored, computed):
    _, guided = stored
    if not computed:
        RunScore.objects.filter(run=guided).delete()

    html = client.get(f"/runs/{guided.pk}/").content.decode()

    assert "data-figure" not in html and 'id="level-charts"' not in html
    assert "plotly" not in html
    assert 'id="score-implementation-L1"' in html if computed else "Not computed yet" in html


def test_an_example_run_is_labelled_example_data_in_its_chart(client, run_tasks, fake_cli):
    run = run_create_from_bundle(
        owner=UserFactory(), data=make_zip(good_files()), is_public=True, is_example=True
    )
    RunScore.objects.update_or_create(run=run, defaults={"implementation": LEVELS_PLAIN})

    html = client.get(f"/runs/{run.pk}/").content.decode()

    figure = figure_of(html, "run-implementation")
    assert figure["data"][0]["name"] == f"#{run.pk} this run · example data (none)"
    assert figure["layout"]["title"]["text"].endswith("· example data")
    assert "Example data written by hand" in html  # the page's banner


def test_the_run_format_is_served_as_a_page(client):
    response = client.get("/docs/run-format/")
    assert response.status_code == 200
    assert "Run bundles and agent traces" in response.content.decode()

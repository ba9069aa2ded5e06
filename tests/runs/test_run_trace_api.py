"""GET /api/runs/<id>/traces/<task>/ and its raw/: a run's trace through the API, paged as
the trace page pages it, behind the same access rule, by token or session."""

import gzip
import re

import pytest
from rest_framework.test import APIClient

from runs.selectors import trace_page
from runs.services import run_create_from_bundle
from runs.traces import PAGE_LINES
from tests.factories import UserFactory, token_client
from tests.runs.bundles import good_files, long_trace, make_zip

pytestmark = pytest.mark.django_db

EVENTS = "/api/runs/{pk}/traces/row_softmax/"
RAW = "/api/runs/{pk}/traces/row_softmax/raw/"


@pytest.fixture
def owner(db):
    return UserFactory(username="lab")


@pytest.fixture
def make_run(owner, run_tasks, fake_cli):
    def make(*, is_public: bool, files: dict | None = None):
        files = files or good_files()
        run = run_create_from_bundle(owner=owner, data=make_zip(files), is_public=is_public)
        return run, files

    return make


@pytest.fixture
def long_run(make_run):
    """A public run whose row_softmax trace is four pages long."""
    files = good_files()
    files["kernels/row_softmax.py"] = "class ModelNew:\n    BLOCK = 500\n"
    files["traces/row_softmax.jsonl"] = long_trace("row_softmax")
    run, _ = make_run(is_public=True, files=files)
    return run


def _raw_text(response) -> str:
    return gzip.decompress(b"".join(response.streaming_content)).decode()


def test_the_owner_reads_a_private_runs_trace_and_raw_file_by_token(make_run, owner):
    run, files = make_run(is_public=False)
    client = token_client(owner)
    response = client.get(EVENTS.format(pk=run.pk))
    assert response.status_code == 200, response.json()
    body = response.json()
    assert [(e["line"], e["type"]) for e in body["events"]] == [
        (1, "start"),
        (2, "message"),
        (3, "submit"),
        (4, "end"),
    ]
    assert body["run"]["id"] == run.pk and body["task"] == "row_softmax"
    assert body["trace"]["tokens_in"] == 10 and body["trace"]["final_submit_line"] == 3
    assert body["page"] == 0 and body["pages"] == 1 and body["count"] == 4
    raw = client.get(RAW.format(pk=run.pk))
    assert raw.status_code == 200
    assert raw["Content-Type"] == "application/gzip"
    assert f'filename="run{run.pk}-row_softmax.jsonl.gz"' in raw["Content-Disposition"]
    assert _raw_text(raw) == files["traces/row_softmax.jsonl"]
    # A client that asks for gzip gets it (not a 406 from content negotiation).
    asked = client.get(RAW.format(pk=run.pk), HTTP_ACCEPT="application/gzip")
    assert asked.status_code == 200 and _raw_text(asked) == files["traces/row_softmax.jsonl"]


def test_the_owner_reads_them_through_a_browser_session_too(make_run, owner):
    run, files = make_run(is_public=False)
    client = APIClient()
    client.force_login(owner)
    assert client.get(EVENTS.format(pk=run.pk)).json()["count"] == 4
    assert _raw_text(client.get(RAW.format(pk=run.pk))) == files["traces/row_softmax.jsonl"]


def test_staff_read_a_private_runs_trace(make_run):
    run, _ = make_run(is_public=False)
    staff = token_client(UserFactory(is_staff=True))
    assert staff.get(EVENTS.format(pk=run.pk)).status_code == 200
    assert staff.get(RAW.format(pk=run.pk)).status_code == 200


@pytest.mark.parametrize("url", [EVENTS, RAW])
@pytest.mark.parametrize("viewer", ["anonymous", "other user's token", "other user's session"])
def test_a_private_runs_trace_is_404_to_others(make_run, url, viewer):
    run, _ = make_run(is_public=False)
    client = APIClient()
    if viewer == "other user's token":
        client = token_client(UserFactory())
    elif viewer == "other user's session":
        client.force_login(UserFactory())
    accept = "application/gzip" if url == RAW else "application/json"
    response = client.get(url.format(pk=run.pk), HTTP_ACCEPT=accept)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "No such run."}
    # The same 404, byte for byte, as for a run that does not exist.
    assert response.content == client.get(url.format(pk=run.pk + 1000)).content


@pytest.mark.parametrize("url", [EVENTS, RAW])
def test_a_task_without_a_trace_is_404(make_run, url):
    run, _ = make_run(is_public=True)
    response = APIClient().get(url.format(pk=run.pk).replace("row_softmax", "layernorm_fwd"))
    assert response.status_code == 404
    assert response.json() == {"detail": "No trace for this task in this run."}


def test_a_public_runs_trace_is_read_anonymously(make_run):
    run, files = make_run(is_public=True)
    client = APIClient()
    assert client.get(EVENTS.format(pk=run.pk)).json()["count"] == 4
    assert _raw_text(client.get(RAW.format(pk=run.pk))) == files["traces/row_softmax.jsonl"]


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"page": 1},
        {"page": 3},
        {"type": "message"},
        {"type": "message", "page": 3},
        {"type": "submit"},
        {"type": "malformed"},
        {"type": "mystery"},
    ],
)
def test_pages_and_the_type_filter_are_the_trace_pages_own(client, long_run, params):
    trace = long_run.traces.get()
    body = APIClient().get(EVENTS.format(pk=long_run.pk), params).json()
    view = trace_page(trace=trace, page=params.get("page", 0), event_type=params.get("type"))
    lines = [e["line"] for e in body["events"]]
    assert [(e["line"], e["type"]) for e in body["events"]] == [
        (e.line, e.type) for e in view.events
    ]
    assert (body["page"], body["pages"], body["type"]) == (
        view.page,
        view.page_count,
        params.get("type"),
    )
    # The page at `page_url` (the same page and filter on the site) shows the same lines.
    page_url = body["page_url"].removeprefix("http://testserver")
    assert page_url.startswith(f"/runs/{long_run.pk}/traces/row_softmax/?page={view.page}")
    html = client.get(page_url).content.decode()
    assert [int(n) for n in re.findall(r'<li class="ev [^"]*" id="line-(\d+)"', html)] == lines
    assert f"page {body['page'] + 1} of {body['pages']}" in html


def test_following_next_gives_every_event_once_and_previous_leads_back(long_run):
    trace = long_run.traces.get()
    client = APIClient()
    url, seen, pages = EVENTS.format(pk=long_run.pk), [], []
    while url:
        body = client.get(url).json()
        seen += [e["line"] for e in body["events"]]
        pages.append(body["page"])
        previous, url = body["previous"], body["next"]
    assert pages == [0, 1, 2, 3] and body["pages"] == 4
    assert seen == list(range(1, 706)) and body["count"] == trace.event_count == 705
    assert previous == f"http://testserver{EVENTS.format(pk=long_run.pk)}?page=2"
    first = client.get(EVENTS.format(pk=long_run.pk), {"type": "message"}).json()
    assert first["count"] == 699 and first["pages"] == 4 and first["previous"] is None
    assert first["next"] == f"http://testserver{EVENTS.format(pk=long_run.pk)}?page=1&type=message"


def test_each_event_carries_what_the_page_shows_of_it(long_run):
    trace = long_run.traces.get()
    client = APIClient()
    final_page = trace.final_submit_line // PAGE_LINES
    body = client.get(EVENTS.format(pk=long_run.pk), {"page": final_page}).json()
    assert body["final_page"] == final_page
    final = next(e for e in body["events"] if e["line"] == trace.final_submit_line)
    assert final["type"] == "submit" and final["is_final"] is True and final["turn"] == 500
    assert "-    BLOCK = 250\n+    BLOCK = 500" in final["diff"]
    assert final["data"]["source"] == "class ModelNew:\n    BLOCK = 500\n"
    message = next(e for e in body["events"] if e["type"] == "message")
    assert message["diff"] is None and message["is_final"] is False and message["raw"] == ""
    assert message["data"]["content"].startswith("thinking ")
    last = {
        e["type"]: e
        for e in client.get(EVENTS.format(pk=long_run.pk), {"page": 3}).json()["events"]
    }
    assert last["malformed"] == {
        "line": 705,
        "type": "malformed",
        "turn": None,
        "is_final": False,
        "data": {},
        "raw": "{broken",
        "problem": "Not JSON: Expecting property name enclosed in double quotes (column 2).",
        "diff": None,
    }
    assert '"payload"' in last["mystery"]["raw"]
    summary = body["trace"]
    assert summary["event_types"] == {
        "end": 1,
        "message": 699,
        "start": 1,
        "submit": 2,
        "mystery": 1,
        "malformed": 1,
    }
    assert list(summary["event_types"]) == [
        "end",
        "message",
        "start",
        "submit",
        "mystery",
        "malformed",
    ]
    assert summary["submit_lines"] == trace.submit_lines and summary["problems"] == trace.problems
    assert summary["problem_count"] == trace.problem_count == len(trace.problems)


@pytest.mark.parametrize(
    ("params", "status", "error"),
    [
        ({"page": "two"}, 400, {"page": ["A page is a whole number, counted from 0."]}),
        ({"page": "-1"}, 400, {"page": ["Pages are counted from 0."]}),
        (
            {"type": "nope"},
            400,
            {
                "type": [
                    "Unknown event type 'nope': use one of end, message, start, submit, "
                    "mystery, malformed, tool_call, tool_result."
                ]
            },
        ),
        (
            {"page": 4},
            404,
            {
                "detail": "Page 4 is past the last page: this view of the trace has 4 page(s), "
                "counted from 0."
            },
        ),
        (
            {"type": "submit", "page": 1},
            404,
            {
                "detail": "Page 1 is past the last page: this view of the trace has 1 page(s), "
                "counted from 0."
            },
        ),
    ],
)
def test_a_bad_page_or_type_is_a_4xx_that_says_why(long_run, params, status, error):
    response = APIClient().get(EVENTS.format(pk=long_run.pk), params)
    assert response.status_code == status
    assert response.json() == error


def test_a_schema_type_absent_from_the_trace_is_an_empty_page(long_run):
    body = APIClient().get(EVENTS.format(pk=long_run.pk), {"type": "tool_call"}).json()
    assert (body["events"], body["count"], body["pages"], body["next"]) == ([], 0, 1, None)


@pytest.mark.parametrize("params", [{}, {"page": 3}, {"type": "message", "page": 2}])
def test_a_page_of_events_costs_two_queries_whatever_page(
    long_run, params, django_assert_num_queries
):
    client = APIClient()
    with django_assert_num_queries(2):  # the run, the trace with its task
        assert client.get(EVENTS.format(pk=long_run.pk), params).status_code == 200


def test_the_run_links_each_trace_to_its_api(make_run, owner):
    run, files = make_run(is_public=False)
    client = token_client(owner)
    rows = {r["task"]: r for r in client.get(f"/api/runs/{run.pk}/").json()["tasks"]}
    trace = rows["row_softmax"]["result"]["trace"]
    assert trace["url"] == f"http://testserver/runs/{run.pk}/traces/row_softmax/"
    assert trace["api_url"] == f"http://testserver{EVENTS.format(pk=run.pk)}"
    assert trace["raw_api_url"] == f"http://testserver{RAW.format(pk=run.pk)}"
    assert client.get(trace["api_url"]).json()["trace"] == {
        **trace,
        "problems": [],
        "event_types": {"end": 1, "message": 1, "start": 1, "submit": 1},
        "submit_lines": [3],
        "final_submit_line": 3,
    }
    assert _raw_text(client.get(trace["raw_api_url"])) == files["traces/row_softmax.jsonl"]


def test_the_schema_documents_both_endpoints_as_they_answer(client, long_run):
    schema = client.get("/api/schema/?format=json").json()
    events = schema["paths"]["/api/runs/{id}/traces/{task}/"]["get"]
    parameters = {p["name"]: p for p in events["parameters"] if p["in"] == "query"}
    assert set(parameters) == {"page", "type"}
    assert "counted from 0" in parameters["page"]["description"]
    assert "malformed" in parameters["type"]["description"]
    assert {"200", "400", "404"} <= set(events["responses"])
    ref = events["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    components = schema["components"]["schemas"]
    assert ref == "#/components/schemas/TracePage"

    body = APIClient().get(EVENTS.format(pk=long_run.pk)).json()
    assert set(body) == set(components["TracePage"]["properties"])
    assert set(body["events"][0]) == set(components["TraceEvent"]["properties"])
    assert set(body["trace"]) == set(components["TraceDetail"]["properties"])
    assert set(body["run"]) == set(components["TraceRun"]["properties"])

    raw = schema["paths"]["/api/runs/{id}/traces/{task}/raw/"]["get"]
    assert set(raw["responses"]["200"]["content"]) == {"application/gzip"}
    assert "gzip" in raw["responses"]["200"]["description"]
    assert "404" in raw["responses"]

import pytest

from scoring.services import scores_refresh
from tests.factories import (
    DesignPropertyFactory,
    EvaluationFactory,
    GuidanceFactory,
    SubmissionFactory,
    UserFactory,
    WorkloadResultFactory,
    task_with_workloads,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def task():
    task = task_with_workloads(
        task__slug="row_softmax",
        task__category="normalization",
        timed={"timed_a": {"flops": 10, "bytes": 20}},
        hidden=["hidden_a"],
        checks=["check_a"],
        hidden_checks=["check_hidden"],
    )
    GuidanceFactory(task=task, level="L2", depends_on=["L1"], text="Tile it.")
    DesignPropertyFactory(task=task, key="tiling", level="L2")
    return task


def test_task_list(client, task):
    response = client.get("/api/tasks/")
    assert response.status_code == 200
    [row] = response.json()["results"]
    assert row["slug"] == "row_softmax"
    assert row["version"] == task.current_version.number
    assert row["timed_workloads"] == 1
    assert row["url"].endswith("/api/tasks/row_softmax/")


def test_task_list_filters_by_category(client, task):
    assert client.get("/api/tasks/?category=gemm").json()["results"] == []


def test_task_detail_has_public_workloads_guidance_and_properties(client, task):
    data = client.get("/api/tasks/row_softmax/").json()

    assert data["statement"] == task.statement
    assert data["version"] == task.current_version.number
    assert [w["name"] for w in data["workloads"]] == ["timed_a", "check_a"]
    assert data["workloads"][0]["flops"] == 10 and data["workloads"][0]["bytes"] == 20
    assert data["guidance"] == [{"level": "L2", "text": "Tile it.", "depends_on": ["L1"]}]
    assert data["properties"][0]["key"] == "tiling"


def test_task_detail_never_contains_hidden_workloads(client, task):
    body = client.get("/api/tasks/row_softmax/").content.decode()
    assert "hidden_a" not in body and "check_hidden" not in body


def test_task_detail_unknown_slug_is_404(client):
    assert client.get("/api/tasks/nope/").status_code == 404


def test_api_is_read_only(client, task):
    assert client.post("/api/tasks/", {}).status_code in (401, 403, 405)


def test_schema_and_docs_work_without_a_cdn(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/tasks/{slug}/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"cdn." not in docs.content and b"unpkg" not in docs.content
    assert b"drf_spectacular_sidecar" in docs.content


def test_the_api_docs_page_is_inside_the_sites_layout_with_no_inline_script(client):
    import re

    docs = client.get("/api/docs/")
    html = docs.content.decode()
    assert 'href="/api/docs/"' in html and "D2K Portal" in html  # the site's navigation
    assert re.findall(r"<script>", html) == []  # every script has a src
    (script_url,) = re.findall(r'<script src="(/api/docs/\?[^"]+)"', html)
    script = client.get(script_url.replace("&amp;", "&"))
    assert script.status_code == 200 and b"SwaggerUIBundle" in script.content


def test_task_ranking(client, task):
    submission = SubmissionFactory(
        owner=UserFactory(username="alice"), task=task, task_version=task.current_version
    )
    evaluation = EvaluationFactory(submission=submission)
    WorkloadResultFactory(evaluation=evaluation, name="timed_a", speedup=2.5)
    untimed = SubmissionFactory(
        owner=submission.owner, task_version=task.current_version, source="# other\n"
    )
    EvaluationFactory(submission=untimed, mode="interpret")
    # As the verdicts' commits do.
    scores_refresh(submission_ids=[submission.pk, untimed.pk])

    data = client.get("/api/tasks/row_softmax/ranking/").json()

    assert len(data) == 1
    assert data[0]["owner"] == "alice" and data[0]["speedup"] == 2.5
    assert data[0]["workload_speedups"] == {"timed_a": 2.5}


def test_task_ranking_unknown_slug_is_404(client):
    assert client.get("/api/tasks/nope/ranking/").status_code == 404

import pytest

from scoring.services import scores_refresh
from task_catalog.models import Task
from tests.factories import (
    DesignPropertyFactory,
    EvaluationFactory,
    GuidanceFactory,
    SubmissionFactory,
    UserFactory,
    WorkloadFactory,
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


def test_task_detail_has_the_reference_and_settings_the_page_shows(client, task):
    version = task.current_version
    version.reference_source = "class Model:\n    def forward(self, x):\n        return x\n"
    version.seeds, version.inplace = 5, True
    version.forbidden_ops = ["aten::_softmax", "aten::softmax"]
    version.save()

    data = client.get("/api/tasks/row_softmax/").json()

    assert data["reference_source"] == version.reference_source
    assert data["seeds"] == 5 and data["inplace"] is True
    assert data["forbidden_ops"] == ["aten::_softmax", "aten::softmax"]
    assert data["timed_against"] == "reference.py"
    page = client.get("/tasks/row_softmax/").content.decode()
    assert "5 seeds per workload" in page and "output written in place" in page
    assert "aten::softmax" in page and "reference.py" in page


def test_task_detail_is_timed_against_the_baseline_where_the_version_has_one(client, task):
    task.current_version.baseline_source = "class Baseline:\n    SECRET_ISH = 1\n"
    task.current_version.save()
    data = client.get("/api/tasks/row_softmax/").json()
    assert data["timed_against"] == "baseline.py"
    assert "SECRET_ISH" not in str(data)  # the page never shows the baseline's code


def test_task_detail_gives_no_hidden_workload_nor_what_the_page_does_not_show(client):
    task_with_workloads(
        task__slug="shapes",
        timed={"timed_a": {"params": {"rows": 128}}},
        hidden=[],
        expert_source="class ModelNew:\n    EXPERT_ONLY = 1\n",
        tolerances={"default": {"atol": 0.000123, "rtol": 0.000456, "rel_l2": 1e-4}},
    )
    version = Task.objects.get(slug="shapes").current_version
    WorkloadFactory(
        version=version, name="secret_tail", role="untimed", params={"rows": 777001}, position=1
    )
    WorkloadFactory(
        version=version,
        name="secret_check",
        role="check",
        hidden=True,
        params={"rows": 888002},
        position=2,
    )

    response = client.get("/api/tasks/shapes/")
    body = response.content.decode()

    assert [w["params"] for w in response.json()["workloads"]] == [{"rows": 128}]
    for secret in ("secret_tail", "777001", "secret_check", "888002"):
        assert secret not in body
    for unshown in ("EXPERT_ONLY", "0.000123", "0.000456", "content_hash", "allowed_ops"):
        assert unshown not in body


def test_task_detail_takes_as_many_queries_with_the_new_fields(
    client, task, django_assert_num_queries
):
    # task + version, public workloads, guidance, properties, the expert's baseline
    with django_assert_num_queries(5):
        assert client.get("/api/tasks/row_softmax/").status_code == 200


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

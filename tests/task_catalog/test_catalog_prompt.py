"""GET /api/tasks/<slug>/prompt/: the agent's task prompt, identical across conditions but
for the guidance section, never a hidden workload; a manifest's prompt_sha256 is checked."""

import hashlib
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from task_catalog.prompts import GUIDANCE_HEADING
from tests.factories import GuidanceFactory, TaskVersionFactory, WorkloadFactory
from tests.runs.bundles import good_files, make_zip, manifest

pytestmark = pytest.mark.django_db


@pytest.fixture
def prompt_task():
    version = TaskVersionFactory(
        task__slug="row_softmax",
        task__statement="Softmax of every **row**.",
        reference_source="class Model:\n    '''the reference'''\n",
    )
    WorkloadFactory(version=version, name="bf16_8192x1024", role="timed", position=0)
    WorkloadFactory(version=version, name="check_small", role="check", position=1)
    WorkloadFactory(version=version, name="secret_hidden_one", role="untimed", position=2)
    WorkloadFactory(version=version, name="secret_check", role="check", hidden=True, position=3)
    for level in ("L1", "L2", "L3"):
        GuidanceFactory(task=version.task, level=level, text=f"Guidance text of {level}.")
    return version


def _prompt(client, levels=None):
    query = "" if levels is None else f"?levels={levels}"
    response = client.get(f"/api/tasks/row_softmax/prompt/{query}")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_prompt_holds_statement_reference_public_workloads_contract_and_levels(
    client, prompt_task
):
    body = _prompt(client, "L1,L2")
    text = body["text"]
    for part in ("Softmax of every **row**.", "the reference", "bf16_8192x1024", "check_small"):
        assert part in text
    assert "class ModelNew" in text
    assert "Guidance text of L1." in text and "Guidance text of L2." in text
    assert "Guidance text of L3." not in text
    assert body["levels"] == ["L1", "L2"] and body["condition"] == "L1+L2"
    assert body["version"] == prompt_task.number
    assert body["content_hash"] == prompt_task.content_hash
    assert body["sha256"] == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("levels", [None, "", "L1", "L2,L1", "L1,L2,L3", "L3"])
def test_the_prompt_never_names_a_hidden_workload(client, prompt_task, levels):
    assert "secret" not in _prompt(client, levels)["text"]


def test_conditions_differ_only_in_the_guidance_section(client, prompt_task):
    texts = {levels: _prompt(client, levels)["text"] for levels in ("", "L1", "L1,L2", "L1,L2,L3")}
    common = texts[""]
    assert GUIDANCE_HEADING not in common
    for levels in ("L1", "L1,L2", "L1,L2,L3"):
        # The same bytes, then the guidance section and nothing else.
        assert texts[levels].startswith(common)
        section = texts[levels][len(common) :]
        assert section.startswith(f"\n{GUIDANCE_HEADING}\n")
        assert section.count("\n### L") == levels.count("L")
    assert len(set(texts.values())) == 4


def test_an_unknown_level_is_400_with_detail(client, prompt_task):
    response = client.get("/api/tasks/row_softmax/prompt/?levels=L1,L9")
    assert response.status_code == 400
    assert "L9" in response.json()["detail"]


def test_an_unknown_task_is_404(client, db):
    assert client.get("/api/tasks/nope/prompt/").status_code == 404


def test_the_schema_documents_the_prompt_endpoint(client):
    schema = client.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/tasks/{slug}/prompt/"]["get"]
    assert [p["name"] for p in operation["parameters"] if p["in"] == "query"] == ["levels"]
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    props = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"]
    assert {"text", "sha256", "content_hash", "version"} <= set(props)


def _upload(uploader, data, django_capture_on_commit_callbacks):
    bundle = SimpleUploadedFile("run.zip", data, content_type="application/zip")
    with django_capture_on_commit_callbacks(execute=True):
        return uploader.post("/api/runs/", {"bundle": bundle}, format="multipart")


def _bundle(prompt_sha256, levels=("L1",)):
    files = good_files(levels=levels)
    data = json.loads(manifest(levels=list(levels)))
    data["prompt_sha256"] = prompt_sha256
    files["manifest.json"] = json.dumps(data)
    return make_zip(files)


def test_a_manifest_with_the_served_prompt_hash_is_accepted(
    client, uploader, prompt_task, fake_cli, django_capture_on_commit_callbacks
):
    served = _prompt(client, "L1")["sha256"]
    response = _upload(
        uploader, _bundle({"row_softmax": served}), django_capture_on_commit_callbacks
    )
    assert response.status_code == 201, response.json()


@pytest.mark.parametrize("which", ["other levels", "made up", "unknown task"])
def test_a_manifest_with_another_prompt_hash_is_400(
    client, uploader, prompt_task, fake_cli, django_capture_on_commit_callbacks, which
):
    recorded = {
        "other levels": {"row_softmax": _prompt(client, "L1,L2")["sha256"]},
        "made up": {"row_softmax": "0" * 64},
        "unknown task": {"gemm_bf16": "0" * 64},
    }[which]
    response = _upload(uploader, _bundle(recorded), django_capture_on_commit_callbacks)
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["file"] == "manifest.json" and "prompt_sha256" in error["message"]
    assert fake_cli.calls == []

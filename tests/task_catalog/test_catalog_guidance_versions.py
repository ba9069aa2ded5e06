"""Guidance and design properties are versioned content: every change, from the admin or
from disk, is a new version with its hash, author, time and diff; load_catalog never
discards an admin's edit silently; a run records the guidance version it was given."""

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from runs.models import Run
from task_catalog.guidance_text import guidance_content_hash
from task_catalog.models import GuidanceVersion, Task
from task_catalog.services import guidance_content
from tests.factories import UserFactory
from tests.runs.bundles import good_files, make_zip, manifest

pytestmark = pytest.mark.django_db

EDIT = "Keep the row in registers; one pass with an online max and sum."


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    directory = tmp_path / "catalog"
    shutil.copytree(Path(settings.BASE_DIR) / "catalog" / "row_softmax", directory / "row_softmax")
    return directory


def load(catalog: Path, *flags: str) -> str:
    out = StringIO()
    call_command("load_catalog", "--dir", str(catalog), *flags, stdout=out)
    return out.getvalue()


@pytest.fixture
def task(catalog) -> Task:
    load(catalog)
    return Task.objects.get(slug="row_softmax")


@pytest.fixture
def admin_user():
    return UserFactory(username="curator", is_staff=True, is_superuser=True)


def _admin_form(task: Task) -> dict[str, str]:
    """The Task change form as the admin page posts it, unchanged."""
    data = {
        "slug": task.slug,
        "title": task.title,
        "category": task.category,
        "position": str(task.position),
        "statement": task.statement,
        "_save": "Save",
    }
    for prefix, rows, fields in (
        ("guidance", task.guidance.order_by("level"), ("level", "text", "depends_on")),
        (
            "properties",
            task.properties.order_by("level", "position"),
            ("position", "key", "level", "title", "description", "weight", "depends_on"),
        ),
    ):
        rows = list(rows)
        data |= {
            f"{prefix}-TOTAL_FORMS": str(len(rows)),
            f"{prefix}-INITIAL_FORMS": str(len(rows)),
            f"{prefix}-MIN_NUM_FORMS": "0",
            f"{prefix}-MAX_NUM_FORMS": "1000",
        }
        for i, row in enumerate(rows):
            data[f"{prefix}-{i}-id"] = str(row.pk)
            data[f"{prefix}-{i}-task"] = str(task.pk)
            for field in fields:
                value = getattr(row, field)
                data[f"{prefix}-{i}-{field}"] = (
                    json.dumps(value) if isinstance(value, list | dict) else str(value)
                )
            if prefix == "properties":
                data[f"{prefix}-{i}-detector"] = json.dumps(row.detector)
    return data


def _edit_in_admin(client, task: Task, level: str, text: str):
    form = _admin_form(task)
    index = [g.level for g in task.guidance.order_by("level")].index(level)
    form[f"guidance-{index}-text"] = text
    response = client.post(reverse("admin:task_catalog_task_change", args=[task.pk]), form)
    assert response.status_code == 302, response.content.decode()[:3000]
    return response


def test_a_load_from_disk_makes_the_first_version_and_reloading_keeps_it(catalog):
    out = load(catalog)
    assert "guidance v1 loaded from disk" in out
    task = Task.objects.get(slug="row_softmax")
    [version] = GuidanceVersion.objects.filter(task=task)
    assert version.source == GuidanceVersion.Source.DISK and version.author is None
    assert version.content_hash == guidance_content_hash(guidance_content(task=task))
    assert "guidance unchanged (v1)" in load(catalog)
    assert GuidanceVersion.objects.count() == 1


def test_a_guidance_or_property_change_on_disk_makes_a_new_version(catalog, task):
    guidance = catalog / "row_softmax" / "guidance" / "L1.md"
    guidance.write_text(guidance.read_text() + "\nA new paragraph.\n")
    assert "guidance v2 loaded from disk" in load(catalog)
    toml = catalog / "row_softmax" / "task.toml"
    toml.write_text(toml.read_text().replace("weight = 1.0", "weight = 3.0", 1))
    assert "guidance v3 loaded from disk" in load(catalog)
    assert list(task.guidance_versions.values_list("number", flat=True)) == [3, 2, 1]


def test_an_admin_edit_is_a_new_version_with_its_author(client, task, admin_user):
    client.force_login(admin_user)
    _edit_in_admin(client, task, "L1", EDIT)
    version = task.guidance_versions.first()
    assert (version.number, version.source, version.author) == (2, "admin", admin_user)
    assert version.content["guidance"][0]["text"] == EDIT


def test_saving_the_admin_form_unchanged_makes_no_version(client, task, admin_user):
    client.force_login(admin_user)
    response = client.post(
        reverse("admin:task_catalog_task_change", args=[task.pk]), _admin_form(task)
    )
    assert response.status_code == 302
    assert task.guidance_versions.count() == 1


def test_load_catalog_keeps_the_admins_edit_and_says_so(client, task, admin_user, catalog):
    client.force_login(admin_user)
    _edit_in_admin(client, task, "L1", EDIT)

    out = load(catalog)

    assert "guidance v2 kept (edited in the admin by curator" in out
    assert "export_catalog" in out
    assert task.guidance.get(level="L1").text == EDIT
    assert task.guidance_versions.count() == 2
    # and again on the next start
    assert "guidance v2 kept" in load(catalog)


def test_when_both_changed_load_catalog_refuses_unless_told_to_load_the_disks(
    client, task, admin_user, catalog
):
    client.force_login(admin_user)
    _edit_in_admin(client, task, "L1", EDIT)
    (catalog / "row_softmax" / "guidance" / "L1.md").write_text("The disk's new text.\n")

    out = load(catalog)
    assert "guidance NOT loaded" in out and "--guidance-from-disk" in out
    assert task.guidance.get(level="L1").text == EDIT

    out = load(catalog, "--guidance-from-disk")
    assert "guidance v3 loaded from disk" in out
    assert task.guidance.get(level="L1").text.strip() == "The disk's new text."
    # the admin's edit stays in the history
    assert task.guidance_versions.get(number=2).content["guidance"][0]["text"] == EDIT


def test_the_history_page_and_the_admin_show_each_versions_diff(client, task, admin_user):
    client.force_login(admin_user)
    _edit_in_admin(client, task, "L1", EDIT)
    page = client.get(reverse("task_catalog:guidance", args=[task.slug])).content.decode()
    assert "v2" in page and "curator" in page
    assert f'<span class="diff-add">+{EDIT}</span>' in page
    assert '<span class="diff-del">-' in page

    version = task.guidance_versions.first()
    admin_page = client.get(
        reverse("admin:task_catalog_guidanceversion_change", args=[version.pk])
    ).content.decode()
    assert f"+{EDIT}" in admin_page and version.content_hash in admin_page

    detail = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()
    assert "Guidance version <strong>v2</strong> (<code" in detail


def test_the_prompt_names_its_guidance_version(client, task, admin_user):
    body = client.get("/api/tasks/row_softmax/prompt/?levels=L1").json()
    current = task.guidance_versions.first()
    assert body["guidance_sha256"] == current.content_hash
    assert body["guidance_version"] == 1


# --- a run records the guidance it was given -------------------------------------------


def _upload(uploader, prompt_sha256=None):
    files = good_files(levels=("L1",))
    data = json.loads(manifest(levels=["L1"]))
    if prompt_sha256 is not None:
        data["prompt_sha256"] = prompt_sha256
    files["manifest.json"] = json.dumps(data)
    bundle = SimpleUploadedFile("run.zip", make_zip(files), content_type="application/zip")
    response = uploader.post("/api/runs/", {"bundle": bundle}, format="multipart")
    assert response.status_code == 201, response.json()
    return Run.objects.get(pk=response.json()["id"])


def test_a_run_records_the_guidance_version_of_the_prompt_it_fetched(
    client, task, admin_user, uploader, fake_cli
):
    old_prompt = client.get("/api/tasks/row_softmax/prompt/?levels=L1").json()
    client.force_login(admin_user)
    _edit_in_admin(client, task, "L1", EDIT)

    # The agent was given v1; the portal now serves v2: the run records v1, from the prompt.
    run = _upload(uploader, {"row_softmax": old_prompt["sha256"]})
    assert run.guidance_versions["row_softmax"] == {
        "sha256": old_prompt["guidance_sha256"],
        "number": 1,
        "from": "prompt",
    }
    page = client.get(f"/runs/{run.pk}/").content.decode()  # the admin sees private runs
    assert f"<code>{old_prompt['guidance_sha256'][:12]}</code>" in page
    assert "from the prompt" in page
    assert uploader.get(f"/api/runs/{run.pk}/").json()["guidance_versions"] == (
        run.guidance_versions
    )


def test_a_run_without_prompt_hashes_records_the_guidance_current_at_upload(
    task, uploader, fake_cli
):
    run = _upload(uploader)
    current = task.guidance_versions.first()
    assert run.guidance_versions == {
        "row_softmax": {"sha256": current.content_hash, "number": 1, "from": "upload"}
    }


def _upload_with(uploader, **keys):
    files = good_files(levels=("L1",))
    files["manifest.json"] = json.dumps({**json.loads(manifest(levels=["L1"])), **keys})
    bundle = SimpleUploadedFile("run.zip", make_zip(files), content_type="application/zip")
    return uploader.post("/api/runs/", {"bundle": bundle}, format="multipart")


def test_a_manifest_may_name_the_guidance_version_itself(
    client, task, admin_user, uploader, fake_cli
):
    v1 = task.guidance_versions.get().content_hash
    client.force_login(admin_user)
    _edit_in_admin(client, task, "L1", EDIT)

    response = _upload_with(uploader, guidance_sha256={"row_softmax": v1})

    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert run.guidance_versions["row_softmax"] == {"sha256": v1, "number": 1, "from": "manifest"}
    assert "from the manifest" in client.get(f"/runs/{run.pk}/").content.decode()


@pytest.mark.parametrize("which", ["unknown hash", "disagrees with the prompt", "unknown task"])
def test_a_guidance_hash_that_names_no_version_is_a_400(client, task, uploader, fake_cli, which):
    prompt = client.get("/api/tasks/row_softmax/prompt/?levels=L1").json()
    keys = {
        "unknown hash": {"guidance_sha256": {"row_softmax": "0" * 64}},
        "disagrees with the prompt": {
            "prompt_sha256": {"row_softmax": prompt["sha256"]},
            "guidance_sha256": {"row_softmax": "1" * 64},
        },
        "unknown task": {"guidance_sha256": {"gemm_bf16": "0" * 64}},
    }[which]
    response = _upload_with(uploader, **keys)
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["file"] == "manifest.json" and "guidance_sha256" in error["message"]
    assert not Run.objects.exists()


def test_a_new_guidance_version_renews_the_cached_task_page(client, task):
    from scoring.selectors import scores_version

    before = scores_version()
    version = task.guidance_versions.get()
    GuidanceVersion.objects.create(
        task=task,
        number=2,
        content_hash=version.content_hash,
        content=version.content,
        source=GuidanceVersion.Source.DISK,
    )
    assert scores_version() != before
    page = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()
    assert "Guidance version <strong>v2</strong>" in page

"""A lab's first day in a real headless Chromium: a run uploaded with the client stays
private; a curator's guidance edit becomes a new version with its diff and survives a
restart's load_catalog; a new task version opened from the task list is prefilled; a
version that changed what is measured says its baseline is not yet measured.

`D2K_SCREENSHOT_DIR=docs/screenshots` saves the changed pages as PNGs."""

from __future__ import annotations

import json
import os
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.browser.support import MARKS, PASSWORD, sign_in
from tests.runs.bundles import good_files, make_zip

ROOT = Path(__file__).resolve().parents[2]
EDIT = "Keep each row in registers: one pass with an online max and sum."

pytestmark = [*MARKS, pytest.mark.django_db(transaction=True)]


def _shot(page, name: str) -> None:
    folder = os.environ.get("D2K_SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"), animations="disabled")


@pytest.fixture
def catalog(tmp_path) -> Path:
    """row_softmax on disk, loaded as `./dev serve` loads it."""
    directory = tmp_path / "catalog"
    shutil.copytree(ROOT / "catalog" / "row_softmax", directory / "row_softmax")
    _load(directory)
    return directory


def _load(directory: Path) -> str:
    out = StringIO()
    call_command("load_catalog", "--dir", str(directory), stdout=out)
    return out.getvalue()


@pytest.fixture
def curator(db):
    from tests.factories import UserFactory

    user = UserFactory(username="curator", is_staff=True, is_superuser=True)
    user.set_password(PASSWORD)
    user.save()
    return user


def test_a_run_uploaded_with_the_client_is_private_until_published(
    page, live_server, run_tasks, fake_cli, tmp_path, monkeypatch
):
    from d2k_client.cli import app
    from playwright.sync_api import expect
    from typer.testing import CliRunner

    from tests.factories import UserFactory, api_token_key

    owner = UserFactory(username="lab-owner")
    owner.set_password(PASSWORD)
    owner.save()
    monkeypatch.setenv("D2K_CONFIG", str(tmp_path / "d2k.json"))
    bundle = tmp_path / "run.zip"
    bundle.write_bytes(make_zip(good_files("row_softmax", "layernorm_fwd")))
    runner = CliRunner()
    login = ["--server", live_server.url, "login", "--token", api_token_key(owner)]
    assert runner.invoke(app, login).exit_code == 0
    uploaded = runner.invoke(app, ["submit-run", str(bundle), "--json"])
    assert uploaded.exit_code == 0, uploaded.output
    run_id = json.loads(uploaded.stdout)["id"]

    # An anonymous reader: the same 404 as for a run that does not exist.
    response = page.goto(f"/runs/{run_id}/")
    assert response is not None and response.status == 404
    kernel = page.context.request.get(f"/api/runs/{run_id}/")
    assert kernel.status == 404

    sign_in(page, username="lab-owner")
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("table.manifest")).to_contain_text("private (only you")
    page.click("table.manifest button:text-is('Publish')")
    expect(page.locator("table.manifest")).to_contain_text("public")
    assert page.context.request.get(f"/api/runs/{run_id}/").status == 200


def test_a_guidance_edit_in_the_admin_is_a_version_with_its_diff_and_survives_a_restart(
    page, catalog, curator
):
    from playwright.sync_api import expect

    from task_catalog.models import Task

    task = Task.objects.get(slug="row_softmax")
    page.goto("/admin/login/")
    page.fill("input[name=username]", "curator")
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.goto(f"/admin/task_catalog/task/{task.pk}/change/")
    level = [g.level for g in task.guidance.order_by("level")].index("L1")
    page.fill(f"textarea[name=guidance-{level}-text]", EDIT)
    page.click("input[name=_continue]")
    expect(page.locator("ul.messagelist")).to_contain_text("Saved as guidance v2")

    page.click("a:text-is('History with diffs')")
    page.click("table#result_list a:text-is('row_softmax guidance v2')")
    expect(page.locator("pre.guidance-diff")).to_contain_text(f"+{EDIT}")
    expect(page.locator("body")).to_contain_text("curator")
    _shot(page, "admin-guidance-version")

    # The site restarts: ./dev serve runs load_catalog again, the disk unchanged.
    out = _load(catalog)
    assert "guidance v2 kept (edited in the admin by curator" in out

    page.goto("/tasks/row_softmax/")
    expect(page.locator("#guidance-L1")).to_contain_text(EDIT)
    expect(page.locator("p.guidance-version")).to_contain_text("Guidance version v2")
    page.click("a:text-is('Guidance history with diffs')")
    expect(page.locator("article.guidance-history").first).to_contain_text("v2")
    expect(page.locator("article.guidance-history .diff-add").first).to_be_visible()
    _shot(page, "guidance-history")


def test_a_new_task_version_from_the_task_list_is_prefilled(page, catalog, curator):
    from playwright.sync_api import expect

    page.goto("/admin/login/")
    page.fill("input[name=username]", "curator")
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.goto("/admin/task_catalog/task/")
    page.click("a:text-is('Add a version from v1')")
    expect(page.locator("textarea[name=reference_source]")).to_have_value(
        (ROOT / "catalog" / "row_softmax" / "reference.py").read_text()
    )
    expect(page.locator("textarea[name=workloads]")).to_contain_text("bf16_16384x1024")
    expect(page.locator("textarea[name=hidden_draws]")).to_contain_text("not_multiple_of")
    _shot(page, "admin-new-version")

    # Opened from the versions list with nothing chosen: the task is asked for first.
    page.goto("/admin/task_catalog/taskversion/add/")
    page.click("#choose-task a:text-is('row_softmax')")
    expect(page.locator("textarea[name=workloads]")).to_contain_text("bf16_16384x1024")


def test_the_task_page_and_board_say_the_baseline_is_not_yet_measured(page):
    from playwright.sync_api import expect

    from tests.evaluator.test_baselines import FIXTURE_GPU
    from tests.factories import TaskVersionFactory, task_with_workloads
    from tests.task_catalog.test_catalog_baseline import imported

    task = task_with_workloads(task__slug="row_softmax", task__title="Row-wise softmax")
    imported(task)
    version = TaskVersionFactory(task=task, expert_source="class ModelNew:\n    pass\n")

    page.goto("/tasks/row_softmax/")
    banner = page.locator("p.baseline-pending")
    expect(banner).to_contain_text(
        f"Baseline not yet measured on {FIXTURE_GPU}: version v{version.number}"
    )
    _shot(page, "task-baseline-pending")
    page.goto("/leaderboard/")
    expect(page.locator("p.baseline-pending")).to_contain_text(
        f"Baseline not yet measured on {FIXTURE_GPU} for row_softmax v{version.number}"
    )


def test_the_docs_index_is_linked_from_the_navigation(page):
    from playwright.sync_api import expect

    page.goto("/")
    page.click("header nav a:text-is('Docs')")
    expect(page).to_have_url("/docs/")
    page.click("#documents a:text-is('The d2k client')")
    expect(page).to_have_url("/docs/client/")
    expect(page.locator("h1")).to_contain_text("client")
    page.goto("/docs/")
    _shot(page, "docs-index")

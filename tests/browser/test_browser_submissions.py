"""A kernel uploaded through the web form, evaluated by a running worker, watched live.

The portal runs as a deployment does (the web server and `evaluation_worker` as
processes, interpret mode, a database of its own): the submission page shows the
evaluation queued or running and follows it until the verdict, with no reload by
the test.
"""

import os
import re
import signal
from pathlib import Path

import pytest

from d2kportal.processes import Portal
from evaluator.exploits.cases import KERNELS_DIR
from tests.browser.support import EVALUATION_TIMEOUT_MS, MARKS, open_page, sign_up

ROOT = Path(__file__).resolve().parents[2]
PENDING = re.compile(r"^\s*(queued|running)\s*$")

pytestmark = MARKS


@pytest.fixture
def portal(tmp_path):
    portal = Portal(tmp_path, database="sqlite")
    try:
        portal.manage("migrate", "--noinput")
        portal.manage("load_catalog")
        portal.start_web()
        worker = portal.start_worker()
        yield portal
        # Nothing is left to evaluate: the worker's graceful stop would only wait.
        os.killpg(worker.pid, signal.SIGKILL)
    finally:
        portal.close()


def upload_and_watch(page, *, source: Path) -> str:
    """Upload `source` for row_softmax, check the page follows the evaluation while it
    is pending, and return the verdict it finally shows."""
    from playwright.sync_api import expect

    page.click("header nav a:text-is('Upload')")
    expect(page).to_have_url("/submissions/new/")
    page.select_option("select[name=task]", "row_softmax")
    page.set_input_files("input[name=file]", str(source))
    page.click("main button[type=submit]")
    expect(page).to_have_url(re.compile(r".*/submissions/\d+/$"))
    expect(page.locator(".messages")).to_contain_text("is queued for evaluation")
    badge = page.locator("#live-status")
    # An interpret-mode evaluation takes seconds: the page meets it pending.
    expect(badge).to_have_text(PENDING)
    expect(page.locator("#evaluation")).to_contain_text("follows the evaluation")
    # status.js polls the API and reloads the page once the verdict is in.
    expect(badge).not_to_have_text(PENDING, timeout=EVALUATION_TIMEOUT_MS)
    expect(page.locator("#evaluation")).not_to_contain_text("follows the evaluation")
    return badge.inner_text().strip()


def test_a_new_user_watches_a_correct_and_an_incorrect_kernel_come_back(browser, portal):
    from playwright.sync_api import expect

    context, page = open_page(browser, portal.base_url)
    try:
        sign_up(page, username="ada")

        assert upload_and_watch(page, source=ROOT / "catalog/row_softmax/expert.py") == "correct"
        expect(page.locator("table.results")).to_contain_text("check_")
        expect(page.locator("table.environment")).to_contain_text("interpret")

        # A kernel that drops the row tail: the failing workload is named, on the page
        # and in the API (same session), by its alias, since hidden shapes stay secret.
        no_tail = KERNELS_DIR / "14_fixed_block_no_tail.py"
        status = upload_and_watch(page, source=no_tail)
        assert status in ("incorrect", "runtime_error"), status
        expect(page.locator("#evaluation")).to_contain_text("hidden workload")
        assert "check_hidden_2" not in page.content()
        pk = page.url.rstrip("/").rsplit("/", 1)[-1]
        evaluation = page.request.get(f"/api/submissions/{pk}/").json()["evaluation"]
        assert evaluation["status"] == status
        assert "hidden workload" in evaluation["message"]

        page.click("header nav a:text-is('My submissions')")
        rows = page.locator("main table tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.filter(has_text="correct").first).to_be_visible()
    finally:
        context.close()

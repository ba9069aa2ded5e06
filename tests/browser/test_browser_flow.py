"""The issue #2 flow in a real headless Chromium: browse, sign up, upload, see the verdict."""

import os
import shutil
from pathlib import Path

import pytest

from task_catalog.services import catalog_load

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed"),
]


@pytest.fixture
def page(live_server):
    playwright = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API runs an event loop; Django's async-safety check
    # would otherwise refuse the ORM calls of the live server thread.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser.new_page()
        browser.close()


@pytest.mark.django_db(transaction=True)
def test_a_new_user_sees_a_kernel_come_back_correct_and_one_come_back_incorrect(page, live_server):
    catalog_load(directory=ROOT / "catalog")
    page.goto(f"{live_server.url}/tasks/row_softmax/")
    assert "Row-wise softmax" in page.inner_text("h1")
    # plotly.js is served from our static files and draws the property graph.
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=15_000)

    page.goto(f"{live_server.url}/accounts/signup/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=email]", "ada@example.org")
    page.fill("input[name=password1]", "a-long-passphrase-42")
    page.fill("input[name=password2]", "a-long-passphrase-42")
    page.click("main button[type=submit]")

    page.goto(f"{live_server.url}/submissions/new/")
    page.select_option("select[name=task]", "row_softmax")
    page.set_input_files("input[name=file]", str(ROOT / "catalog/row_softmax/expert.py"))
    page.click("main button[type=submit]")  # the test settings evaluate synchronously
    page.wait_for_url("**/submissions/*/", timeout=120_000)
    assert "correct" in page.inner_text(".status")
    assert "check_hidden_bf16_5x77" in page.content() or "hidden workload" in page.content()

    # A kernel that drops the row tail: the failing workload is named, on the page
    # and in the API (same session), by its alias, since hidden shapes stay secret.
    page.goto(f"{live_server.url}/submissions/new/")
    page.select_option("select[name=task]", "row_softmax")
    no_tail = ROOT / "tests/exploits/kernels/14_fixed_block_no_tail.py"
    page.set_input_files("input[name=file]", str(no_tail))
    page.click("main button[type=submit]")
    page.wait_for_url("**/submissions/*/", timeout=120_000)
    status = page.inner_text(".status").strip()
    assert status.split()[0] in ("incorrect", "runtime_error"), status
    assert "hidden workload" in page.inner_text("main")
    assert "check_hidden_fp32_3x40000" not in page.content()
    pk = page.url.rstrip("/").rsplit("/", 1)[-1]
    evaluation = page.request.get(f"{live_server.url}/api/submissions/{pk}/").json()["evaluation"]
    assert evaluation["status"] == status.split()[0]
    assert "hidden workload" in evaluation["message"]

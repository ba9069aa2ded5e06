"""The trace viewer in a real headless Chromium: open a trace, jump to the final kernel."""

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed"),
]


@pytest.fixture
def page(live_server):
    playwright = pytest.importorskip("playwright.sync_api")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser.new_page()
        browser.close()


@pytest.mark.django_db(transaction=True)
def test_a_reader_opens_a_trace_and_jumps_to_the_final_kernel(page, live_server, fake_cli):
    from runs.examples import example_bundle_build
    from runs.services import run_create_from_bundle
    from tests.factories import TaskVersionFactory, UserFactory

    TaskVersionFactory(task__slug="row_softmax")
    data = example_bundle_build(name="with_guidance", tasks=["row_softmax"])
    run = run_create_from_bundle(owner=UserFactory(), data=data, is_example=True, is_public=True)
    trace = run.traces.get()

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert "Example data written by hand" in page.inner_text(".banner-example")
    page.click("#task-row_softmax a[href$='/traces/row_softmax/']")
    page.wait_for_url("**/traces/row_softmax/")
    assert page.locator(".timeline .ev").count() == 200
    # Messages are folded to one line until expanded.
    first_message = page.locator(".ev-message details").first
    assert first_message.get_attribute("open") is None

    page.click("a.jump-final")
    page.wait_for_url(f"**#line-{trace.final_submit_line}")
    final = page.locator(f"#line-{trace.final_submit_line}")
    assert final.is_visible()
    assert "the final kernel" in final.inner_text()
    assert "ev-final" in (final.get_attribute("class") or "")
    # trace.js opened the event's folds: its diff and source are readable.
    assert final.locator("details").first.get_attribute("open") is not None
    assert "class ModelNew" in final.inner_text()

    page.select_option("select#event-type", "submit")
    page.click(".trace-filter button[type=submit]")
    page.wait_for_url("**type=submit**")
    assert page.locator(".timeline .ev").count() == trace.submit_count

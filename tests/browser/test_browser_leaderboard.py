"""The leaderboard in a real headless Chromium: a filter changes the URL, the chart draws."""

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
def test_a_reader_filters_the_leaderboard_and_sees_the_chart(page, live_server):
    from tests.leaderboard.test_board_views import scored

    kept = scored(model="model-a", ps=2.0)
    dropped = scored(model="model-b", ps=1.0)

    page.goto(f"{live_server.url}/leaderboard/")
    assert page.locator(f"#run-{dropped.pk}").count() == 1
    page.select_option("select#filter-model", "model-a")
    page.wait_for_url("**model=model-a**")
    assert page.locator(f"#run-{kept.pk}").count() == 1
    assert page.locator(f"#run-{dropped.pk}").count() == 0
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=15_000)

"""The leaderboard in a real headless Chromium: a filter changes the URL (the permalink),
the table and the chart, which plotly draws as SVG."""

import re

import pytest

from tests.browser.support import MARKS

pytestmark = [*MARKS, pytest.mark.django_db(transaction=True)]


def test_a_reader_filters_the_leaderboard_and_sees_the_url_the_table_and_the_chart_follow(page):
    from playwright.sync_api import expect

    from tests.leaderboard.test_board_views import scored

    kept = scored(model="model-a", ps=2.0)
    dropped = scored(model="model-b", ps=1.0)

    page.goto("/")
    page.click("a:text-is('All entries')")
    expect(page).to_have_url("/leaderboard/")
    expect(page.locator(f"#entry-{kept.pk}")).to_have_count(1)
    expect(page.locator(f"#entry-{dropped.pk}")).to_have_count(1)
    chart = page.locator("[data-figure=leaderboard-figure]")
    # One bar group per entry, drawn by plotly.js (served from the site's static files).
    expect(chart.locator(".main-svg .barlayer .trace.bars")).to_have_count(2)
    expect(chart.locator(".legend")).to_contain_text(f"#{dropped.pk} model-b")

    page.select_option("select#filter-model", "model-a")  # filters.js submits the form
    expect(page).to_have_url(re.compile(r".*/leaderboard/\?(.*&)?model=model-a(&|$)"))
    expect(page.locator(f"#entry-{kept.pk}")).to_have_count(1)
    expect(page.locator(f"#entry-{dropped.pk}")).to_have_count(0)
    bars = chart.locator(".main-svg .barlayer .trace.bars")
    expect(bars).to_have_count(1)
    # The run's four bars (L1, L2, L3, combined) are drawn as paths.
    expect(bars.locator(".point path")).to_have_count(4)

    # The permalink reproduces the view; sorting and the paired view keep the filter.
    permalink = page.url
    page.goto("/leaderboard/")
    page.goto(permalink)
    expect(page.locator("select#filter-model")).to_have_value("model-a")
    expect(page.locator(f"#entry-{dropped.pk}")).to_have_count(0)
    page.click("table.leaderboard th a:text-is('Performance Score')")
    expect(page).to_have_url(re.compile(r".*sort=.*"))
    expect(page).to_have_url(re.compile(r".*model=model-a.*"))
    page.click("main p.muted a:text-is('Paired view')")
    expect(page).to_have_url(re.compile(r".*/leaderboard/paired/\?.*model=model-a.*"))

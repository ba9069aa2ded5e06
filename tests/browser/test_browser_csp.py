"""Under the Content-Security-Policy every page still works in a real Chromium: no
script, stylesheet or style the policy refuses, and plotly.js still draws the charts.

One refusal is known and harmless: plotly.js adds a `<style>` per chart for the hover
colour of its toolbar icons (its id holds a random chart id, so no served file can
stand in for it); static/css/plotly.css gives the icons the same colours."""

import pytest

from tests.browser.support import MARKS

pytestmark = [*MARKS, pytest.mark.django_db(transaction=True)]

RECORD = """
window.__refused = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__refused.push({directive: e.effectiveDirective, source: e.sourceFile,
                         blocked: e.blockedURI});
});
"""


def _refused(page) -> list[dict]:
    """What the policy refused on the page, less plotly's one toolbar style per chart."""
    refused = page.evaluate("window.__refused")
    toolbars = [
        r
        for r in refused
        if r["directive"] == "style-src-elem" and r["source"].endswith("plotly.min.js")
    ]
    charts = page.locator("[data-figure]").count()
    return [r for r in refused if r not in toolbars] + toolbars[charts:]


def test_pages_break_no_rule_of_the_policy_and_charts_still_draw(page):
    from playwright.sync_api import expect

    from tests.leaderboard.test_board_views import scored

    page.add_init_script(RECORD)
    scored(model="model-a", ps=2.0)
    response = page.goto("/leaderboard/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    chart = page.locator("[data-figure=leaderboard-figure]")
    expect(chart.locator(".main-svg .barlayer .trace.bars")).to_have_count(1)
    chart.hover()
    assert _refused(page) == []
    for url in ("/", "/tasks/", "/runs/", "/api/docs/", "/accounts/login/"):
        page.goto(url)
        page.wait_for_load_state("networkidle")
        assert _refused(page) == [], url

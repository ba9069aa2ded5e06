"""A moderator reviews a cell the scanners put in `needs_review` and sees the run enter
the leaderboard, in a real headless Chromium on the live server."""

import re

import pytest

from runs.models import Run
from runs.services import run_create_from_bundle
from tests.browser.support import MARKS, PASSWORD, sign_in
from tests.factories import UserFactory
from tests.runs.bundles import good_files, make_zip, trace_lines

pytestmark = [*MARKS, pytest.mark.django_db(transaction=True)]


def bundle_with_a_pkill() -> bytes:
    files = good_files("row_softmax")
    files["traces/row_softmax.jsonl"] = trace_lines(
        {"type": "start", "ts": 0, "task": "row_softmax", "condition": "none"},
        {
            "type": "tool_call",
            "ts": 1,
            "turn": 1,
            "name": "bash",
            "arguments": {"cmd": "pkill -f q"},
        },
        {"type": "submit", "ts": 2, "turn": 1, "source": files["kernels/row_softmax.py"]},
        {"type": "end", "ts": 3, "reason": "submitted", "turns_used": 1},
    )
    return make_zip(files)


def test_a_moderator_reviews_a_nominated_cell_clean_and_the_run_enters_the_leaderboard(
    page, run_tasks, fake_cli
):
    from playwright.sync_api import expect

    lab = UserFactory(username="lab")
    run = run_create_from_bundle(owner=lab, data=bundle_with_a_pkill(), is_public=True)
    assert Run.objects.get(pk=run.pk).state == "complete"
    UserFactory(username="mod", is_staff=True, password=PASSWORD)
    sign_in(page, username="mod")

    page.goto("/leaderboard/")
    expect(page.locator("main")).to_be_visible()
    expect(page.locator(f"#entry-{run.pk}")).to_have_count(0)

    page.goto(f"/runs/{run.pk}/")
    cell = page.locator("#task-row_softmax .cell-verdict")
    expect(cell).to_contain_text("needs review")
    expect(cell).to_contain_text("pkill -f q")
    hit = page.locator("#audit .scan-hit.rule-process-kill")
    expect(hit).to_contain_text("trace line 2")

    form = page.locator("#verdict-row_softmax")
    form.locator("summary").click()
    form.locator("select[name=verdict]").select_option("clean")
    form.locator("textarea[name=quote]").fill("pkill -f q")
    form.locator("input[name=line]").fill("2")
    form.locator("textarea[name=reason]").fill("It stopped its own job queue, not ours.")
    form.locator("button[type=submit]").click()

    expect(page).to_have_url(re.compile(rf".*/runs/{run.pk}/#task-row_softmax$"))
    expect(cell).to_contain_text("clean")
    expect(page.locator("#moderation .moderation-log")).to_contain_text("cell verdict")

    page.goto("/leaderboard/")
    entry = page.locator(f"#entry-{run.pk}")
    expect(entry).to_be_visible()
    expect(entry).to_contain_text("1 upload")

    # The deep link from the hit lands on the event in the trace viewer.
    page.goto(f"/runs/{run.pk}/")
    page.locator("#audit .scan-hit a").first.click()
    expect(page).to_have_url(re.compile(r".*/traces/row_softmax/\?page=0#line-2$"))
    expect(page.locator("#line-2")).to_contain_text("bash")

"""Every main page at 390 px wide (a phone held upright) in a real headless Chromium:
nothing makes the page scroll sideways; a wide table scrolls inside its own box.

The portal holds the catalog, the experts' baselines and the example pair of runs
(row_softmax only), so that every table and chart has rows; the folds of each page
are opened before it is measured. The pages are what is tested here, not the
evaluator: the evaluator CLI is the test stand-in, answering the widest verdict a
page shows (an H200's, with timings and counters) without spending minutes of CPU.
"""

from pathlib import Path

import pytest
from django.core.management import call_command

from leaderboard.documents import DOCUMENTS
from runs.models import Run
from runs.services import example_runs_load
from task_catalog.services import catalog_load
from tests.browser.support import MARKS, sideways_scroll, sign_up
from tests.evaluator.fake_cli import verdict_dict, workload_dict

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [*MARKS, pytest.mark.django_db(transaction=True)]

OPEN_FOLDS = "() => document.querySelectorAll('main details').forEach(d => { d.open = true; })"


def h200_verdict() -> dict:
    counters = {"dram_bytes": 33_554_432, "min_bytes": 33_554_432, "tool": "ncu 2025.1"}
    timed = [
        workload_dict(
            name,
            role="timed",
            timing={
                "median_ms": ms,
                "iqr_ms": ms / 50,
                "min_ms": ms * 0.98,
                "calls": 200,
                "ref_median_ms": ms * 1.7,
                "ref_iqr_ms": ms / 40,
                "ref_calls": 200,
                "cold_start_ms": 0.4,
            },
            sol_fraction=0.82,
            counters=counters,
        )
        for name, ms in (("bf16_8192x1024", 0.021), ("fp32_4096x4096", 0.049))
    ]
    checks = [
        workload_dict("check_bf16_8x256"),
        workload_dict("check_hidden_2", hidden=True),
    ]
    return verdict_dict(
        workloads=checks + timed,
        task="row_softmax",
        mode="cuda",
        environment={"gpu": "NVIDIA H200", "torch": "2.13.0+cu130", "triton": "3.5.0"},
    )


def main_pages(*, unguided: Run, guided: Run) -> list[str]:
    submission = guided.submissions.get(task__slug="row_softmax")
    return [
        "/",
        "/tasks/",
        "/tasks/row_softmax/",
        "/leaderboard/",
        "/leaderboard/paired/",
        "/leaderboard/charts/",
        "/leaderboard/matrix/",
        f"/leaderboard/compare/?a={unguided.pk}&b={guided.pk}",
        "/leaderboard/hacks/",
        "/scoring/",
        "/runs/",
        f"/runs/{guided.pk}/",
        f"/runs/{guided.pk}/traces/row_softmax/",
        f"/runs/{unguided.pk}/traces/row_softmax/?type=submit",
        f"/submissions/{submission.pk}/",
        "/submissions/mine/",
        "/submissions/new/",
        "/runs/new/",
        "/accounts/profile/",
        "/api/docs/",
        *(f"/docs/{slug}/" for slug in DOCUMENTS),
    ]


def test_every_main_page_is_usable_at_390_px_without_sideways_scroll(phone, fake_cli):
    from playwright.sync_api import expect

    fake_cli.reply(h200_verdict())
    catalog_load(directory=ROOT / "catalog")
    call_command("import_baselines", str(ROOT / "docs" / "baselines.json"), verbosity=0)
    unguided, guided = sorted(example_runs_load(tasks=["row_softmax"]), key=lambda r: r.levels)
    guided.refresh_from_db()
    assert guided.pair_id == unguided.pk

    phone.goto("/accounts/signup/")
    assert sideways_scroll(phone) is None
    sign_up(phone, username="narrow")
    phone.fill("input[name=name]", "phone")
    phone.click("form[action$='/profile/tokens/'] button[type=submit]")
    expect(phone.locator("#api-token")).to_be_visible()
    # The token is one long word: it wraps or scrolls in its box, not the page.
    problems = {"/accounts/profile/ (token issued)": sideways_scroll(phone)}

    for path in main_pages(unguided=unguided, guided=guided):
        response = phone.goto(path)
        assert response is not None and response.ok, f"{path}: {response and response.status}"
        phone.wait_for_load_state("networkidle")
        for chart in phone.locator("[data-figure]").all():
            expect(chart.locator(".main-svg").first).to_be_attached()
        phone.evaluate(OPEN_FOLDS)
        problems[path] = sideways_scroll(phone)

    # The widest tables were measured: the runs ranked on the H200, the timed verdict.
    phone.goto("/leaderboard/")
    board = phone.locator("table.leaderboard[data-hardware='NVIDIA H200']")
    expect(board.locator(f"#entry-{guided.pk}")).to_have_count(1)
    phone.goto(f"/submissions/{guided.submissions.get(task__slug='row_softmax').pk}/")
    expect(phone.locator("table.results th:text-is('counters')")).to_have_count(1)
    # The example's pages say so, the submission of an example run too.
    expect(phone.locator(".banner-example")).to_contain_text("Example data written by hand")
    wide = {path: found for path, found in problems.items() if found}
    assert not wide, "\n".join(f"{path}: {found}" for path, found in wide.items())

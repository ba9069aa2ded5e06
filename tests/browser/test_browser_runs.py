"""A run bundle uploaded through the web form, its kernels evaluated, its trace read.

In a real headless Chromium on the live server; the test settings evaluate each of
the bundle's kernels synchronously with the real evaluator (interpret mode).
"""

import io
import json
import re
import zipfile
from pathlib import Path

import pytest

from runs.examples import example_bundle_build
from runs.models import Run, Trace
from task_catalog.services import catalog_load
from tests.browser.support import MARKS, sign_up

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [*MARKS, pytest.mark.django_db(transaction=True)]


def damaged_bundle() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("manifest.json", json.dumps({"schema": 1, "levels": ["L9"]}))
        zf.writestr("kernels/no_such_task.py", "class ModelNew: pass\n")
    return buffer.getvalue()


def test_a_user_uploads_a_bundle_opens_its_trace_filters_it_and_jumps_to_the_final_kernel(
    page, tmp_path
):
    from playwright.sync_api import expect

    catalog_load(directory=ROOT / "catalog")
    sign_up(page, username="lab")
    page.click("header nav a:text-is('Upload a run')")
    expect(page).to_have_url("/runs/new/")

    # A damaged bundle: every problem at once, nothing stored.
    (tmp_path / "damaged.zip").write_bytes(damaged_bundle())
    page.set_input_files("input[name=bundle]", str(tmp_path / "damaged.zip"))
    page.click("main button[type=submit]")
    errors = page.locator(".bundle-errors")
    expect(errors).to_contain_text("nothing was stored")
    expect(errors).to_contain_text("no_such_task")
    expect(errors.locator("li")).not_to_have_count(0)
    assert errors.locator("li").count() >= 2
    assert not Run.objects.exists()

    # The example bundle for one task (example data written by hand).
    bundle = tmp_path / "run.zip"
    bundle.write_bytes(example_bundle_build(name="with_guidance", tasks=["row_softmax"]))
    page.set_input_files("input[name=bundle]", str(bundle))
    page.check("input[name=is_public]")
    page.click("main button[type=submit]")
    expect(page).to_have_url(re.compile(r".*/runs/\d+/$"))
    expect(page.locator(".messages")).to_contain_text("its kernels are queued")
    expect(page.locator(".banner-example")).to_contain_text("Example data written by hand")
    expect(page.locator("#run-state")).to_have_text("complete")
    row = page.locator("#task-row_softmax")
    expect(row.locator(".status").first).to_have_text("correct")
    run = Run.objects.get()
    trace = Trace.objects.get(run=run)

    row.locator("a[href$='/traces/row_softmax/']").click()
    expect(page).to_have_url(f"/runs/{run.pk}/traces/row_softmax/")
    expect(page.locator("h1")).to_contain_text("Trace · row_softmax")
    events = page.locator(".timeline .ev")
    expect(events).to_have_count(min(trace.event_count, 200))
    # Messages are folded to one line until expanded.
    expect(page.locator(".ev-message details").first).not_to_have_attribute("open", "")

    # Only the tool calls, then only the submissions, the last one marked final.
    page.select_option("select#event-type", "tool_call")
    page.click(".trace-filter button[type=submit]")
    expect(page).to_have_url(re.compile(r".*[?&]type=tool_call"))
    expect(events).to_have_count(min(trace.event_types["tool_call"], 200))
    assert set(events.evaluate_all("els => els.map(e => e.dataset.type)")) == {"tool_call"}
    page.select_option("select#event-type", "submit")
    page.click(".trace-filter button[type=submit]")
    expect(page).to_have_url(re.compile(r".*[?&]type=submit"))
    expect(events).to_have_count(trace.submit_count)
    expect(page.locator(".ev-final .final-mark")).to_have_text("the final kernel")

    page.click("a.jump-final")
    expect(page).to_have_url(re.compile(rf".*#line-{trace.final_submit_line}$"))
    final = page.locator(f"#line-{trace.final_submit_line}")
    expect(final).to_be_in_viewport()
    expect(final).to_have_class(re.compile(r"\bev-final\b"))
    expect(final).to_contain_text("the final kernel")
    # trace.js opened the event's folds: its diff and its source are readable.
    expect(final.locator("details").first).to_have_attribute("open", "")
    expect(final).to_contain_text("class ModelNew")

"""A trace is bounded however bad it is: the first PROBLEMS_KEPT problems are kept with
the count of all, the run API answers a summary with links, the pages page through
every line, and what is stored stays within a small multiple of the upload."""

import json
import random
import string
import tracemalloc

import pytest
from django.core.files.storage import default_storage

from runs.models import Run, Trace
from runs.traces import OTHER, PAGE_LINES, PROBLEMS_KEPT
from tests.runs.bundles import good_files, make_zip

pytestmark = pytest.mark.django_db

START = {"type": "start", "ts": 0, "task": "row_softmax", "condition": "none"}


def junk_trace(*, target_bytes: int, seed: int = 36) -> str:
    """Lines of about 1 KiB that all break the schema in three ways: not JSON, an event
    of a new unknown type each time, and a tool call with a new name and bad fields.
    Random letters, so that the zip is nearly as large as the trace."""
    rng = random.Random(seed)
    lines, size, n = [json.dumps(START)], 0, 0
    while size < target_bytes:
        junk = "".join(rng.choices(string.ascii_letters, k=900))
        n += 1
        if n % 3 == 0:
            line = "{not json " + junk
        elif n % 3 == 1:
            line = json.dumps({"type": f"t{n}-{junk[:80]}", "ts": "x", "junk": junk})
        else:
            line = json.dumps({"type": "tool_call", "ts": n, "name": f"tool{n}", "args": junk})
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


def _stored_bytes(trace: Trace) -> int:
    """The trace's file and its row's JSON values."""
    values = (trace.pages, trace.event_types, trace.problems, trace.tool_calls, trace.submit_lines)
    return trace.stored_bytes + sum(len(json.dumps(v)) for v in values)


@pytest.mark.slow  # about 25 s alone, 90 s on a busy host (tracemalloc slows it)
def test_a_12_mb_junk_trace_is_bounded_in_memory_storage_and_the_run_api(
    post, uploader, run_tasks, fake_cli, client, settings
):
    files = good_files("row_softmax")
    files["traces/row_softmax.jsonl"] = junk_trace(target_bytes=17 * 1024 * 1024)
    upload = make_zip(files)
    assert len(upload) > 12_000_000
    # Validated within the request (201), where its memory is measured.
    settings.D2K_RUN_SYNC_VALIDATION_BYTES = len(upload)

    tracemalloc.start()
    try:
        response = post(uploader, upload)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 201, response.content[:500]
    trace = Trace.objects.get()
    lines = trace.event_count
    print(
        f"\nupload {len(upload) / 2**20:.1f} MiB (trace {trace.raw_bytes / 2**20:.1f} MiB, "
        f"{lines:,} lines): peak Python memory {peak / 2**20:.0f} MiB"
    )
    # The zip, the trace unpacked, its lines and their types: a few times the trace.
    assert peak < 8 * trace.raw_bytes

    assert trace.problem_count == lines - 1  # every junk line breaks the schema
    assert len(trace.problems) == PROBLEMS_KEPT
    assert max(len(p["message"]) for p in trace.problems) <= 300
    assert len(trace.event_types) <= 6 + 2 + 20 and trace.event_types[OTHER] > 0
    assert len(trace.tool_calls) == 51
    stored = _stored_bytes(trace)
    print(f"stored {stored / 2**20:.1f} MiB = {stored / len(upload):.2f} × the upload")
    assert stored <= 2 * len(upload)

    run = Run.objects.get()
    api = client.get(f"/api/runs/{run.pk}/")
    assert api.status_code == 200
    print(f"GET /api/runs/{run.pk}/: {len(api.content):,} bytes")
    assert len(api.content) < 32 * 1024
    summary = api.json()["tasks"][0]["result"]["trace"]
    assert "problems" not in summary and summary["problem_count"] == trace.problem_count
    assert summary["api_url"].endswith(f"/api/runs/{run.pk}/traces/row_softmax/")

    # The pages page through everything, each line with its problem, kept or not.
    last = (lines - 1) // PAGE_LINES
    page = client.get(f"/api/runs/{run.pk}/traces/row_softmax/?page={last}").json()
    assert page["pages"] == last + 1 and page["events"]
    assert all(e["problem"] for e in page["events"] if e["type"] != "start")
    assert page["trace"]["problems"] == trace.problems
    others = client.get(f"/api/runs/{run.pk}/traces/row_softmax/?type={OTHER}").json()
    assert others["count"] == trace.event_types[OTHER] and len(others["events"]) == PAGE_LINES
    assert all(e["type"].startswith("t") for e in others["events"])
    html = client.get(f"/runs/{run.pk}/traces/row_softmax/?page={last}")
    assert html.status_code == 200
    assert client.get(f"/runs/{run.pk}/").status_code == 200
    assert default_storage.size(trace.file.name) == trace.stored_bytes

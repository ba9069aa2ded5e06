"""How fast does the trace viewer paint the first page of a 50 MB trace?

    python bench/trace_viewer.py [--mb 50] [--seed 15]

Generates a trace of the given size (deterministically from the seed: long
assistant messages, tool calls and results, a submit every 40 turns), uploads
it in a bundle through `run_create_from_bundle` exactly as the API does
(summary computed once, trace stored gzip-compressed in page members, on disk
in a temporary media root, SQLite in memory), then times requests of the trace
page through Django's test client: the first request, the first page again,
the last page, the page of the final kernel and a filtered page. Target for
the first page: under 1 s on a development machine.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "d2kportal.settings.test")

WORDS = [
    "tile",
    "block",
    "warp",
    "load",
    "store",
    "mask",
    "row",
    "column",
    "accumulate",
    "fp32",
    "bf16",
    "register",
    "shared",
    "memory",
    "HBM",
    "bandwidth",
    "occupancy",
    "stage",
    "pipeline",
    "softmax",
    "normalizer",
    "exp2",
    "reduce",
    "kernel",
    "launch",
    "grid",
    "program",
    "stride",
    "offset",
    "tail",
    "vector",
    "coalesced",
    "latency",
]


def trace_generate(*, megabytes: float, seed: int) -> tuple[bytes, str]:
    rnd = random.Random(seed)
    target = int(megabytes * 1024 * 1024)
    out = io.BytesIO()
    final = ""

    def line(event: dict) -> None:
        out.write(json.dumps(event).encode() + b"\n")

    line({"type": "start", "ts": 0, "task": "row_softmax", "condition": "none"})
    turn = 0
    while out.tell() < target:
        turn += 1
        text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(150, 600)))
        line(
            {
                "type": "message",
                "ts": turn,
                "turn": turn,
                "role": "assistant",
                "content": text,
                "tokens_in": rnd.randint(1000, 9000),
                "tokens_out": 300,
            }
        )
        line(
            {
                "type": "tool_call",
                "ts": turn,
                "turn": turn,
                "name": "run_tests",
                "arguments": {"workloads": "all"},
            }
        )
        output = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(20, 200)))
        line(
            {
                "type": "tool_result",
                "ts": turn,
                "turn": turn,
                "name": "run_tests",
                "ok": rnd.random() > 0.3,
                "output": output,
                "wall_time_s": 2.5,
            }
        )
        if turn % 40 == 0:
            final = f"class ModelNew:\n    BLOCK = {turn}\n" + "# notes\n" * 50
            line({"type": "submit", "ts": turn, "turn": turn, "source": final})
    line({"type": "end", "ts": turn + 1, "reason": "submitted", "turns_used": turn})
    return out.getvalue(), final


def timed(client, url: str) -> float:
    start = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - start
    assert response.status_code == 200, response.status_code
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()

    import django
    from django.conf import settings

    media = tempfile.mkdtemp(prefix="d2k-bench-media-")
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    }
    settings.MEDIA_ROOT = media
    settings.ALLOWED_HOSTS = ["testserver"]
    django.setup()
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()
    connection.creation.create_test_db(verbosity=0)

    from django.contrib.auth import get_user_model

    from runs.models import Run
    from runs.services import run_create_from_bundle
    from task_catalog.models import Task, TaskVersion

    task = Task.objects.create(slug="row_softmax", title="Row softmax", category="x", statement="")
    version = TaskVersion.objects.create(
        task=task, number=1, content_hash="0" * 64, reference_source="", tolerances={}
    )
    task.current_version = version
    task.save()
    owner = get_user_model().objects.create(username="bench")

    def upload(raw: bytes, final: str) -> tuple[Run, int]:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
            manifest = {"schema": 1, "model": "m", "agent": "a", "levels": [], "hardware": "cpu"}
            zf.writestr("manifest.json", json.dumps(manifest))
            zf.writestr("kernels/row_softmax.py", final)
            zf.writestr("traces/row_softmax.jsonl", raw)
        # The bench measures the viewer: the kernel's evaluation is not queued.
        with mock.patch("evaluator.services.evaluations.async_task"):
            run = run_create_from_bundle(owner=owner, data=buffer.getvalue())
        return run, len(buffer.getvalue())

    client = Client()
    # Warm the process (imports, templates, lexers) on a small trace, as a running
    # server is: what is timed below is the first render of the big trace.
    small, _ = upload(*trace_generate(megabytes=0.2, seed=args.seed + 1))
    cold = timed(client, f"/runs/{small.pk}/traces/row_softmax/")

    raw, final = trace_generate(megabytes=args.mb, seed=args.seed)
    start = time.perf_counter()
    run, bundle_bytes = upload(raw, final)
    upload_s = time.perf_counter() - start
    trace = run.traces.get()
    url = f"/runs/{run.pk}/traces/row_softmax/"
    first = timed(client, url)
    again = statistics.median(timed(client, url) for _ in range(5))
    last = statistics.median(timed(client, f"{url}?page={len(trace.pages) - 1}") for _ in range(3))
    final_page = trace.final_submit_line // 200
    jump = statistics.median(timed(client, f"{url}?page={final_page}") for _ in range(3))
    filtered = statistics.median(timed(client, f"{url}?type=submit&page=0") for _ in range(3))

    print(
        f"trace: {len(raw) / 2**20:.1f} MiB raw, {trace.event_count:,} events, "
        f"{len(trace.pages):,} pages; stored {trace.stored_bytes / 2**20:.1f} MiB gzip; "
        f"bundle {bundle_bytes / 2**20:.1f} MiB"
    )
    print(f"upload (validate, summarise, pack, store): {upload_s:.2f} s")
    print(f"a fresh process's first trace page (small trace): {cold * 1000:.0f} ms")
    print(f"first page, first request: {first * 1000:.0f} ms")
    print(f"first page, median of 5:   {again * 1000:.0f} ms")
    print(f"last page, median of 3:    {last * 1000:.0f} ms")
    print(f"final kernel's page:       {jump * 1000:.0f} ms")
    print(f"filtered (submit) page:    {filtered * 1000:.0f} ms")
    print(f"target < 1000 ms for the first page: {'met' if first < 1 else 'MISSED'}")


if __name__ == "__main__":
    main()

"""Two worker processes on the Redis broker share one queue: 50 uploads, each evaluated once.

The web server, both workers and the database (a SQLite file, or PostgreSQL where it
runs) are real processes, as in a deployment; the evaluator is the recording stand-in
of tests/evaluator/fake_cli.py (each call takes a moment, so the workers overlap), so
the test is about the queue, not about Triton's interpreter.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter

import pytest

from d2kportal.processes import Portal, postgres_up, redis_up
from tests.evaluator.fake_cli import FakeCli, verdict_dict

pytestmark = pytest.mark.slow

UPLOADS = 50
REDIS_DB = 15  # a database of its own on the shared Redis, emptied before and after
WAIT_S = 600


def _flush() -> None:
    import redis

    redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB).flushdb()


@pytest.fixture
def portal(tmp_path):
    if not redis_up():
        pytest.skip("no Redis on 127.0.0.1:6379")
    cli = FakeCli.install(tmp_path / "cli")
    cli.reply({"stdout": json.dumps(verdict_dict("correct")), "sleep": 0.2})
    _flush()
    portal = Portal(
        tmp_path,
        # The scale-out path: PostgreSQL where it runs (else a SQLite file).
        database="postgres" if postgres_up() else "sqlite",
        D2K_REDIS_URL=f"redis://127.0.0.1:6379/{REDIS_DB}",
        D2K_EVALUATOR_PYTHON=str(cli.script),
        D2K_REAP_INTERVAL_S="2",
    )
    portal.cli = cli
    try:
        portal.setup()
        yield portal
    finally:
        portal.close()
        _flush()


def test_two_workers_on_redis_evaluate_each_of_50_uploads_exactly_once(portal):
    portal.start_web()
    ids = []
    for index in range(UPLOADS):
        source = f"import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n# upload {index}\n"
        status, body = portal.upload(task="row_softmax", source=source)
        assert status == 201, body
        ids.append(body["id"])
    first, second = portal.start_worker(), portal.start_worker()

    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        rows = portal.evaluations()
        if len(rows) == UPLOADS and all(r["status"] == "correct" for r in rows):
            break
        time.sleep(2)
    else:
        pytest.fail(f"not all finished in {WAIT_S} s: {Counter(r['status'] for r in rows)}")

    assert first.poll() is None and second.poll() is None, portal.log("worker")
    assert sorted(r["submission_id"] for r in rows) == sorted(ids)
    assert all(r["attempts"] == 1 for r in rows)
    # Each upload reached the evaluator exactly once, and both workers took a share.
    calls = (portal.cli.directory / "calls.jsonl").read_text()
    marks = Counter(re.findall(r"# upload (\d+)", calls))
    assert sorted(marks) == sorted(str(i) for i in range(UPLOADS))
    assert set(marks.values()) == {1}
    workers = Counter(r["worker"] for r in rows)
    assert len(workers) == 2, workers

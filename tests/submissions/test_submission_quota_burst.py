"""Quotas hold under a burst: 20 parallel uploads of one owner stop exactly at each
limit, since each upload counts, in its own transaction and under the owner's lock,
every upload committed before it (submissions.quotas).

PostgreSQL only: the suite's SQLite database lives in memory, shared between threads
through a shared cache whose table locks answer at once instead of waiting, so it
cannot hold 20 concurrent writers. A file database in production takes them one at a
time (IMMEDIATE transactions)."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from core.quotas import QuotaExceeded
from evaluator.models import Evaluation
from submissions import quotas
from submissions.models import Submission
from submissions.services import submission_upload
from tests.factories import UserFactory

PARALLEL = 20
SOURCE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def _burst(user) -> list[int]:
    barrier = threading.Barrier(PARALLEL)

    def upload(n: int) -> int:
        barrier.wait()
        try:
            submission_upload(owner=user, task="row_softmax", source=f"{SOURCE}# {n:02d}\n")
        except QuotaExceeded:
            return 429
        finally:
            connection.close()
        return 201

    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(upload, range(PARALLEL)))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("limit", ["uploads per day", "queued evaluations", "stored bytes"])
def test_20_parallel_uploads_stop_exactly_at_the_limit(
    eval_task_version, settings, monkeypatch, limit
):
    if connection.vendor != "postgresql":
        pytest.skip("needs concurrent writers: run with D2K_TEST_DATABASE_URL (PostgreSQL)")
    # The evaluations stay queued: nothing drains the queue during the burst.
    monkeypatch.setattr("evaluator.services.evaluations.evaluation_enqueue", lambda **kw: None)
    # Each upload dawdles between its insert and its count, as a big one does: without
    # the owner's lock every upload of the burst would count only itself.
    enforce = quotas.quota_enforce

    def slow_enforce(**kwargs):
        time.sleep(0.2)
        enforce(**kwargs)

    monkeypatch.setattr("submissions.services.quota_enforce", slow_enforce)
    # Every insert also bumps the pages' cache version, one row for everyone, which
    # would make uploads take turns on its own: the owner's lock must do it alone.
    monkeypatch.setattr("scoring.services.version.scores_version_bump", lambda: "burst")
    settings.D2K_QUOTA_UPLOADS_PER_DAY = 7 if limit == "uploads per day" else 1000
    settings.D2K_QUOTA_QUEUED_EVALUATIONS = 5 if limit == "queued evaluations" else 1000
    size = len(f"{SOURCE}# 00\n")
    settings.D2K_QUOTA_STORED_BYTES = 3 * size if limit == "stored bytes" else 10**9
    allowed = {"uploads per day": 7, "queued evaluations": 5, "stored bytes": 3}[limit]
    user = UserFactory()

    codes = _burst(user)

    assert sorted(codes) == [201] * allowed + [429] * (PARALLEL - allowed), codes
    assert Submission.objects.filter(owner=user).count() == allowed
    assert Evaluation.objects.filter(submission__owner=user).count() == allowed

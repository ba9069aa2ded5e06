"""No evaluation is lost or stuck: a real web server and worker, uploads in a burst, a
SIGKILL of the worker mid-evaluation, a restart; on PostgreSQL where it runs, else
on a SQLite file (`D2K_SCENARIO_DATABASE=sqlite` forces SQLite).

Every evaluation must end exactly once with the verdict its kernel deserves, the
killed one with a second attempt, and nothing of the killed worker may survive it
(its evaluator, its sandboxed child, its scratch folder). Waits are generous and
bounded: a slow machine makes this test slow, never wrong. The subject is the queue,
so the portal's catalog is row_softmax with its smallest public and hidden check
workloads (tests/small_checks.py): real evaluations, a few seconds each.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from d2kportal.processes import (
    ROOT,
    Portal,
    pids_alive,
    postgres_up,
    process_tree,
)
from taskformat.package import load_task
from taskformat.spec import Mode
from tests.evaluator.test_services import TAIL_DROPPING_KERNEL
from tests.small_checks import catalog_with_smallest_checks

pytestmark = pytest.mark.slow

EXPERT = (ROOT / "catalog" / "row_softmax" / "expert.py").read_text()
# The burst: one evaluation running at the kill, the others queued behind it.
KERNELS = 6
WAIT_S = 900  # for all seven interpret-mode evaluations on a busy 2-core machine


def _kernel(index: int) -> tuple[str, str]:
    """Alternately the expert and a kernel that drops the tail; each file distinct."""
    source, verdict = (EXPERT, "correct") if index % 2 == 0 else (TAIL_DROPPING_KERNEL, "incorrect")
    return f"{source}\n# upload {index}\n", verdict


def _sandboxed_children(pids: set[int]) -> set[int]:
    """The evaluator's sandboxed children (evaluator.harness.child) among `pids`."""
    found = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"evaluator.harness.child" in fh.read():
                    found.add(pid)
        except OSError:
            continue
    return found


def _wait_for(predicate, *, timeout: float, what: str, every: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


@pytest.fixture
def portal(tmp_path):
    catalog = catalog_with_smallest_checks(tmp_path / "catalog", tasks=["row_softmax"])
    # PostgreSQL where it runs (the production database; its row locks and skip_locked
    # are the harder case), else a SQLite file (WAL, immediate transactions).
    portal = Portal(
        tmp_path,
        database=os.environ.get("D2K_SCENARIO_DATABASE")
        or ("postgres" if postgres_up() else "sqlite"),
        # Short leases so that a lost worker on another host would be noticed fast too,
        # and a short wait before the wake-up calls the killed cluster held are sent again.
        D2K_EVALUATION_LEASE_S="8",
        D2K_EVALUATION_REQUEUE_S="10",
        D2K_REAP_INTERVAL_S="2",
        D2K_EVALUATOR_TIMEOUT="600",
        D2K_CATALOG_DIR=str(catalog),
    )
    # One result per check workload of that row_softmax in interpret mode.
    task = load_task(catalog / "row_softmax")
    portal.checks = len(task.workloads_for(Mode.INTERPRET)) + task.hidden.count(Mode.INTERPRET)
    try:
        portal.setup()
        yield portal
    finally:
        portal.close()


def test_a_killed_worker_loses_nothing_and_leaves_nothing_behind(portal):
    portal.start_web()
    worker = portal.start_worker()
    expected: dict[int, str] = {}
    for index in range(KERNELS):
        source, verdict = _kernel(index)
        status, body = portal.upload(task="row_softmax", source=source)
        assert status == 201, body
        expected[body["id"]] = verdict
        # The page of a queued submission is served while the worker writes.
        assert portal.get(f"/submissions/{body['id']}/")[0] == 200

    # Kill the worker while an evaluation is running, its sandboxed child at work.
    def running():
        rows = [e for e in portal.evaluations() if e["status"] == "running"]
        return rows and _sandboxed_children(process_tree(worker.pid)) and rows[0]

    _wait_for(running, timeout=WAIT_S, what="an evaluation running in its sandbox", every=0.2)
    tree = process_tree(worker.pid)
    assert len(tree) >= 4, "the worker, its cluster and an evaluator"
    os.kill(worker.pid, signal.SIGKILL)
    _wait_for(lambda: not pids_alive(tree), timeout=60, what="the killed worker's tree to die")
    # The victim is the row the dead worker left running (nothing else can move it now;
    # the one seen running before the kill may have finished in between).
    [victim] = [e for e in portal.evaluations() if e["status"] == "running"]
    stale = list((portal.directory / "work").iterdir())

    restarted = time.monotonic()
    portal.start_worker()
    again = _wait_for(
        lambda: next(
            (e for e in portal.evaluations() if e["pk"] == victim["pk"] and e["attempts"] >= 2),
            None,
        ),
        timeout=WAIT_S,
        what="the killed evaluation to be taken again",
    )
    recovery_s = time.monotonic() - restarted
    assert recovery_s < 120, f"taken again {recovery_s:.0f} s after the restart"
    assert again["worker"] != victim["worker"]

    def all_finished():
        rows = portal.evaluations()
        return all(e["status"] not in ("queued", "running") for e in rows) and rows

    rows = _wait_for(all_finished, timeout=WAIT_S, what="every evaluation to finish", every=3)
    by_submission = {}
    for row in rows:
        assert row["submission_id"] not in by_submission, "one evaluation per submission"
        by_submission[row["submission_id"]] = row
    assert set(by_submission) == set(expected)
    for submission_id, verdict in expected.items():
        row = by_submission[submission_id]
        assert row["status"] == verdict, (row, portal.log("worker")[-3000:])
        assert len(row["results"]) == len(set(row["results"])) == portal.checks, row
    assert by_submission[victim["submission_id"]]["attempts"] == 2
    assert sum(r["attempts"] for r in rows) == KERNELS + 1, "only the killed one ran twice"
    assert not any(path.exists() for path in stale), "the dead worker's folders are removed"
    assert "database is locked" not in portal.log("worker") + portal.log("web")
    print(f"recovery: the killed evaluation was taken again {recovery_s:.1f} s after the restart")

    portal.close()
    assert not portal.leftovers()

"""No evaluation is lost or stuck: a real web server and worker, uploads in a burst, a
SIGKILL of the worker mid-evaluation, a restart; on PostgreSQL where it runs, else
on a SQLite file (`D2K_SCENARIO_DATABASE=sqlite` forces SQLite).

Every evaluation must end exactly once with the verdict its kernel deserves, the
killed one with a second attempt, and nothing of the killed worker may survive it
(its evaluator, its sandboxed child, its scratch folder). Waits are generous and
bounded: a slow machine makes this test slow, never wrong. The subject is the queue,
so the portal's catalog is row_softmax with its smallest public and hidden check
workloads (tests/small_checks.py): real evaluations, a few seconds each.

The same holds for a GPU worker that runs several evaluations at once
(`evaluation_worker --gpu 0` with D2K_EVALUATIONS_PER_GPU): a fake nvidia-smi on its
PATH names GPU 0, so it binds as on a GPU host, while interpret mode needs no GPU.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

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
# The GPU worker's pool, and its evaluations at once on its one GPU.
H200 = "NVIDIA H200"
PER_GPU = 3


class ScenarioPortal(Portal):
    """The portal of these tests: `checks`, the results each evaluation must have."""

    checks = 0


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


def _evaluators_in_sandbox(tree: set[int]) -> set[int]:
    """The evaluator processes (`-m evaluator check`) of `tree` with a sandboxed child at
    work: one per evaluation in its sandbox, however many processes its child has."""
    found = set()
    for pid in tree:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                evaluator = b"-m\0evaluator\0check\0" in fh.read()
        except OSError:
            continue
        if evaluator and _sandboxed_children(process_tree(pid) - {pid}):
            found.add(pid)
    return found


def _scratch_of(portal: ScenarioPortal, pids: set[int]) -> list[Path]:
    """The evaluations' scratch folders the processes `pids` made (`<host>-<pid>-eval…`)."""
    prefixes = tuple(f"{socket.gethostname()}-{pid}-eval" for pid in pids)
    work = portal.directory / "work"
    return [path for path in work.iterdir() if path.name.startswith(prefixes)]


def _started(pids: set[int]) -> set[tuple[int, str]]:
    """Each live process of `pids` (not a zombie) with its start time: the same pid
    taken again by a later process (pid_max may be 32768) is not the same process."""
    found = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            found.add((pid, fields[19]))
    return found


def _fake_smi(folder: Path) -> dict[str, str]:
    """A worker's PATH with an nvidia-smi that names GPU 0 an H200 (the query gpu_detect
    makes) and finds no GPU for anything else, as the driver of a host without one."""
    folder.mkdir()
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1 $2 $3" = "-i 0 --query-gpu=name,uuid" ]; then\n'
        f'  echo "{H200}, GPU-00000000-1111-2222-3333-444444444444"; exit 0\n'
        "fi\n"
        'echo "No devices were found" >&2; exit 6\n'
    )
    script.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


def _upload_burst(portal: ScenarioPortal) -> dict[int, str]:
    """KERNELS uploads at once: {submission id: the verdict its kernel deserves}."""
    expected: dict[int, str] = {}
    for index in range(KERNELS):
        source, verdict = _kernel(index)
        status, body = portal.upload(task="row_softmax", source=source)
        assert status == 201, body
        expected[body["id"]] = verdict
        # The page of a queued submission is served while the worker writes.
        assert portal.get(f"/submissions/{body['id']}/")[0] == 200
    return expected


def _verdicts(portal: ScenarioPortal, expected: dict[int, str]) -> dict[int, dict]:
    """Once every evaluation has ended: one row per submission, each with the verdict its
    kernel deserves and one result per check. The rows by submission id."""

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
    assert "database is locked" not in portal.log("worker") + portal.log("web")
    return by_submission


def _portal(tmp_path: Path, **settings: str) -> Iterator[ScenarioPortal]:
    catalog = catalog_with_smallest_checks(tmp_path / "catalog", tasks=["row_softmax"])
    # PostgreSQL where it runs (the production database; its row locks and skip_locked
    # are the harder case), else a SQLite file (WAL, immediate transactions).
    portal = ScenarioPortal(
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
        **settings,
    )
    # One result per check workload of that row_softmax in interpret mode.
    task = load_task(catalog / "row_softmax")
    portal.checks = len(task.workloads_for(Mode.INTERPRET)) + task.hidden.count(Mode.INTERPRET)
    try:
        portal.setup()
        yield portal
    finally:
        portal.close()


@pytest.fixture
def portal(tmp_path):
    yield from _portal(tmp_path)


@pytest.fixture
def gpu_portal(tmp_path):
    """Every evaluation goes to the H200 pool, whose worker runs PER_GPU at once."""
    yield from _portal(
        tmp_path,
        D2K_HARDWARE_POOLS=H200,
        D2K_DEFAULT_HARDWARE=H200,
        D2K_EVALUATIONS_PER_GPU=str(PER_GPU),
    )


def test_a_killed_worker_loses_nothing_and_leaves_nothing_behind(portal):
    portal.start_web()
    worker = portal.start_worker()
    expected = _upload_burst(portal)

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

    by_submission = _verdicts(portal, expected)
    assert by_submission[victim["submission_id"]]["attempts"] == 2
    attempts = sum(r["attempts"] for r in by_submission.values())
    assert attempts == KERNELS + 1, "only the killed one ran twice"
    assert not any(path.exists() for path in stale), "the dead worker's folders are removed"
    print(f"recovery: the killed evaluation was taken again {recovery_s:.1f} s after the restart")

    portal.close()
    assert not portal.leftovers()


def test_a_killed_gpu_worker_running_several_evaluations_loses_none_of_them(gpu_portal):
    portal = gpu_portal
    portal.start_web()
    smi_path = _fake_smi(portal.directory / "bin")
    worker = portal.start_worker("--gpu", "0", env=smi_path)
    expected = _upload_burst(portal)

    # Kill the worker while several evaluations run side by side, each in its sandbox
    # (read from /proc, fast: a child at work means its row is running).
    def several_in_sandbox():
        tree = process_tree(worker.pid)
        return len(_evaluators_in_sandbox(tree)) >= 2 and tree

    tree = _wait_for(
        several_in_sandbox, timeout=WAIT_S, what="two evaluations in their sandbox", every=0.1
    )
    killed = _started(tree)
    os.kill(worker.pid, signal.SIGKILL)
    _wait_for(lambda: not pids_alive(tree), timeout=60, what="the killed worker's tree to die")
    assert f"serves the {H200} pool on GPU 0" in portal.log("worker")
    # The victims: the rows the dead worker left running, each in a process of its own.
    victims = {e["pk"]: e for e in portal.evaluations() if e["status"] == "running"}
    assert len(victims) >= 2, victims
    dead = {int(e["worker"].rpartition(":")[2]) for e in victims.values()}
    assert len(dead) == len(victims) and dead <= tree, (victims, tree)
    stale = _scratch_of(portal, tree)
    assert len(stale) >= len(victims), stale

    portal.start_worker("--gpu", "0", env=smi_path)
    by_submission = _verdicts(portal, expected)
    rows = {e["pk"]: e for e in by_submission.values()}
    for pk, victim in victims.items():
        assert rows[pk]["attempts"] == 2, rows[pk]
        assert rows[pk]["worker"] != victim["worker"]
    attempts = sum(e["attempts"] for e in rows.values())
    assert attempts == KERNELS + len(victims), "only the killed ones ran twice"
    assert not any(path.exists() for path in stale), "the dead worker's folders are removed"
    assert not killed & _started(tree), "nothing of the dead worker runs again"
    assert portal.log("worker").count(f"serves the {H200} pool on GPU 0") == 2
    print(f"{len(victims)} evaluations killed at once, each taken again and judged once")

    portal.close()
    assert not portal.leftovers()

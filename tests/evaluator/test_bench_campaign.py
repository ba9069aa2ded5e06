"""bench/gpu_campaign.py end to end in interpret mode on two tasks: both runs uploaded
through the API, paired as twins, every evaluation finished, and a summary whose figures
are those of the portal's own rows.

The portal's catalog keeps the two tasks' smallest check workloads (tests/small_checks.py):
the subject is the campaign's plumbing, not the kernels. The first call ends at once and
leaves its worker running (`--deadline-s 0 --keep-workers`), the second watches that
worker to the last verdict, the third prints the stored summary. No figure is compared
with a clock: the limits are generous and only bound a hang.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.bench_scripts import bench_script
from tests.small_checks import catalog_with_smallest_checks

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_campaign.py"
TASKS = ["row_softmax", "transpose_2d"]
WAIT_S = 1800  # four interpret-mode evaluations on a busy 2-core machine


def _when(stamp: str) -> datetime:
    """A datetime column as Django stores it in SQLite (UTC, without an offset)."""
    return datetime.fromisoformat(stamp).replace(tzinfo=UTC)


def _campaign(directory: Path, *args: str) -> str:
    """One call of the script on `directory`, its portal on the small catalog beside it."""
    env = {**os.environ, "D2K_CATALOG_DIR": str(directory.parent / "catalog")}
    argv = [sys.executable, str(SCRIPT), str(directory), "--mode", "interpret", *args]
    proc = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=WAIT_S, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture
def directory(tmp_path):
    """A fresh DIR; the workers a failed call left running are stopped afterwards."""
    catalog_with_smallest_checks(tmp_path / "catalog", tasks=TASKS)
    directory = tmp_path / "campaign"
    try:
        yield directory
    finally:
        state_path = directory / "state.json"
        alive = bench_script("gpu_run_bundle").worker_alive
        pids = json.loads(state_path.read_text()).get("workers", []) if state_path.exists() else []
        for pid in [pid for pid in pids if alive(pid, directory)]:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 60
            while alive(pid, directory) and time.monotonic() < deadline:
                time.sleep(1)


def test_a_paired_campaign_is_uploaded_evaluated_and_summarised_from_the_portals_rows(
    directory,
):
    tasks = ",".join(TASKS)
    first = _campaign(directory, "--tasks", tasks, "--deadline-s", "0", "--keep-workers")
    second = _campaign(directory, "--deadline-s", str(WAIT_S))
    again = _campaign(directory)

    state = json.loads((directory / "state.json").read_text())
    without, with_guidance = state["runs"]["without"], state["runs"]["with"]
    assert "keep running for the next call" in first
    assert "4 of 4 evaluations finished" in second

    # Both runs came in through POST /api/runs/, one after the other: each is what an
    # answer of the API named (the web server's own log may lose its last line when the
    # server is stopped right after the answer).
    uploads = state["uploads"]
    assert [(u["side"], u["run"]) for u in uploads] == [
        ("without", without),
        ("with", with_guidance),
    ]
    for upload in uploads:
        assert upload["url"].endswith(f"/runs/{upload['run']}/")
    assert uploads[0]["answered_at"] <= uploads[1]["posted_at"]

    db = sqlite3.connect(directory / "db.sqlite3")
    runs = {
        pk: (created, pair, condition, model, agent, notes)
        for pk, created, pair, condition, model, agent, notes in db.execute(
            "SELECT id, created_at, pair_id, condition, model, agent, notes FROM runs_run"
        )
    }
    assert sorted(runs) == sorted([without, with_guidance])
    owners = db.execute(
        "SELECT DISTINCT u.username FROM runs_run r JOIN auth_user u ON r.owner_id = u.id"
    ).fetchall()
    assert owners == [("lab-bot",)], "the owner of the token the uploads sent"
    # Twins: one without guidance, one with L1-L3, of one model and agent, each the
    # other's pair.
    assert runs[without][1:3] == (with_guidance, "none")
    assert runs[with_guidance][1:3] == (without, "L1+L2+L3")
    assert runs[without][3:5] == runs[with_guidance][3:5]
    assert all("benchmark check" in run[5] and "not an agent" in run[5] for run in runs.values())

    evaluations = db.execute(
        "SELECT s.run_id, t.slug, s.source, e.status, e.started_at, e.finished_at"
        " FROM evaluator_evaluation e JOIN submissions_submission s ON e.submission_id = s.id"
        " JOIN task_catalog_task t ON s.task_id = t.id"
    ).fetchall()
    assert sorted((run, slug) for run, slug, *_ in evaluations) == sorted(
        (run, slug) for run in (without, with_guidance) for slug in TASKS
    )
    naive = ROOT / "tests" / "catalog" / "negatives"
    for run, slug, source, _status, _started, finished in evaluations:
        kernel = naive / f"{slug}.py" if run == without else ROOT / "catalog" / slug / "expert.py"
        assert source == kernel.read_text()
        assert finished is not None

    complete = state["complete"]
    first_upload = min(_when(run[0]) for run in runs.values())
    last_verdict = max(_when(e[5]) for e in evaluations)
    wall = (last_verdict - first_upload).total_seconds()
    own = sum((_when(e[5]) - _when(e[4])).total_seconds() for e in evaluations)
    assert complete["runs"] == {"without": without, "with": with_guidance}
    assert complete["paired"] is True
    assert complete["evaluations"] == 4
    assert complete["wall_s"] == round(wall, 1)
    assert complete["wall_per_evaluation_s"] == round(wall / 4, 2)
    assert complete["evaluations_s"] == round(own, 1)
    assert complete["first_upload_at"] == first_upload.isoformat()
    assert complete["last_verdict_at"] == last_verdict.isoformat()
    for side, run_id in complete["runs"].items():
        statuses = [e[3] for e in evaluations if e[0] == run_id]
        assert complete["verdicts"][side] == {s: statuses.count(s) for s in set(statuses)}
        headline = complete["headline"][side]
        assert headline["id"] == run_id
        assert headline["state"] == "complete"
        assert headline["correct"] == statuses.count("correct")
    assert complete["headline"]["without"]["pair"] == with_guidance
    assert complete["headline"]["with"]["pair"] == without
    assert complete["meets_wall"] == (wall <= 20 * 60)
    # The kept worker ran the campaign from start to end.
    assert complete["worker_segments"] == 1

    assert f"run {without} without guidance" in again
    assert "twins in the portal: yes" in again
    assert "4 evaluations" in again

    # Each run's verdicts exported from the portal's rows, with the design properties it
    # assessed: the naive side is what bench/baselines_md.py --naive reads.
    exported = _campaign(directory, "--export", str(directory / "export"))
    assert "without.json" in exported and "with.json" in exported
    for side, run_id in complete["runs"].items():
        verdicts = json.loads((directory / "export" / f"{side}.json").read_text())
        statuses = {slug: status for run, slug, _, status, *_ in evaluations if run == run_id}
        assert {slug: v["status"] for slug, v in verdicts.items()} == statuses
        keys = {p["key"] for v in verdicts.values() for p in v["properties"]}
        assert keys, "the portal's property assessments travel with each verdict"

"""`d2k submit-run --wait` and `d2k run --wait`: following a run's evaluations to the end.

A live portal evaluates synchronously in tests, so a run is complete by the time its upload
answers; the waiting itself is tested against a fake API that answers `GET /api/runs/7/`
with canned states in turn (the last one repeats)."""

import json
import time

import pytest

from tests.client.fake_api import NOT_FOUND, FakeApi, json_reply
from tests.evaluator.fake_cli import verdict_dict
from tests.runs.bundles import good_files, make_zip

RUN_ID = 7


def _run(state, *statuses):
    """A run as GET /api/runs/<id>/ answers, one kernel per status, and one catalog task
    the run left out (no kernel, no evaluation)."""
    tasks = [
        {
            "task": f"task_{i}",
            "result": {
                "status": status,
                "is_finished": status not in ("queued", "running"),
                "speedup": 1.5 if status == "correct" else None,
                "submission": 100 + i,
            },
            "pair_result": None,
        }
        for i, status in enumerate(statuses)
    ]
    left_out = {"status": "missing", "is_finished": False, "speedup": None, "submission": None}
    tasks.append({"task": "left_out", "result": left_out, "pair_result": None})
    return {
        "id": RUN_ID,
        "url": f"http://portal.test/runs/{RUN_ID}/",
        "owner": "cli-user",
        "model": "model-x",
        "agent": "agent-y",
        "condition": "none",
        "state": state,
        "example_label": None,
        "tasks": tasks,
    }


@pytest.fixture
def fake_runs():
    """`fake_runs(*runs)`: a fake API whose POST /api/runs/ creates run 7 and whose
    GET /api/runs/7/ answers each of `runs` in turn."""
    fakes = []

    def start(*replies):
        left = list(replies)

        def answer(method, path, query):
            if method == "POST" and path == "/api/runs/":
                return json_reply({"id": RUN_ID, "url": f"http://portal.test/runs/{RUN_ID}/"}, 201)
            if method == "GET" and path == f"/api/runs/{RUN_ID}/":
                return json_reply(left.pop(0) if len(left) > 1 else left[0])
            return NOT_FOUND

        fake = FakeApi(answer)
        fakes.append(fake)
        return fake

    yield start
    for fake in fakes:
        fake.close()


@pytest.fixture
def bundle(tmp_path):
    path = tmp_path / "myrun.zip"
    path.write_bytes(make_zip(good_files("row_softmax")))
    return path


def _looks(fake):
    return [path for method, path, _ in fake.requests if method == "GET"]


def test_submit_run_wait_follows_until_every_evaluation_has_finished(d2k, fake_runs, bundle):
    api = fake_runs(
        _run("evaluating", "queued", "queued"),
        _run("evaluating", "correct", "running"),
        _run("complete", "correct", "correct"),
    )
    result = d2k("--server", api.url, "submit-run", str(bundle), "--wait", "--poll-interval", "0.1")
    assert result.exit_code == 0, result.output
    assert [m for m, _, _ in api.requests] == ["POST", "GET", "GET", "GET"]
    assert result.stdout.startswith(f"Run {RUN_ID}: http://portal.test/runs/{RUN_ID}/\n")
    # Then the run as `d2k run` prints it.
    assert f"Run {RUN_ID} · model-x / agent-y · condition none · complete" in result.stdout
    assert "task_1" in result.stdout and "left_out" in result.stdout
    # The progress display's last look: finished/total (the left-out task is no evaluation)
    # and the tally per status.
    assert "run 7 complete" in result.stderr
    assert "2/2" in result.stderr and "correct 2" in result.stderr


def _progress(position, eta, *, running=0):
    return {
        "total": 2, "finished": 0, "running": running, "waiting": 2 - running,
        "hardware": "NVIDIA H200", "queue_position": position, "eta_seconds": eta,
        "per_evaluation_s": 23.4, "slots": 3,
        "basis": "no live worker for this pool" if eta is None else "throughput of 50 verdicts",
    }  # fmt: skip


def test_wait_shows_the_queue_position_and_the_time_to_the_last_verdict(d2k, fake_runs, bundle):
    waiting = [
        {**_run("evaluating", "queued", "queued"), "progress": _progress(8, None)},
        {**_run("evaluating", "queued", "queued"), "progress": _progress(8, 540)},
        {**_run("evaluating", "queued", "queued"), "progress": _progress(8, 540)},
        {**_run("evaluating", "running", "queued"), "progress": _progress(0, 100, running=1)},
    ]
    api = fake_runs(*waiting, {**_run("complete", "correct", "correct"), "progress": None})
    result = d2k("--server", api.url, "submit-run", str(bundle), "--wait", "--poll-interval", "0.1")
    assert result.exit_code == 0, result.output
    # Off a terminal, one plain line each time the estimate moves.
    assert result.stderr.count("run 7: ") == 3, result.stderr
    assert (
        "run 7: 0/2 finished · 8 ahead in the NVIDIA H200 queue · no estimate yet: no live "
        "worker for this pool\n"
    ) in result.stderr
    assert (
        "run 7: 0/2 finished · 8 ahead in the NVIDIA H200 queue · about 9 min to the last "
        "verdict (measured: 23 s per evaluation, 3 at once)\n"
    ) in result.stderr
    assert (
        "run 7: 0/2 finished · being evaluated on the NVIDIA H200 pool (1 running) · about 2 "
        "min to the last verdict"
    ) in result.stderr


def test_a_portal_without_progress_is_followed_as_before(d2k, fake_runs, bundle):
    api = fake_runs(_run("evaluating", "queued"), _run("complete", "correct"))
    result = d2k("--server", api.url, "submit-run", str(bundle), "--wait", "--poll-interval", "0.1")
    assert result.exit_code == 0, result.output
    assert "run 7: " not in result.stderr and "to the last verdict" not in result.stderr


def test_the_tally_counts_each_status_verdicts_first(d2k, fake_runs, bundle):
    api = fake_runs(
        _run("evaluating", "queued", "running", "correct", "timeout"),
        _run("complete", "correct", "correct", "correct", "timeout"),
    )
    result = d2k("--server", api.url, "submit-run", str(bundle), "--wait", "--timeout", "0")
    # The first look is all there was time for: what stood then, and exit status 4.
    assert result.exit_code == 4, result.output
    assert "2/4" in result.stderr
    assert "correct 1 · timeout 1 · running 1 · queued 1" in result.stderr


@pytest.mark.parametrize("verdict", ["incorrect", "compile_error", "flagged", "worker_error"])
def test_an_evaluation_finished_other_than_correct_exits_3(d2k, fake_runs, bundle, verdict):
    api = fake_runs(
        _run("evaluating", "correct", "running"),
        _run("complete", "correct", verdict),
    )
    result = d2k("--server", api.url, "submit-run", str(bundle), "--wait", "--poll-interval", "0.1")
    assert result.exit_code == 3, result.output
    assert verdict in result.stdout and "complete" in result.stdout
    assert f"correct 1 · {verdict} 1" in result.stderr


def test_wait_with_json_prints_only_the_final_run_on_stdout(d2k, fake_runs, bundle):
    final = _run("complete", "correct", "incorrect")
    api = fake_runs(_run("evaluating", "queued", "queued"), final)
    result = d2k(
        "--server", api.url, "submit-run", str(bundle), "--wait", "--json", "--poll-interval", "0.1"
    )
    assert result.exit_code == 3, result.output
    assert json.loads(result.stdout) == final
    assert len(_looks(api)) == 2


def test_wait_gives_up_after_the_timeout_with_exit_4_and_says_how_to_go_on(d2k, fake_runs, bundle):
    still = _run("evaluating", "correct", "queued")
    api = fake_runs(still)
    started = time.monotonic()
    result = d2k(
        "--server",
        api.url,
        "submit-run",
        str(bundle),
        "--wait",
        "--json",
        "--timeout",
        "0.5",
        "--poll-interval",
        "0.1",
    )
    took = time.monotonic() - started
    assert result.exit_code == 4, result.output
    assert 0.5 <= took < 5
    assert len(_looks(api)) >= 3
    # The run as last seen, then one line: how far it got and the command that follows on.
    assert json.loads(result.stdout) == still
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("d2k:")]
    assert line == (
        f"d2k: run {RUN_ID} is still evaluating after 0.5 s (1/2 finished). "
        f"Follow it again with: d2k --server {api.url} run {RUN_ID} --wait"
    )


def test_ctrl_c_while_waiting_leaves_the_run_and_says_how_to_resume(
    d2k, fake_runs, bundle, monkeypatch
):
    api = fake_runs(_run("evaluating", "queued", "queued"))

    def interrupted(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr("d2k_client.follow.time.sleep", interrupted)
    result = d2k("--server", api.url, "submit-run", str(bundle), "--wait")
    assert result.exit_code == 130, result.output
    # Uploaded once, looked at once, nothing withdrawn.
    assert [m for m, _, _ in api.requests] == ["POST", "GET"]
    assert result.stdout.startswith(f"Run {RUN_ID}: ")
    assert "it stays uploaded and its evaluations go on" in result.stderr
    assert f"d2k --server {api.url} run {RUN_ID} --wait" in result.stderr


def test_run_wait_follows_an_uploaded_run(d2k, fake_runs):
    api = fake_runs(_run("evaluating", "running"), _run("complete", "correct"))
    result = d2k("--server", api.url, "run", str(RUN_ID), "--wait", "--poll-interval", "0.1")
    assert result.exit_code == 0, result.output
    assert [m for m, _, _ in api.requests] == ["GET", "GET"]
    assert f"Run {RUN_ID} · model-x" in result.stdout and "1/1" in result.stderr
    # Without --wait it prints the run as it stands, whatever its verdicts.
    plain = d2k("--server", api.url, "run", str(RUN_ID), "--json")
    assert plain.exit_code == 0 and json.loads(plain.stdout)["state"] == "complete"


@pytest.mark.parametrize("option", [["--timeout", "5"], ["--poll-interval", "1"]])
def test_the_waiting_options_go_with_wait(d2k, fake_runs, bundle, option):
    api = fake_runs(_run("complete"))
    result = d2k("--server", api.url, "submit-run", str(bundle), *option)
    assert result.exit_code == 1
    assert f"d2k: error: {option[0]} goes with --wait" in result.stderr
    assert api.requests == []


def test_submit_run_wait_against_the_portal(portal, d2k, tmp_path, fake_cli):
    # Kernels are evaluated in slug order: layernorm_fwd, then row_softmax.
    fake_cli.reply(verdict_dict(), verdict_dict("incorrect"))
    bundle = tmp_path / "myrun.zip"
    bundle.write_bytes(make_zip(good_files("row_softmax", "layernorm_fwd")))
    result = d2k("submit-run", str(bundle), "--wait", "--json")
    assert result.exit_code == 3, result.output
    detail = json.loads(result.stdout)
    assert detail["state"] == "complete"
    assert {t["task"]: t["result"]["status"] for t in detail["tasks"]} == {
        "layernorm_fwd": "correct",
        "row_softmax": "incorrect",
    }


def test_the_tally_reads_whether_an_evaluation_finished_from_the_portal():
    from d2k_client.follow import run_tally

    run = _run("evaluating", "correct", "running", "queued")
    # a queue state the client does not know: the portal says it has not finished
    run["tasks"][1]["result"].update(status="profiling", is_finished=False)

    tally = run_tally(run)

    assert (tally.finished, tally.total, tally.not_correct) == (1, 3, 0)
    # an older portal without is_finished: the known queue states
    for item in run["tasks"]:
        item["result"].pop("is_finished")
    assert run_tally(run).finished == 2

"""The sandbox: the parent's reader of the result pipe (caps per line and in all, what each
breach does), and what of the project the child sees (the harness and the task format).
"""

import json
import os
import threading
import time
import types
from pathlib import Path

import pytest

from evaluator.harness import decision, isolation, launch, resultpipe, sandbox
from evaluator.harness.job import Plan
from evaluator.harness.protocol import Dealer
from evaluator.harness.verdict import Status
from taskformat.package import DEFAULT_CATALOG_DIR, load_task

TASK = load_task(DEFAULT_CATALOG_DIR / "row_softmax")


def test_a_line_past_the_cap_is_one_malformed_message_and_reading_goes_on(monkeypatch):
    monkeypatch.setattr(resultpipe, "MAX_LINE_BYTES", 1000)
    run = sandbox.ChildRun(returncode=None)
    reader = resultpipe.Reader(-1, run)
    # The long line arrives in three chunks, the last of which ends it and holds the next lines.
    reader._take(b'{"event": "hello"}\n{"event": "junk", "x": "' + b"y" * 600)
    reader._take(b"y" * 600)
    reader._take(b'"}\n{"event": "ready"}\n{"event": "do')
    reader._take(b'ne"}\n')
    assert [m["event"] for _, m in run.messages] == ["hello", "ready", "done"]
    assert run.bad_messages == 1


def test_a_request_after_an_over_long_line_is_still_answered(monkeypatch):
    monkeypatch.setattr(resultpipe, "MAX_LINE_BYTES", 1000)
    read_fd, write_fd = os.pipe()
    reply_read, reply_write = os.pipe()
    run = sandbox.ChildRun(returncode=None)
    reader = resultpipe.Reader(read_fd, run, lambda request: {"seed": 7}, reply_write)
    reader.start()
    os.write(write_fd, b"z" * 5000 + b"\n")
    os.write(write_fd, json.dumps({"event": "ask", "what": "seed"}).encode() + b"\n")
    with os.fdopen(reply_read, "rb") as replies:
        assert json.loads(replies.readline()) == {"seed": 7}
    os.close(write_fd)
    reader.join(timeout=10)
    os.close(reply_write)
    assert run.bad_messages == 1 and [m["event"] for _, m in run.messages] == ["ask"]


def test_nesting_past_the_parser_s_depth_is_a_malformed_message_not_a_dead_reader():
    run = sandbox.ChildRun(returncode=None)
    reader = resultpipe.Reader(-1, run)
    reader._take(b"[" * 100_000 + b"\n" + b'{"event": "hello"}\n')
    assert run.bad_messages == 1 and [m["event"] for _, m in run.messages] == ["hello"]


def run_script(script: str, tmp_path: Path) -> sandbox.ChildRun:
    """`python -c script FD` in the sandbox, FD being the result pipe's."""
    return sandbox.run_child(
        python_args=["-c", script, "{fd}"],
        workdir=tmp_path,
        task_dir=(DEFAULT_CATALOG_DIR / "row_softmax").resolve(),
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)},
        limits=sandbox.Limits(timeout_s=120),
        gpu=False,
    )


FLOOD = "import os, sys\nwhile True:\n    os.write(int(sys.argv[1]), b'x' * 65535 + b'\\n')\n"


class _StarvedEvent(threading.Event):
    """An event whose waiter, once it is set, is scheduled late: a watch thread on a busy host."""

    def wait(self, timeout=None):
        woken = super().wait(timeout)
        if woken:
            time.sleep(1.0)
        return woken


def test_a_flood_is_the_child_s_even_when_it_ends_first(monkeypatch, tmp_path: Path):
    # On a busy host the child can end on the pipe the reader closed before the watch
    # looks again: the verdict must not depend on which came first.
    monkeypatch.setattr(resultpipe, "MAX_CHANNEL_BYTES", 8 * 2**20)
    monkeypatch.setattr(
        resultpipe, "threading", types.SimpleNamespace(Thread=threading.Thread, Event=_StarvedEvent)
    )
    run = run_script(FLOOD, tmp_path)
    assert "BrokenPipeError" in run.log  # it did end first
    assert run.killed_for == "result_channel", run.log[-2000:]


def test_a_child_that_floods_the_result_pipe_is_killed_at_once(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(resultpipe, "MAX_CHANNEL_BYTES", 8 * 2**20)
    run = run_script(FLOOD, tmp_path)
    assert run.killed_for == "result_channel", run.log[-2000:]
    assert run.wall_seconds < 30
    assert resultpipe.MAX_CHANNEL_BYTES < run.channel_bytes <= resultpipe.MAX_CHANNEL_BYTES + 65536

    # The verdict: flagged, and the message says why the process ended.
    dealer = Dealer((), seeds=TASK.seeds)
    seen = launch.collect(run, Plan(workloads=(), steps=(), seeds=TASK.seeds), dealer)
    assert "killed" in " ".join(f["detail"] for f in seen.flags)
    status, message = decision.decide(run, seen, [], 1, task=TASK)
    assert status is Status.FLAGGED
    assert message.startswith("honesty check fired: result_channel (then killed for writing")


HONEST = (
    "import json, os, sys\n"
    "for n in range(2000):\n"
    "    os.write(int(sys.argv[1]), json.dumps({'event': 'hello', 'n': n}).encode() + b'\\n')\n"
)


def test_an_honest_child_s_messages_all_arrive(tmp_path: Path):
    run = run_script(HONEST, tmp_path)
    assert run.killed_for == "" and run.returncode == 0, run.log
    assert [m["n"] for _, m in run.messages] == list(range(2000)) and run.bad_messages == 0


# Imports the child's own modules and the profiling child's (counters.py reads the task
# format's types), then reports where they came from and what /d2k holds.
PROBE = """
import json, os, sys
import evaluator.harness.child, evaluator.harness.counters, taskformat.package
files = {name: sys.modules[name].__file__ for name in
         ("evaluator.harness.child", "evaluator.harness.counters", "taskformat.spec")}
root = "/d2k"
listing = sorted(os.listdir(root)) if os.path.isdir(root) else None
print("PROBE " + json.dumps({"files": files, "d2k": listing,
                             "task": sorted(os.listdir(sys.argv[1]))}))
"""


def _binds(argv: list[str]) -> dict[str, str]:
    """Each bind's destination and source, from a bubblewrap command line."""
    kinds = ("--ro-bind", "--ro-bind-try", "--bind", "--dev-bind")
    return {argv[i + 2]: argv[i + 1] for i, arg in enumerate(argv) if arg in kinds}


def test_bubblewrap_binds_the_harness_and_the_task_format_and_no_other_project_folder(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("D2K_SANDBOX", "bwrap")
    task_dir, workdir = tmp_path / "task", tmp_path / "work"
    argv, _, level = isolation.sandbox_command(
        python_args=["-c", "pass"], workdir=workdir, task_dir=task_dir, env={}, gpu=False
    )
    assert level == "bwrap"
    binds = _binds(argv)
    under_d2k = {dest: src for dest, src in binds.items() if dest.startswith("/d2k")}
    root = isolation.HARNESS_ROOT
    assert under_d2k == {
        "/d2k/evaluator": str(root / "evaluator"),
        "/d2k/taskformat": str(root / "taskformat"),
        "/d2k/task": str(task_dir),
        "/d2k/work": str(workdir),
    }
    assert str(root) not in binds.values()
    assert str(root / "catalog") not in binds.values()
    assert argv[argv.index("PYTHONPATH") + 1] == "/d2k"


@pytest.mark.slow
def test_the_sandboxed_child_imports_the_harness_and_the_task_format(tmp_path: Path):
    task_dir, workdir = tmp_path / "task", tmp_path / "work"
    task_dir.mkdir()
    workdir.mkdir()
    (task_dir / "reference.py").write_text("# the reference alone: no task.toml\n")
    seen = isolation.layout(workdir, task_dir)
    run = sandbox.run_child(
        python_args=["-c", PROBE, seen.task],
        workdir=workdir,
        task_dir=task_dir,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": seen.work, "TMPDIR": seen.work},
        limits=sandbox.Limits(timeout_s=120),
        gpu=False,
    )
    log = run.log
    assert run.returncode == 0, log
    probe = json.loads(log.split("PROBE ", 1)[1])
    assert probe["task"] == ["reference.py"]
    if run.isolation == "bwrap":
        assert probe["d2k"] == ["evaluator", "task", "taskformat", "work"]
        assert all(f.startswith("/d2k/") for f in probe["files"].values()), probe["files"]
    else:
        root = str(isolation.HARNESS_ROOT)
        assert all(f.startswith(root) for f in probe["files"].values()), probe["files"]

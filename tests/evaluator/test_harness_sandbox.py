"""The parent's reader of the result pipe: caps per line and in all, and what each breach does."""

import json
import os
from pathlib import Path

from evaluator.harness import orchestrate, sandbox
from evaluator.harness.job import Plan
from evaluator.harness.package import DEFAULT_CATALOG_DIR, load_task
from evaluator.harness.protocol import Dealer
from evaluator.harness.spec import Status

TASK = load_task(DEFAULT_CATALOG_DIR / "row_softmax")


def test_a_line_past_the_cap_is_one_malformed_message_and_reading_goes_on(monkeypatch):
    monkeypatch.setattr(sandbox, "MAX_LINE_BYTES", 1000)
    run = sandbox.ChildRun(returncode=None)
    reader = sandbox._Reader(-1, run)
    # The long line arrives in three chunks, the last of which ends it and holds the next lines.
    reader._take(b'{"event": "hello"}\n{"event": "junk", "x": "' + b"y" * 600)
    reader._take(b"y" * 600)
    reader._take(b'"}\n{"event": "ready"}\n{"event": "do')
    reader._take(b'ne"}\n')
    assert [m["event"] for _, m in run.messages] == ["hello", "ready", "done"]
    assert run.bad_messages == 1


def test_a_request_after_an_over_long_line_is_still_answered(monkeypatch):
    monkeypatch.setattr(sandbox, "MAX_LINE_BYTES", 1000)
    read_fd, write_fd = os.pipe()
    reply_read, reply_write = os.pipe()
    run = sandbox.ChildRun(returncode=None)
    reader = sandbox._Reader(read_fd, run, lambda request: {"seed": 7}, reply_write)
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
    reader = sandbox._Reader(-1, run)
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
        log_path=tmp_path / "child.log",
        gpu=False,
    )


FLOOD = "import os, sys\nwhile True:\n    os.write(int(sys.argv[1]), b'x' * 65535 + b'\\n')\n"


def test_a_child_that_floods_the_result_pipe_is_killed_at_once(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(sandbox, "MAX_CHANNEL_BYTES", 8 * 2**20)
    run = run_script(FLOOD, tmp_path)
    assert run.killed_for == "result_channel", (tmp_path / "child.log").read_text()[-2000:]
    assert run.wall_seconds < 30
    assert sandbox.MAX_CHANNEL_BYTES < run.channel_bytes <= sandbox.MAX_CHANNEL_BYTES + 65536

    # The verdict: flagged, and the message says why the process ended.
    dealer = Dealer((), seeds=TASK.seeds)
    seen = orchestrate._collect(run, Plan(workloads=(), steps=(), seeds=TASK.seeds), dealer)
    assert "killed" in " ".join(f["detail"] for f in seen.flags)
    status, message = orchestrate._decide(run, seen, [], 1, task=TASK)
    assert status is Status.FLAGGED
    assert message.startswith("honesty check fired: result_channel (then killed for writing")


HONEST = (
    "import json, os, sys\n"
    "for n in range(2000):\n"
    "    os.write(int(sys.argv[1]), json.dumps({'event': 'hello', 'n': n}).encode() + b'\\n')\n"
)


def test_an_honest_child_s_messages_all_arrive(tmp_path: Path):
    run = run_script(HONEST, tmp_path)
    assert run.killed_for == "" and run.returncode == 0, (tmp_path / "child.log").read_text()
    assert [m["n"] for _, m in run.messages] == list(range(2000)) and run.bad_messages == 0

"""What every sandboxed child gets from the orchestrator, whatever the submission did first.

- No child imports a module the submission wrote: each starts with no writable
  folder on sys.path, in a fresh scratch folder of its own.
- The owner's log is what the parent read from the child's pipe before the
  first hidden workload was dealt.
- An exception's type reaches the owner only if the parent knows the class.
- The scratch folder has a limit; /tmp's files count as memory (test_exploits, 44).
- A SIGKILL from outside the evaluation is the worker's fault, never the submitter's;
  the submission cannot send one (killguard).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from evaluator.exploits.cases import KERNELS_DIR
from evaluator.harness import (
    childlog,
    cleanreference,
    decision,
    isolation,
    killguard,
    launch,
    orchestrate,
    proctree,
    redact,
    sandbox,
    watchdog,
)
from evaluator.harness.job import TimingSettings
from evaluator.harness.reports import parse_error
from evaluator.harness.verdict import Status
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Mode

ROOT = Path(__file__).resolve().parents[2]
TASK = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
EXPERT = DEFAULT_CATALOG_DIR / "row_softmax" / "expert.py"


def _levels() -> list:
    bwrap = pytest.mark.skipif(
        not isolation._bwrap_works(), reason="bubblewrap does not work on this machine"
    )
    return [pytest.param("bwrap", marks=bwrap), "process"]


def harness_imports() -> set[str]:
    """Every top-level module the harness and the task format import, read from their source."""
    names = {"evaluator", "taskformat", "sitecustomize", "usercustomize"}
    for package in ("evaluator", "taskformat"):
        for path in (ROOT / package).rglob("*.py"):
            if path.is_relative_to(KERNELS_DIR.parent):
                continue  # the exploit corpus: kernels, not the harness
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names


def _public_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "task"
    folder.mkdir()
    launch.public_package(TASK, folder)
    return folder


def _child(source: str, workdir: Path, public_dir: Path, *, clean: bool = False):
    workloads = launch.planned_workloads(TASK.workloads_for(Mode.INTERPRET), Mode.INTERPRET)
    dealer = launch.dealer_for(TASK, workloads, TimingSettings(), clean=clean)
    run = launch.run_harness_child(
        TASK, source, Mode.INTERPRET, dealer, TimingSettings(), workdir, public_dir, 600, None,
        clean=clean,
    )  # fmt: skip
    return run, launch.collect(run, dealer.record(), dealer)


@pytest.mark.slow
@pytest.mark.parametrize("level", _levels())
def test_no_child_imports_a_module_the_submission_planted(level, tmp_path, monkeypatch):
    monkeypatch.setenv("D2K_SANDBOX", level)
    public_dir = _public_dir(tmp_path)
    scratch = sandbox.scratch_folder()
    try:
        # The submission plants a package under every name the harness imports, then runs.
        run, seen = _child((KERNELS_DIR / "40_planted_modules.py").read_text(), scratch, public_dir)
        assert seen.done and seen.error is None, run.log[-3000:]
        for name in harness_imports():
            assert (scratch / name / "__init__.py").is_file(), f"{name} was not planted"

        # A child started in that very folder imports none of them (no writable sys.path entry)...
        run, seen = _child("", scratch, public_dir, clean=True)
        assert seen.done and seen.error is None, run.log[-3000:]
        # ...and the clean reference starts in a folder of its own.
        clean = cleanreference.clean_reference_times(
            TASK, Mode.INTERPRET, TimingSettings(), public_dir, 600, None
        )
        assert clean.problem == ""
        assert not list(scratch.rglob("exploit-40-loaded")), "a planted module was imported"
        assert "planted module" not in run.log
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# -- the owner's log ---------------------------------------------------------------------


def test_the_public_log_is_what_the_pipe_held_at_the_mark():
    log = childlog.ChildLog()
    read_fd, write_fd = os.pipe()
    log.attach(read_fd)
    os.write(write_fd, b"before the mark\n")
    assert log.mark() == len(b"before the mark\n")  # read at the mark, whatever the thread did
    os.write(write_fd, b"after the mark: the drawn shape 333x70001\n")
    os.close(write_fd)
    log.close()
    assert log.public() == "before the mark\n"
    assert log.text() == "before the mark\nafter the mark: the drawn shape 333x70001\n"


def test_a_long_log_keeps_its_head_and_tail_and_says_how_much_was_cut():
    log = childlog.ChildLog()
    read_fd, write_fd = os.pipe()
    log.attach(read_fd)
    with os.fdopen(write_fd, "wb") as out:
        out.write(b"H" * childlog.LOG_LIMIT + b"x" * 100_000 + b"T" * childlog.LOG_LIMIT)
    log.close()
    text = log.text()
    cut = 100_000 + childlog.LOG_LIMIT
    assert text.startswith("H" * (childlog.LOG_LIMIT // 2)) and text.endswith("T" * 100)
    assert f"[{cut} bytes cut]" in text and len(text) < childlog.LOG_LIMIT + 100


@pytest.mark.slow
def test_the_child_s_rewrite_of_its_log_head_after_the_hidden_mark_reaches_no_owner():
    verdict = orchestrate.evaluate(
        task=TASK, source=(KERNELS_DIR / "42_rewrite_log_head.py").read_text(), mode=Mode.INTERPRET
    )
    assert verdict.status is Status.CORRECT, verdict.message
    hidden = [w.params for w in TASK.workloads_for(Mode.INTERPRET) if w.hidden]
    assert "exploit-42: call 1" in verdict.public_log
    for params in hidden:
        assert f"{params['rows']}x{params['cols']}" not in verdict.public_log
    assert "exploit-42 shapes" not in verdict.log  # the rewrite never landed


# -- exception types -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reported", "shown"),
    [
        ("ValueError: rows=3 cols=40000", "ValueError"),
        ("torch.OutOfMemoryError: CUDA out of memory", "torch.OutOfMemoryError"),
        ("triton.compiler.errors.CompilationError: at 3:4", "triton.compiler.errors.Compil"),
        ("Shape_3x40000: leaked", "an exception of the submission's own class"),
        ("d2k_submission.Shape_3x40000: leaked", "an exception of the submission's own class"),
        ("torch.Shape_3x40000: leaked", "an exception of the submission's own class"),
        ("no colon at all 3x40000", "an exception of the submission's own class"),
    ],
)
def test_a_hidden_workload_s_exception_type_is_named_only_from_the_parent_s_list(reported, shown):
    message = redact.error_message(reported)
    assert message.startswith(shown) and "40000" not in message


def test_after_the_hidden_mark_every_error_is_redacted_whatever_workload_it_names():
    error = parse_error(
        {"kind": "runtime_error", "workload": "check_bf16_8x256", "message": "X: 3x40000"}
    )
    status, message = decision.error_status(error, TASK, hidden_dealt=True)
    assert status is Status.RUNTIME_ERROR and "40000" not in message
    status, message = decision.error_status(error, TASK, hidden_dealt=False)
    assert message == "X: 3x40000 (workload check_bf16_8x256)"


def test_a_worker_error_naming_a_tool_the_worker_has_is_the_submission_s(tmp_path, monkeypatch):
    """What the child reports is written in the submission's process: a claim that the
    worker lacks a tool stands only where the parent finds no such tool on the child's PATH."""
    claim = "RuntimeError: Ninja is required to load C++ extensions"
    tools = tmp_path / "bin"
    tools.mkdir()
    monkeypatch.setattr(isolation, "child_path", lambda: str(tools))
    assert decision.refuted_claim(claim) == ""  # no ninja there: the worker's fault
    (tools / "ninja").write_text("#!/bin/sh\n")
    (tools / "ninja").chmod(0o755)
    assert "lacks ninja, which it has" in decision.refuted_claim(claim)
    # The longer name is not read as its suffix, nor the other way round.
    (tools / "g++").write_text("#!/bin/sh\n")
    (tools / "g++").chmod(0o755)
    assert decision.refuted_claim("sh: x86_64-linux-gnu-g++: not found") == ""
    assert "lacks g++" in decision.refuted_claim("sh: 1: g++: not found")


# -- resources -----------------------------------------------------------------------------


FILL_SCRATCH = (
    "import time\n"
    "with open('big', 'wb') as fh:\n"
    "    for _ in range(40):\n"
    "        fh.write(b'x' * 2**20)\n"
    "time.sleep(60)\n"
)


def _fill_scratch(tmp_path: Path, scratch_bytes: int) -> sandbox.ChildRun:
    """FILL_SCRATCH run under a scratch-folder limit of `scratch_bytes`."""
    return sandbox.run_child(
        python_args=["-c", FILL_SCRATCH],
        workdir=sandbox.scratch_folder(),
        task_dir=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        limits=sandbox.Limits(timeout_s=120, scratch_bytes=scratch_bytes),
        gpu=False,
    )


@pytest.mark.parametrize("level", _levels())
def test_a_child_filling_its_scratch_folder_is_killed_for_it(level, tmp_path, monkeypatch):
    monkeypatch.setenv("D2K_SANDBOX", level)
    run = _fill_scratch(tmp_path, 16 * 2**20)
    assert run.killed_for == "scratch", run.log
    assert run.wall_seconds < 60
    status, message = decision.killed_status(run) or (None, "")
    assert status is Status.OUT_OF_MEMORY and "scratch folder" in message


def test_a_scratch_folder_the_disk_stopped_within_the_common_limit_is_the_workers_fault(
    tmp_path, monkeypatch
):
    """Other evaluations' folders share the disk: where half its free space, not the limit
    every evaluation has, stopped the child, the verdict must not be the submission's (on
    the H200, two moe_permute kernels were killed at 1.8 GiB beside two fused_adamw)."""
    free = 32 * 2**20
    real = shutil.disk_usage
    monkeypatch.setattr(watchdog.shutil, "disk_usage", lambda p: real(p)._replace(free=free))
    run = _fill_scratch(tmp_path, 64 * 2**20)
    assert run.killed_for == "scratch", run.log
    assert run.scratch_limit_bytes == free // 2 and run.scratch_policy_bytes == 64 * 2**20
    status, message = decision.killed_status(run) or (None, "")
    assert status is Status.WORKER_ERROR, message
    assert "room for 0.0 GiB" in message and "within the 0.1 GiB" in message
    assert "fault of the worker" in message


# Writes into its scratch folder (its working directory), then never returns.
FILL_THEN_HANG = """
import os, time
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        with open("left-behind.bin", "wb") as fh:
            fh.write(b"x" * 2**20)
        os.makedirs("locked/deep", exist_ok=True)
        open("locked/deep/file", "w").close()
        os.chmod("locked", 0)
        while True:
            time.sleep(1)
"""


@pytest.mark.slow
@pytest.mark.parametrize("level", _levels())
def test_an_evaluation_whose_child_the_watchdog_kills_leaves_no_scratch_folder(
    level, tmp_path, monkeypatch
):
    monkeypatch.setenv("D2K_SANDBOX", level)
    temp = tmp_path / "temp"  # where every scratch folder of the evaluation is made
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    verdict = orchestrate.evaluate(
        task=TASK, source=FILL_THEN_HANG, mode=Mode.INTERPRET, timeout_s=30
    )
    assert verdict.status is Status.TIMEOUT, verdict.message
    assert verdict.environment["peak_scratch_mib"] >= 1, "the child wrote its file"
    assert list(temp.iterdir()) == []


def _run_for(script: str, tmp_path: Path, timeout_s: float) -> sandbox.ChildRun:
    return sandbox.run_child(
        python_args=["-c", script],
        workdir=sandbox.scratch_folder(),
        task_dir=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        limits=sandbox.Limits(timeout_s=timeout_s),
        gpu=False,
    )


@pytest.mark.slow
def test_time_spent_waiting_for_a_cpu_is_not_counted_against_the_time_limit(tmp_path):
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(3 * (os.cpu_count() or 1))
    ]
    try:
        busy = _run_for("while True: pass", tmp_path, 3)
        idle = _run_for("import time; time.sleep(60)", tmp_path, 3)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    # A busy child on a host busier still: killed once it has run for the limit, the
    # wall time less the time it waited for a CPU.
    if busy.cpu_wait_seconds <= 0.5:
        # In a container held to a CPU quota, contention shows as the cgroup's throttling,
        # which the scheduler's per-thread wait (/proc/.../schedstat) does not count.
        pytest.skip(f"this host shows {busy.cpu_wait_seconds:.2f} s of run-queue wait under load")
    assert busy.killed_for == "timeout", busy
    cap = 3 * sandbox.Limits().max_wall_factor
    assert busy.wall_seconds <= cap + 2
    status, message = decision.killed_status(busy) or (None, "")
    assert status is Status.TIMEOUT
    if busy.wall_capped:
        # So busy a host that the child had not run for its limit by twice the limit in
        # wall time: the cap ends it, and the message says so.
        assert busy.wall_seconds >= cap and busy.wall_seconds - busy.cpu_wait_seconds < 3
        assert "the most an evaluation may take on a busy host" in message, message
    else:
        assert busy.wall_seconds - busy.cpu_wait_seconds >= 3
        # The message says so from a second of waiting on (less is noise).
        said = "waiting for a CPU, not counted" in message
        assert said == (busy.cpu_wait_seconds >= 1), message
    # Either way the wait was not counted: the child ran past its limit in wall time.
    assert busy.wall_seconds > 3 + 0.5
    # Sleeping is the child's own time: killed at the limit.
    assert idle.killed_for == "timeout" and idle.wall_seconds < 3 + 2.5, idle


# -- SIGKILL -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("snippet", "ends"),
    [
        ("import os; os.kill(os.getpid(), 9)", "PermissionError"),
        ("import subprocess; p = subprocess.Popen(['sleep', '9']); p.kill()", "PermissionError"),
        ("import resource; resource.setrlimit(resource.RLIMIT_CPU, (1, 2))", "ValueError"),
        ("import os; os._exit(137)", -signal.SIGSYS),
        ("import os; os._exit(3)", 3),
        ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", -signal.SIGTERM),
    ],
)
def test_the_kill_guard_leaves_sigkill_to_the_outside(snippet, ends):
    code = killguard.program()
    if code is None:
        pytest.skip("no seccomp filter for this architecture")
    proc = subprocess.run(
        [sys.executable, "-c", f"import resource; {snippet}"],
        preexec_fn=lambda: killguard.install(code),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if isinstance(ends, str):
        assert proc.returncode == 1 and ends in proc.stderr, proc.stderr
    else:
        assert proc.returncode == ends, proc.stderr


def test_no_filter_is_made_for_an_unknown_architecture():
    assert killguard.program("riscv64") is None
    assert len(killguard.program("x86_64") or b"") % 8 == 0


def _child_pid(root: int) -> int | None:
    """The sandboxed interpreter running the harness child under the CLI `root`."""
    for pid in proctree.descendants(root):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv[0].endswith(b"bwrap") and b"evaluator.harness.child" in b" ".join(argv):
            return pid
    return None


@pytest.mark.slow
@pytest.mark.parametrize("level", _levels())
def test_a_sigkill_from_outside_is_a_worker_error_not_the_submitter_s(level):
    cli = subprocess.Popen(
        [sys.executable, "-m", "evaluator", "check", "--task", "row_softmax", "--mode",
         "interpret", "--json", str(EXPERT)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "D2K_SANDBOX": level},
    )  # fmt: skip
    deadline, child = time.monotonic() + 240, None
    while child is None and time.monotonic() < deadline and cli.poll() is None:
        child = _child_pid(cli.pid)
        time.sleep(0.2)
    assert child is not None, "the harness child never started"
    time.sleep(1.0)  # well into the evaluation
    os.kill(child, signal.SIGKILL)
    out, _ = cli.communicate(timeout=300)
    verdict = json.loads(out)
    assert verdict["status"] == "worker_error", verdict["message"]
    assert "SIGKILL from outside the evaluation" in verdict["message"]
    assert "not of the submission" in verdict["message"]

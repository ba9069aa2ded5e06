"""The standalone evaluator CLI, end to end on the CPU (interpret mode), as issue #2 specifies."""

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from evaluator.exploits.cases import KERNELS_DIR
from taskformat.hidden import SECRET_ENV, task_with_hidden
from taskformat.package import (
    DEFAULT_CATALOG_DIR,
    load_task,
    measured_content,
    measured_content_hash,
)
from taskformat.spec import Mode, TaskSpec

ROOT = Path(__file__).resolve().parents[2]
EXPERT = ROOT / "catalog" / "row_softmax" / "expert.py"
NO_TAIL = KERNELS_DIR / "14_fixed_block_no_tail.py"

pytestmark = pytest.mark.slow


# This file's deployment secret: the CLI draws the hidden workloads with it, as a worker's does.
SECRET = "d2k-test-harness-cli-secret"


def run_cli(
    *args: str, timeout: float = 300, secret: str | None = SECRET
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    if secret is not None:
        env[SECRET_ENV] = secret
    return subprocess.run(
        [sys.executable, "-m", "evaluator", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def check(path: Path, *extra: str) -> dict:
    proc = run_cli(
        "check", "--task", "row_softmax", "--mode", "interpret", "--json", *extra, str(path)
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def drawn_row_softmax(secret: str = SECRET) -> TaskSpec:
    return task_with_hidden(load_task(DEFAULT_CATALOG_DIR / "row_softmax"), secret=secret)


def processes_with(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                found.append(cmdline)
    return found


def test_expert_is_correct_with_the_full_verdict_shape():
    verdict = check(EXPERT)
    assert verdict["status"] == "correct", verdict["message"]
    assert set(verdict) >= {"status", "message", "flags", "workloads", "environment", "log"}
    checks = drawn_row_softmax().workloads_for(Mode.INTERPRET)
    assert [w["name"] for w in verdict["workloads"]] == [w.name for w in checks]
    assert [w["status"] for w in verdict["workloads"]] == ["correct"] * len(checks)
    assert any(w["hidden"] for w in verdict["workloads"])
    # Hidden rows are named by number and carry no parameters.
    hidden = [w for w in verdict["workloads"] if w["hidden"]]
    assert [w["name"] for w in hidden] == [f"check_hidden_{i}" for i in range(1, len(hidden) + 1)]
    assert not any("params" in w for w in verdict["workloads"])
    assert verdict["environment"]["mode"] == "interpret"
    assert verdict["environment"]["comparable"] is False
    # Interpret mode times nothing: only the child ran (no clean reference, no counters).
    assert set(verdict["environment"]["phase_seconds"]) == {"child", "judge", "counters"}
    assert verdict["environment"]["phase_seconds"]["child"] > 0
    stages = verdict["environment"]["child_stages"]
    assert set(stages) == {"start", "setup", "timing", "checks", "exit"}
    assert stages["timing"] == 0  # interpret mode times nothing
    assert 0 < sum(stages.values()) <= verdict["environment"]["phase_seconds"]["child"] + 0.05
    assert all(w["median_ms"] is None for w in verdict["workloads"])
    task = load_task(ROOT / "catalog" / "row_softmax")
    assert verdict["task_hash"] == measured_content_hash(measured_content(task))


def test_kernel_that_drops_the_row_tail_fails_on_the_hidden_shape_named_for_staff_only():
    verdict = check(NO_TAIL)
    assert verdict["status"] in ("incorrect", "runtime_error")
    # The owner's message says a hidden workload failed, not which one nor its
    # shape; the workload's row, shown to staff, says which.
    assert "hidden workload" in verdict["message"]
    # The first interpret draw has rows of a prime number of columns: no block divides them.
    [long_rows] = [w for w in drawn_row_softmax().workloads if w.name == "check_hidden_1"]
    assert str(long_rows.params["cols"]) not in verdict["message"]
    rows = {w["name"]: w for w in verdict["workloads"]}
    assert rows["check_hidden_1"]["status"] != "correct"
    assert rows["check_hidden_1"]["hidden"] is True


def test_without_a_secret_the_cli_runs_the_public_workloads_and_says_so():
    proc = run_cli(
        "check", "--task", "row_softmax", "--mode", "interpret", str(EXPERT), secret=None
    )
    assert proc.returncode == 0, proc.stderr
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    public = [w.name for w in task.workloads_for(Mode.INTERPRET)]
    assert f"correct on all {len(public)} workloads" in proc.stdout
    assert "hidden workloads: drawn by the server" in proc.stdout
    assert "check_hidden" not in proc.stdout
    # No parameters of what any secret would draw: the drawn numbers appear nowhere.
    for secret in (SECRET, "another-deployment"):
        for w in drawn_row_softmax(secret).workloads:
            if w.hidden and w.params["cols"] >= 100:
                assert f"{w.params['rows']}x{w.params['cols']}" not in proc.stdout
                assert str(w.params["cols"]) not in proc.stdout

    as_json = run_cli(
        "check", "--task", "row_softmax", "--mode", "interpret", "--json", str(EXPERT), secret=None
    )
    verdict = json.loads(as_json.stdout)
    assert [w["name"] for w in verdict["workloads"]] == public
    assert not any(w["hidden"] for w in verdict["workloads"])
    assert "hidden workloads: drawn by the server" in as_json.stderr


def test_syntax_error_is_a_compile_error_with_its_line(tmp_path):
    kernel = tmp_path / "broken.py"
    kernel.write_text("import torch\n\nclass ModelNew(torch.nn.Module)\n    pass\n")
    verdict = check(kernel)
    assert verdict["status"] == "compile_error"
    assert "line 3" in verdict["message"]


def test_file_without_modelnew_is_a_compile_error(tmp_path):
    kernel = tmp_path / "empty.py"
    kernel.write_text("import torch\n")
    verdict = check(kernel)
    assert verdict["status"] == "compile_error" and "ModelNew" in verdict["message"]


def test_endless_loop_times_out_and_leaves_no_process(tmp_path):
    marker = f"9{uuid.uuid4().int % 10**8}"
    kernel = tmp_path / "loop.py"
    kernel.write_text(
        "import subprocess, torch\n"
        f"subprocess.Popen(['sleep', '{marker}'])\n"
        "class ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        while True:\n"
        "            pass\n"
    )
    started = time.monotonic()
    verdict = check(kernel, "--timeout", "8")
    assert verdict["status"] == "timeout"
    assert time.monotonic() - started < 60
    assert processes_with(f"sleep {marker}") == []


def test_unknown_task_is_a_usage_error_with_one_line():
    proc = run_cli("check", "--task", "no_such_task", "--json", str(EXPERT))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "unknown task 'no_such_task'" in proc.stderr


def test_missing_file_is_a_usage_error():
    proc = run_cli("check", "--task", "row_softmax", "/nonexistent/kernel.py")
    assert proc.returncode == 2 and "no such kernel file" in proc.stderr


def test_cuda_mode_without_a_gpu_is_a_usage_error():
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is present")
    proc = run_cli("check", "--task", "row_softmax", "--mode", "cuda", str(EXPERT))
    assert proc.returncode == 2 and "CUDA GPU" in proc.stderr


def test_human_output_names_the_status_and_workloads():
    proc = run_cli("check", "--task", "row_softmax", "--mode", "interpret", str(EXPERT))
    assert proc.returncode == 0
    assert "row_softmax: correct" in proc.stdout and "check_bf16_8x256" in proc.stdout


@pytest.mark.parametrize(
    ("setting", "sentence"),
    [
        ("no_such=1", "unknown timing setting 'no_such'"),
        ("max_calls=many", "--timing takes KEY=VALUE with a number, not 'max_calls=many'"),
        ("max_calls", "--timing takes KEY=VALUE"),
        ("budget_s=-1", "timing setting budget_s must be a finite number >= 0"),
        ("max_calls=inf", "timing setting max_calls must be a finite number >= 0"),
        ("min_calls=400", "unknown timing setting 'min_calls'"),
        ("phases=0", "timing setting phases must be at least 1"),
    ],
)
def test_a_bad_timing_setting_is_a_usage_error_with_a_sentence(setting, sentence):
    proc = run_cli("check", "--task", "row_softmax", "--timing", setting, str(EXPERT))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert sentence in proc.stderr and proc.stderr.count("\n") == 1


def test_timing_settings_apply_overrides_in_the_protocol_s_own_types():
    from evaluator.harness.orchestrate import TIMING, timing_settings

    settings = timing_settings({"budget_s": 3.0, "max_calls": 800.0})
    assert settings.budget_s == 3.0 and settings.max_calls == 800
    assert type(settings.max_calls) is int
    assert settings.warmup_s == TIMING["warmup_s"]
    assert TIMING["max_calls"] == 400  # the defaults are untouched


def test_the_child_ends_at_done_without_running_the_submissions_exit_handlers(tmp_path):
    kernel = tmp_path / "with_exit_handler.py"
    kernel.write_text(
        EXPERT.read_text()
        + "\n\nimport atexit\n\natexit.register(print, 'D2K-EXIT-HANDLER-RAN', flush=True)\n"
    )

    verdict = check(kernel)

    assert verdict["status"] == "correct", verdict["message"]
    assert "D2K-EXIT-HANDLER-RAN" not in verdict["log"]

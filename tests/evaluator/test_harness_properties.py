"""`python -m evaluator check --json` reports the task's design properties judged from
what ran: one entry per property with key, level, implemented and evidence."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.harness.properties import launched_kernels
from evaluator.harness.reports import OutputReport
from taskformat.package import DEFAULT_CATALOG_DIR, load_task

ROOT = Path(__file__).resolve().parents[2]
EXPERT = ROOT / "catalog" / "row_softmax" / "expert.py"
GAMED = ROOT / "tests" / "taskformat" / "gaming" / "softmax_dead_branch.py"
CHECK = [sys.executable, "-m", "evaluator", "check", "--task", "row_softmax", "--mode", "interpret"]
CHECK += ["--json"]


def check_json(path: Path) -> dict:
    proc = subprocess.run(
        [*CHECK, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_the_verdict_lists_every_property_with_its_evidence():
    verdict = check_json(EXPERT)
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    assert verdict["status"] == "correct"
    assert [p["key"] for p in verdict["properties"]] == [p.key for p in task.properties]
    for entry in verdict["properties"]:
        assert entry["level"] in ("L1", "L2", "L3")
        assert entry["implemented"] is True, entry
        assert entry["evidence"]["kind"] == "source" and entry["evidence"]["excerpt"]
    # Interpret mode: no profiler names the kernels, so the source's reachability stands.
    assert "launched_kernels" not in verdict["environment"]


@pytest.mark.slow
def test_a_correct_kernel_with_idioms_in_a_dead_branch_gets_no_credit_for_them():
    verdict = check_json(GAMED)
    assert verdict["status"] == "correct"
    got = {p["key"]: p["implemented"] for p in verdict["properties"]}
    for faked in ("online_normalizer", "looped_two_pass", "exp2_prescaled", "max_subtraction"):
        assert got[faked] is False, faked


def test_only_the_submissions_own_kernels_that_ran_are_named():
    source = GAMED.read_text()

    def call(*kernels: str) -> OutputReport:
        return OutputReport(workload="w", seed=1, tag="t", file="f", kernels=kernels)

    outputs = {
        "w1": [call("_softmax", "void at::native::fill_kernel<float>(float*)")],
        "w2": [call("_softmax"), call()],
    }
    assert launched_kernels(outputs, source) == ["_softmax"]
    assert launched_kernels({"w1": [call("cutlass_gemm")]}, source) == []

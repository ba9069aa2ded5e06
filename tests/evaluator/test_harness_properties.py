"""`python -m evaluator check --json` reports the task's design properties judged from
what ran: one entry per property with key, level, implemented and evidence."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from evaluator.harness.properties import launched_kernels, verdict_properties
from evaluator.harness.reports import OutputReport
from evaluator.harness.verdict import Status, Verdict, WorkloadOutcome
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import WorkloadRole

ROOT = Path(__file__).resolve().parents[2]
EXPERT = ROOT / "catalog" / "row_softmax" / "expert.py"
GAMING = ROOT / "tests" / "taskformat" / "gaming"
GAMED = GAMING / "softmax_dead_branch.py"
GAMED_GEMM = GAMING / "gemm_dead_branch.py"
PADDED_GEMM = GAMING / "gemm_padded_dot.py"
# What each gaming kernel fakes in its dead branch: none of it may earn credit.
FAKED = {
    "row_softmax": ("online_normalizer", "looped_two_pass", "exp2_prescaled", "max_subtraction"),
    "gemm_bf16": (
        "tensor_core_dot",
        "fp32_tile_accumulator",
        "grouped_ordering",
        "unmasked_k_loop",
        "host_config_from_shape",
    ),
}


def check_json(path: Path, task: str = "row_softmax", mode: str = "interpret", **env: str) -> dict:
    command = [sys.executable, "-m", "evaluator", "check", "--task", task, "--mode", mode]
    proc = subprocess.run(
        [*command, "--json", str(path)],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=900,
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
    for faked in FAKED["row_softmax"]:
        assert got[faked] is False, faked


@pytest.mark.slow
def test_a_correct_gemm_with_tensor_core_idioms_in_a_dead_branch_gets_no_credit_for_them():
    # A secret of the test's own: the hidden workloads (odd, strided, M = 1) run too.
    verdict = check_json(GAMED_GEMM, "gemm_bf16", D2K_HIDDEN_SEED="gaming-gemm")
    assert verdict["status"] == "correct", verdict["message"]
    assert any(w["hidden"] for w in verdict["workloads"])
    found = {p["key"]: p for p in verdict["properties"]}
    for faked in FAKED["gemm_bf16"]:
        assert found[faked]["implemented"] is False, found[faked]
        assert found[faked]["evidence"] == {"kind": "source", "excerpt": []}


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(
    ("task", "path", "kernel", "faked"),
    [
        ("row_softmax", GAMED, "_softmax", FAKED["row_softmax"]),
        ("gemm_bf16", GAMED_GEMM, "_gemm", FAKED["gemm_bf16"]),
        # Live MMAs whose value is added times zero: the source credits them (interpret
        # mode is provisional); the counters see a CUDA-core GEMM's instructions per FLOP.
        ("gemm_bf16", PADDED_GEMM, "_gemm", ("tensor_core_dot",)),
    ],
    ids=["softmax", "gemm", "gemm-padded"],
)
def test_on_the_gpu_faked_idioms_get_no_credit(task: str, path: Path, kernel: str, faked: tuple):
    verdict = check_json(path, task, "cuda", D2K_HIDDEN_SEED="gaming-gpu")
    assert verdict["status"] == "correct", verdict["message"]
    # The profiler saw the one kernel launched: the source counts only through it.
    assert verdict["environment"]["launched_kernels"] == [kernel]
    got = {p["key"]: p for p in verdict["properties"]}
    for key in faked:
        assert got[key]["implemented"] is False, (key, verdict["properties"])
    if path == PADDED_GEMM:
        assert got["tensor_core_dot"]["evidence"]["kind"] == "counter"


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


@pytest.mark.parametrize(
    ("note", "kind", "implemented"),
    [
        ("not read: the profiling pass was killed (timeout)", "counter", False),
        ("not read: Nsight Compute (ncu) is not installed on this worker", "source", True),
    ],
)
def test_a_counters_pass_that_read_nothing_gives_its_counter_rules_nothing(note, kind, implemented):
    """The expert GEMM's tensor-core property has a counter rule and a source detector: a
    pass the submission kept from reading (killed) hands nothing back to the source."""
    task = load_task(DEFAULT_CATALOG_DIR / "gemm_bf16")
    timed = tuple(
        WorkloadOutcome(name=w.name, role=WorkloadRole.TIMED, hidden=False, status=Status.CORRECT)
        for w in task.workloads
        if w.role is WorkloadRole.TIMED
    )
    verdict = Verdict(
        status=Status.CORRECT, message="", flags=(), workloads=timed,
        environment={"counters": note}, log="", task="gemm_bf16", mode="cuda",
    )  # fmt: skip
    found = {
        p["key"]: p
        for p in verdict_properties(
            task, (ROOT / "catalog/gemm_bf16/expert.py").read_text(), verdict
        )
    }
    assert found["tensor_core_dot"]["implemented"] is implemented
    assert found["tensor_core_dot"]["evidence"]["kind"] == kind

"""The catalog's hidden workloads: drawn from a deployment's secret, never written down.

No tracked file names a concrete hidden workload; every task's declaration draws
only workloads its reference and statement accept, whatever the secret; and two
deployments' secrets draw different shapes, on which the experts are correct.
"""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from evaluator.harness.workload import load_module, make_inputs
from taskformat.hidden import SECRET_ENV
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs
from taskformat.spec import Mode
from tests.catalog.drawn import TEST_SECRETS, load_drawn

ROOT = Path(__file__).resolve().parents[2]
TASKS = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR)]
SECRETS = [f"constraint-secret-{i}" for i in range(12)]

# The names concrete hidden workloads carried when task.toml listed them: a shape or a
# dtype after `hidden_` (`hidden_<dtype>_<rows>x<cols>`), or a case's name. The drawn
# ones are `hidden_<n>` and `check_hidden_<n>`.
OLD_HIDDEN_NAME = r"\b(check_)?hidden_((?=[a-z0-9_]*[0-9])[a-z][a-z0-9_]*|two_scalars|odd_sizes)"


def test_no_tracked_file_names_a_concrete_hidden_workload():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout")
    found = subprocess.run(
        ["git", "grep", "-n", "-I", "-P", OLD_HIDDEN_NAME, "--", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 1, found.stdout[:3000]  # 1: no line matched


def test_no_tracked_gzip_file_names_a_concrete_hidden_workload():
    # git grep -I skips binary files: the gzipped raw output is read here.
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.gz"], cwd=ROOT, capture_output=True, check=True
    )
    pattern = re.compile(OLD_HIDDEN_NAME.encode())
    named = [
        name
        for name in listed.stdout.decode().split("\0")
        if name
        and (ROOT / name).is_file()
        and pattern.search(gzip.decompress((ROOT / name).read_bytes()))
    ]
    assert not named


def test_the_old_name_pattern_finds_what_task_toml_once_listed():
    listed = [
        "hidden_" + "bf16_4097x3001",
        "check_hidden_" + "fp32_3x40000",
        "hidden_two_" + "scalars",
    ]
    drawn = ["hidden_1", "check_hidden_12", "hidden_declaration_parse", "hidden_draws"]
    assert all(re.search(OLD_HIDDEN_NAME, name) for name in listed)
    assert not any(re.search(OLD_HIDDEN_NAME, name) for name in drawn)


def _heads_divide(p: dict, q: str, kv: str) -> bool:
    return p[q] % p[kv] == 0


# What each task's reference and statement require of a workload, beyond its types.
CONSTRAINTS = {
    "w4a16_gemv": lambda p: p["k"] % 128 == 0,
    "flash_attention_fwd": lambda p: p["head_dim"] in (32, 64, 128),
    "flash_decoding": lambda p: (
        p["head_dim"] in (32, 64, 128) and _heads_divide(p, "q_heads", "kv_heads")
    ),
    "paged_attention_decode": lambda p: (
        p["head_dim"] in (32, 64, 128)
        and p["block_size"] == 16
        and _heads_divide(p, "q_heads", "kv_heads")
    ),
    "rotary_embedding": lambda p: p["head_dim"] % 2 == 0,
    "topk_rows": lambda p: 1 <= p["k"] <= min(p["cols"], 256),
    "moe_permute": lambda p: 1 <= p["top_k"] <= p["experts"],
    "histogram": lambda p: p["dtype"] != "uint8" or p["bins"] <= 256,
    "selective_scan": lambda p: p["state"] == 16,
    "conv2d_implicit_gemm": lambda p: p["pad"] == p["ksize"] // 2,
    "cross_entropy_fwd": lambda p: p["tokens"] >= 8,
}


@pytest.mark.parametrize("slug", TASKS)
def test_every_secret_draws_workloads_the_task_accepts(slug):
    for secret in SECRETS:
        task = load_drawn(slug, secret=secret)
        hidden = [w for w in task.workloads if w.hidden]
        assert len(hidden) == sum(map(task.hidden.count, Mode))
        for workload in hidden:
            assert workload.params.get("dist") in ("default", "adversarial"), workload
            holds = CONSTRAINTS.get(slug, lambda p: True)
            assert holds(workload.params), (secret, workload)


@pytest.mark.parametrize("slug", TASKS)
def test_the_reference_builds_inputs_for_every_drawn_check(slug):
    reference = load_module(str(DEFAULT_CATALOG_DIR / slug / "reference.py"), f"d2k_hid_{slug}")
    for secret in TEST_SECRETS:
        task = load_drawn(slug, secret=secret)
        for workload in (w for w in task.workloads_for(Mode.INTERPRET) if w.hidden):
            inputs = make_inputs(reference, workload.params, 0, torch.device("cpu"))
            assert inputs, workload


def _interpret_verdict(slug: str, secret: str) -> dict:
    expert = str(DEFAULT_CATALOG_DIR / slug / "expert.py")
    command = ["check", "--task", slug, "--mode", "interpret", "--no-counters", "--json", expert]
    proc = subprocess.run(
        [sys.executable, "-m", "evaluator", *command],
        cwd=ROOT,
        env={**os.environ, SECRET_ENV: secret},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("slug", ["row_softmax", "w4a16_gemv"])
def test_two_deployments_draw_different_shapes_and_the_expert_is_correct_on_both(slug):
    a, b = (load_drawn(slug, secret=s) for s in TEST_SECRETS)
    shapes_a = [w.params for w in a.workloads_for(Mode.INTERPRET) if w.hidden]
    shapes_b = [w.params for w in b.workloads_for(Mode.INTERPRET) if w.hidden]
    assert shapes_a != shapes_b
    for secret, task in zip(TEST_SECRETS, (a, b), strict=True):
        verdict = _interpret_verdict(slug, secret)
        assert verdict["status"] == "correct", verdict["message"]
        names = [w["name"] for w in verdict["workloads"]]
        assert names == [w.name for w in task.workloads_for(Mode.INTERPRET)]
        assert sum(w["hidden"] for w in verdict["workloads"]) == len(shapes_a)

"""Every task package in catalog/ is complete and its expert is correct (its detectors are
tested in test_catalog_detectors.py)."""

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.harness.timingchecks import speed_of_light_terms
from taskformat.hidden import SECRET_ENV, task_with_hidden
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs, load_task
from taskformat.spec import Level, Mode, WorkloadRole
from tests.catalog.drawn import TEST_SECRETS

ROOT = Path(__file__).resolve().parents[2]
NEGATIVES = ROOT / "tests" / "catalog" / "negatives"
TASKS = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR)]

# Timed workloads per task, from CATALOG.md.
CATALOG_COUNTS = {
    "row_softmax": 3,
    "layernorm_fwd": 3,
    "rmsnorm_residual": 4,
    "gemm_bf16": 4,
    "gemm_bias_gelu": 3,
    "flash_attention_fwd": 4,
    "flash_decoding": 4,
    "paged_attention_decode": 3,
    "rotary_embedding": 3,
    "cross_entropy_fwd": 3,
    "topk_rows": 3,
    "prefix_scan": 3,
    "histogram": 3,
    "transpose_2d": 3,
    "reduction_sum": 3,
    "grouped_gemm_moe": 4,
    "moe_permute": 3,
    "fp8_gemm_blockscale": 3,
    "w4a16_gemv": 4,
    "selective_scan": 3,
    "conv2d_implicit_gemm": 4,
    "causal_conv1d": 3,
    "spmm_csr": 3,
    "layernorm_bwd": 3,
    "swiglu_fused": 3,
    "fused_adamw": 3,
}


@pytest.fixture(scope="module", params=TASKS)
def task(request):
    return load_task(DEFAULT_CATALOG_DIR / request.param)


def test_the_catalog_has_the_first_thirteen_tasks():
    first = list(CATALOG_COUNTS)[:13]
    assert set(first) <= set(TASKS)


def test_workloads_match_the_catalog_and_have_counts(task):
    timed = [w for w in task.workloads if w.role is WorkloadRole.TIMED]
    assert len(timed) == CATALOG_COUNTS[task.slug]
    assert all(w.flops >= 0 and w.bytes > 0 for w in timed)
    assert task.workloads_for(Mode.INTERPRET)
    assert not any(w.hidden or w.role is WorkloadRole.UNTIMED for w in task.workloads)


def test_hidden_workloads_are_declared_for_both_modes_with_an_adversarial_draw(task):
    for mode in Mode:
        draws = task.hidden.draws_for(mode)
        assert task.hidden.count(mode) >= 2, mode
        dists = [{r.name: r.value for r in d.params}.get("dist") for d in draws]
        assert "adversarial" in dists, (mode, dists)
    drawn = task_with_hidden(task, secret=TEST_SECRETS[0])
    assert len([w for w in drawn.workloads if w.hidden]) == sum(map(task.hidden.count, Mode))


def test_task_text_is_complete(task):
    assert len(task.statement.split()) >= 40
    assert task.forbidden_ops
    for guidance in task.guidance:
        assert len(guidance.text.split()) >= 150, f"{guidance.level} guidance is too short"
    by_level = {g.level: g for g in task.guidance}
    assert by_level[Level.L2].depends_on == (Level.L1,)
    assert by_level[Level.L3].depends_on


# The H200's ceilings as the worker measures them (ceilings.ceilings): bandwidth and
# bf16 rate from docs/baselines.json's environment, the fp8 rate (e4m3 _scaled_mm) from
# the same measurement on the same H200 (1220-1256 TFLOP/s over its three shapes).
H200_CEILINGS = {"peak_tbps": 4.4486, "peak_tflops_bf16": 740.0, "peak_tflops_fp8": 1256.0}
MIN_SOL_US = 10.0
TIMED_WORKLOADS = 85


def test_every_timed_workload_takes_at_least_10_us_at_the_h200s_speed_of_light():
    short, timed = [], 0
    for folder in iter_task_dirs(DEFAULT_CATALOG_DIR):
        for w in load_task(folder).workloads:
            if w.role is not WorkloadRole.TIMED:
                continue
            timed += 1
            compute_s, memory_s = speed_of_light_terms(w, H200_CEILINGS)
            assert compute_s is not None, f"{folder.name}/{w.name}: no ceiling for its unit"
            sol_us = max(compute_s, memory_s) * 1e6
            if sol_us < MIN_SOL_US:
                short.append(f"{folder.name}/{w.name}: {sol_us:.2f} us")
    assert short == []
    assert timed == TIMED_WORKLOADS


def test_two_to_five_properties_per_level(task):
    for level in Level:
        count = sum(p.level is level for p in task.properties)
        assert 2 <= count <= 5, f"{level}: {count} properties"


# A fresh deployment's secret, drawn once per test run: the experts are correct on
# whatever a deployment draws (the failure message gives the secret to reproduce it).
FRESH_SECRET = secrets.token_hex(16)


@pytest.mark.slow
@pytest.mark.parametrize("slug", TASKS)
def test_expert_is_correct_in_interpret_mode(slug):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "check",
            "--task",
            slug,
            "--mode",
            "interpret",
            "--timeout",
            "300",
            "--json",
            str(DEFAULT_CATALOG_DIR / slug / "expert.py"),
        ],
        cwd=ROOT,
        env={**os.environ, SECRET_ENV: FRESH_SECRET},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)
    assert any(w["hidden"] for w in verdict["workloads"]), "no hidden workload was drawn"
    assert verdict["status"] == "correct", (
        f"{SECRET_ENV}={FRESH_SECRET}",
        verdict["message"],
        verdict["log"][-2000:],
    )


def _jit_functions_reading_plain_globals(source: str) -> list[str]:
    """Names of module globals that a @triton.jit function reads but that are not
    `tl.constexpr(...)`: the CPU interpreter accepts them, the GPU compiler does not."""
    import ast

    tree = ast.parse(source)
    plain = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            value = node.value
            constexpr = isinstance(value, ast.Call) and ast.unparse(value.func).endswith(
                "constexpr"
            )
            plain |= {t.id for t in node.targets if isinstance(t, ast.Name) and not constexpr}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
            "jit" in ast.unparse(d) for d in node.decorator_list
        ):
            reads = {
                n.id
                for n in ast.walk(node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            }
            params = {a.arg for a in node.args.args}
            found += [f"{node.name}: {name}" for name in sorted((reads & plain) - params)]
    return found


def test_jit_functions_read_only_constexpr_globals(task):
    # A plain float global inside a kernel passes the interpreter and fails to
    # compile on the GPU (seen on an H200): catch it on the CPU.
    naive = (NEGATIVES / f"{task.slug}.py").read_text()
    assert _jit_functions_reading_plain_globals(task.expert_source) == []
    assert _jit_functions_reading_plain_globals(naive) == []


def test_every_higher_level_item_names_what_it_builds_on(task):
    # Levels L2 and L3: every property depends on specific properties, the
    # level as a whole on at least one property of a lower level, and the
    # text's "Builds on:" line names those lower-level properties by title.
    rank = {level: i for i, level in enumerate(Level)}
    by_key = {p.key: p for p in task.properties}
    for guidance in task.guidance:
        if guidance.level is Level.L1:
            continue
        props = [p for p in task.properties if p.level is guidance.level]
        assert all(p.depends_on for p in props), [p.key for p in props if not p.depends_on]
        lower = {
            by_key[d].title
            for p in props
            for d in p.depends_on
            if rank[by_key[d].level] < rank[guidance.level]
        }
        assert lower, f"{guidance.level} builds on no lower-level property"
        paragraph = guidance.text.split("Builds on: ", 1)[1].split("\n\n", 1)[0]
        builds_on = " ".join(paragraph.split())
        for title in lower:
            assert f"{title} (" in builds_on, f"{guidance.level} text does not name {title!r}"


# Experts that switch path on the host at a module-level threshold, and the
# workload parameter compared with it: the timed workloads must run both paths,
# or the properties of one are scored but never timed.
HOST_PATH_THRESHOLDS = {
    "row_softmax": ("MAX_FUSED_COLS", ("cols",)),
    "layernorm_fwd": ("MAX_FUSED_COLS", ("cols",)),
    # A 1-D scan is one row of n.
    "prefix_scan": ("MAX_FUSED_COLS", ("cols", "n")),
    "histogram": ("MAX_REGISTER_BINS", ("bins",)),
}


def _module_constant(source: str, name: str) -> int:
    import ast

    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return int(ast.literal_eval(node.value))
    raise AssertionError(f"expert has no {name}")


@pytest.mark.parametrize("slug", sorted(HOST_PATH_THRESHOLDS))
def test_timed_workloads_run_both_sides_of_the_experts_host_switch(slug):
    task = load_task(DEFAULT_CATALOG_DIR / slug)
    constant, params = HOST_PATH_THRESHOLDS[slug]
    limit = _module_constant(task.expert_source, constant)
    sizes = [
        next(w.params[p] for p in params if p in w.params)
        for w in task.workloads
        if w.role is WorkloadRole.TIMED
    ]
    assert any(s <= limit for s in sizes) and any(s > limit for s in sizes), (limit, sizes)


def test_at_least_five_tasks_hide_a_strided_input_in_a_workload_and_a_check():
    import torch

    from evaluator.harness.workload import load_module, make_inputs

    strided = []
    for slug in TASKS:
        spec = task_with_hidden(load_task(DEFAULT_CATALOG_DIR / slug), secret=TEST_SECRETS[0])
        hidden = [w for w in spec.workloads if w.role is WorkloadRole.UNTIMED]
        checks = [w for w in spec.workloads_for(Mode.INTERPRET) if w.hidden]
        if not any(w.params.get("strided") for w in hidden):
            continue
        reference = load_module(spec.directory + "/reference.py", f"d2k_strided_{slug}")
        for check in (w for w in checks if w.params.get("strided")):
            inputs = make_inputs(reference, check.params, 0, torch.device("cpu"))
            assert any(isinstance(t, torch.Tensor) and not t.is_contiguous() for t in inputs), (
                check.name
            )
            strided.append(slug)
            break
    assert len(strided) >= 5, strided

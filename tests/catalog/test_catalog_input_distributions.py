"""Every task draws its inputs from two distributions, and its stated hazards are real on one.

`get_inputs(..., dist="default")` (or no `dist`) draws the public inputs, the
same bytes as before `dist` existed: the timed workloads and the public
checks do not change. `dist="adversarial"` draws inputs on which the hazards
the task's statement names are real (logits that overflow exp, variances that
cancel, one bin that takes every update, one row that holds half the
nonzeros...); hidden workloads use it, so a kernel right only for the public
distribution fails there. The expert must stay correct on it, and for the
tasks below a naive kernel (tests/catalog/hazard_kernels/<slug>.py) that is
correct on every default check workload must fail on an adversarial one.
"""

import json
from pathlib import Path

import pytest
import torch

from evaluator.harness.workload import as_tuple, load_module, make_inputs, make_model
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs, load_task
from taskformat.spec import Mode
from tests.catalog.default_prints import check_prints
from tests.catalog.script_lines import script_json_lines
from tests.catalog.test_catalog_inputs import nondeterministic_ops

HERE = Path(__file__).resolve().parent
TASKS = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR)]
HAZARD_KERNELS = sorted(p.stem for p in (HERE / "hazard_kernels").glob("*.py"))
CPU = torch.device("cpu")
ADVERSARIAL = {"dist": "adversarial"}


def _reference(slug: str):
    return load_module(str(DEFAULT_CATALOG_DIR / slug / "reference.py"), f"d2k_dist_{slug}")


def _check_workloads(slug: str):
    return load_task(DEFAULT_CATALOG_DIR / slug).workloads_for(Mode.INTERPRET)


@pytest.fixture(scope="module")
def pinned() -> dict:
    return json.loads((HERE / "default_input_prints.json").read_text())


@pytest.mark.parametrize("extra", [{}, {"dist": "default"}], ids=["no_dist", "default"])
def test_default_inputs_are_the_pinned_public_inputs(pinned, extra):
    prints = check_prints(**extra)
    assert sorted(prints) == sorted(pinned)
    assert [name for name in pinned if prints[name] != pinned[name]] == []


def test_the_pinned_prints_tell_another_draw_apart(pinned):
    assert check_prints(**ADVERSARIAL) != pinned


@pytest.mark.parametrize("slug", TASKS)
def test_an_unknown_distribution_is_refused(slug):
    workload = _check_workloads(slug)[0]
    with pytest.raises(ValueError, match="unknown input distribution 'uniform'"):
        make_inputs(_reference(slug), {**workload.params, "dist": "uniform"}, 1, CPU)


def _same(a: object, b: object) -> bool:
    if not isinstance(a, torch.Tensor):
        return a == b
    return isinstance(b, torch.Tensor) and torch.equal(a.nan_to_num(), b.nan_to_num())


@pytest.mark.parametrize("slug", TASKS)
def test_adversarial_inputs_are_another_draw_of_valid_inputs(slug):
    reference = _reference(slug)
    differs = []
    for workload in _check_workloads(slug):
        params = {**workload.params, **ADVERSARIAL}
        first = make_inputs(reference, params, 7, CPU)
        again = make_inputs(reference, params, 7, CPU)
        public = make_inputs(reference, workload.params, 7, CPU)
        assert all(_same(a, b) for a, b in zip(first, again, strict=True)), workload.name
        assert len(first) == len(public), workload.name
        differs.append(not all(_same(a, b) for a, b in zip(first, public, strict=True)))
        assert nondeterministic_ops(reference, params) == [], workload.name
        with torch.no_grad():
            model = make_model(reference.Model, reference, params, 7, CPU)
            outputs = as_tuple(model(*first))
        finite_in = all(
            torch.isfinite(t).all()
            for t in first
            if isinstance(t, torch.Tensor) and t.is_floating_point()
        )
        if finite_in:  # the hazards are the kernel's, never the reference's
            assert all(torch.isfinite(o.double()).all() for o in outputs), workload.name
    # (a single token routed to its single expert has one valid input in both)
    assert any(differs)


def _results(slug: str, *kernel: str) -> dict[tuple[str, str], dict]:
    lines = script_json_lines("adversarial_interpret", slug, *kernel)
    return {(line["workload"], line["dist"]): line for line in lines}


# The expert on both distributions: tests/catalog/test_catalog_poisoned.py runs it on
# each, with its allocations poisoned as on the GPU, in one process per task.


def test_every_named_hazard_has_a_naive_kernel():
    assert {
        "row_softmax",
        "cross_entropy_fwd",
        "layernorm_fwd",
        "topk_rows",
        "histogram",
        "spmm_csr",
    } <= set(HAZARD_KERNELS)
    assert len(HAZARD_KERNELS) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("slug", HAZARD_KERNELS)
def test_naive_kernel_passes_the_public_inputs_and_fails_the_adversarial_ones(slug):
    results = _results(slug, str(HERE / "hazard_kernels" / f"{slug}.py"))
    default = {w: r for (w, dist), r in results.items() if dist == "default"}
    adversarial = {w: r for (w, dist), r in results.items() if dist == "adversarial"}
    assert {w: r["message"] for w, r in default.items() if r["status"] != "correct"} == {}
    assert [w for w, r in adversarial.items() if r["status"] == "incorrect"] != []


def _adversarial_check_inputs(slug: str) -> list[list]:
    reference = _reference(slug)
    return [
        make_inputs(reference, {**w.params, **ADVERSARIAL}, 7, CPU) for w in _check_workloads(slug)
    ]


def test_adversarial_topk_rows_stay_free_of_ties():
    # The indices are compared exactly: a tie would leave them to the order of the sort.
    for (x,) in _adversarial_check_inputs("topk_rows"):
        assert all(torch.unique(row).numel() == row.numel() for row in x)


def test_adversarial_moe_routes_each_token_to_distinct_experts():
    for _, topk_ids in _adversarial_check_inputs("moe_permute"):
        assert all(torch.unique(ids).numel() == ids.numel() for ids in topk_ids)

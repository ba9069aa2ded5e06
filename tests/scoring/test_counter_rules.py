"""Counter rules conclude from counters read on every timed workload, never from fewer."""

import pytest

from taskformat.counter_rules import (
    CounterRuleError,
    counter_assess,
    counter_rule_validate,
    traffic_ratio,
)


def wl(name, dram=None, minimum=None, share=None, read=True):
    counters = (
        {"dram_bytes": dram, "min_bytes": minimum, "tensor_share": share, "tool": "ncu 2025.1"}
        if read
        else None
    )
    return {"name": name, "counters": counters}


TRAFFIC = {"kind": "traffic", "max_ratio": 1.3}
TENSOR = {"kind": "tensor_share", "min": 0.5}


@pytest.mark.parametrize(
    ("rule", "workloads", "value"),
    [
        (TRAFFIC, [wl("a", 110, 100), wl("b", 125, 100)], True),  # ×1.10, ×1.25
        (TRAFFIC, [wl("a", 110, 100), wl("b", 200, 100)], False),  # ×2.00 > ×1.3
        (TRAFFIC, [wl("a", 130, 100)], True),  # the limit itself passes
        (TRAFFIC, [wl("a", 110, 100), wl("b", read=False)], None),  # b not read: no guess
        (TRAFFIC, [wl("a", 110, 0)], None),  # no minimum to compare with
        (TRAFFIC, [], None),
        (TENSOR, [wl("a", share=0.9), wl("b", share=0.6)], True),
        (TENSOR, [wl("a", share=0.9), wl("b", share=0.1)], False),
        (TENSOR, [wl("a", share=None)], None),
    ],
)
def test_counter_assess_decides_only_from_counters_read_on_every_workload(rule, workloads, value):
    result = counter_assess(rule, workloads)
    if value is None:
        assert result is None
    else:
        assert result is not None and result.value is value
        assert len(result.evidence) == len(workloads) and result.rationale


def test_traffic_evidence_names_the_ratio_and_the_tool():
    result = counter_assess(TRAFFIC, [wl("big", 250, 200)])
    assert result.evidence == ("big: traffic ×1.25 of minimum (ncu 2025.1)",)
    assert traffic_ratio({"dram_bytes": 250, "min_bytes": 200}) == 1.25


# The catalog's GEMMs: tensor-core share and instructions per FLOP of the workload.
GEMM = {"kind": "tensor_share", "min": 0.02, "max_instructions_per_flop": 0.002}
FLOPS = 2 * 4096**3


def gemm(instructions, tensor_share, flops=FLOPS):
    counters = {"instructions": instructions, "tensor_share": tensor_share, "tool": "ncu"}
    return {"name": "bf16_4096", "counters": counters, "flops": flops}


@pytest.mark.parametrize(
    ("workload", "value"),
    [
        # The expert on the H200: 27.1 M instructions, 7.7 % on the tensor cores.
        (gemm(27_111_424, 0.077), True),
        # A CUDA-core GEMM padded with unused MMAs up to the share asked: its products
        # still take at least one warp instruction per 128 FLOPs.
        (gemm(FLOPS // 128, 0.05), False),
        (gemm(FLOPS // 128, 0.0), False),
        (gemm(27_111_424, 0.077, flops=None), None),  # no FLOPs to divide by: no guess
        (gemm(None, 0.077), None),
    ],
)
def test_the_tensor_core_rule_wants_the_products_off_the_cuda_cores(workload, value):
    result = counter_assess(GEMM, [workload])
    if value is None:
        assert result is None
    else:
        assert result is not None and result.value is value, result
        assert any("instructions per FLOP" in e for e in result.evidence)
    if value is False and workload["counters"]["tensor_share"]:
        assert "CUDA cores" in result.rationale


@pytest.mark.parametrize(
    "rule",
    [
        {"kind": "dram"},
        {"kind": "traffic"},
        {"kind": "traffic", "max_ratio": "1.3"},
        {"kind": "traffic", "max_ratio": 0},
        {"kind": "tensor_share", "min": 1.5},
        {"kind": "traffic", "max_ratio": 1.3, "extra": 1},
        {"kind": "traffic", "max_ratio": 1.3, "max_instructions_per_flop": 0.002},
        {"kind": "tensor_share", "min": 0.02, "max_instructions_per_flop": 0},
        {"kind": "tensor_share", "min": 0.02, "max_instructions_per_flop": "0.002"},
        ["traffic"],
    ],
)
def test_malformed_counter_rules_are_rejected(rule):
    with pytest.raises(CounterRuleError):
        counter_rule_validate(rule)


def test_the_catalog_loads_counter_rules_and_a_worker_verdict_keeps_the_counters(db, tmp_path):
    from pathlib import Path

    from evaluator.services.runner import _verdict_parse
    from task_catalog.models import DesignProperty
    from task_catalog.services import catalog_load
    from tests.evaluator.fake_cli import verdict_dict, workload_dict

    catalog_load(directory=Path(__file__).resolve().parents[2] / "catalog")
    rule = DesignProperty.objects.get(task__slug="gemm_bf16", key="tensor_core_dot").counters
    assert rule == {"kind": "tensor_share", "min": 0.02, "max_instructions_per_flop": 0.002}
    counters = {"dram_bytes": 10, "min_bytes": 8, "tensor_share": None, "tool": "ncu 2025.1"}
    raw = verdict_dict(workloads=[workload_dict("big", role="timed", counters=counters)])
    import json

    parsed = _verdict_parse(json.dumps(raw))
    assert parsed.workloads[0].counters == counters


def test_a_package_with_a_bad_counter_rule_is_refused(tmp_path):
    import shutil
    from pathlib import Path

    from taskformat.package import TaskPackageError, load_task

    source = Path(__file__).resolve().parents[2] / "catalog" / "gemm_bf16"
    shutil.copytree(source, tmp_path / "gemm_bf16")
    toml = tmp_path / "gemm_bf16" / "task.toml"
    toml.write_text(toml.read_text().replace("min = 0.02", 'min = "half"'))
    with pytest.raises(TaskPackageError, match="tensor_core_dot"):
        load_task(tmp_path / "gemm_bf16")

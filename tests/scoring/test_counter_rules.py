"""Counter rules conclude from counters read on every timed workload, never from fewer."""

import pytest

from evaluator.harness.counter_rules import (
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


@pytest.mark.parametrize(
    "rule",
    [
        {"kind": "dram"},
        {"kind": "traffic"},
        {"kind": "traffic", "max_ratio": "1.3"},
        {"kind": "traffic", "max_ratio": 0},
        {"kind": "tensor_share", "min": 1.5},
        {"kind": "traffic", "max_ratio": 1.3, "extra": 1},
        ["traffic"],
    ],
)
def test_malformed_counter_rules_are_rejected(rule):
    with pytest.raises(CounterRuleError):
        counter_rule_validate(rule)

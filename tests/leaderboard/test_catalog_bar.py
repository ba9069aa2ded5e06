"""The catalog's bar for its experts (leaderboard/catalog_bar.py): pure function, no
database. Every figure is a made-up test value."""

import pytest

from leaderboard.catalog_bar import (
    BarWorkload,
    Ceilings,
    catalog_bar,
    ceilings_from_environment,
    compute_bound,
)

CEILINGS = Ceilings(tflops=100.0, tbps=4.0)


def workload(name="w", *, speedup, sol=0.5, ms=1.0, tflops=1.0, tbps=2.0):
    """A workload at `tflops` and `tbps`; against CEILINGS it is bound by bytes unless
    tflops / 100 > tbps / 4."""
    return BarWorkload(
        name=name,
        speedup=speedup,
        median_ms=ms,
        sol_fraction=sol,
        achieved_tflops=tflops,
        achieved_tbps=tbps,
    )


def flop_bound(name="w", **kwargs):
    return workload(name, tflops=90.0, tbps=0.5, **kwargs)


@pytest.mark.parametrize(
    "workloads, meets, sentence",
    [
        # A geomean of exactly 1 does not beat the baseline; above 1 is enough, whatever
        # the bound and the speed of light.
        (
            [workload(speedup=1.0, sol=0.1)],
            False,
            "Below the catalog's bar: 1.00× of its baseline's speed (`baseline.py`); 10% of "
            "speed of light on its largest workload by bytes (`w`), under the 80% asked of a "
            "memory-bound task.",
        ),
        (
            [workload(speedup=2.0, sol=0.1), workload(speedup=1.5, sol=0.1)],
            True,
            "Meets the catalog's bar: beats its baseline (geomean 1.73× over `baseline.py`).",
        ),
        # Compute-bound (one FLOP-bound workload is enough): 90% of the library's speed.
        (
            [flop_bound(speedup=0.9, sol=0.7), workload(speedup=1.0)],
            True,
            "Meets the catalog's bar: 0.95× of its baseline's speed (`baseline.py`), at least "
            "the 90% of the library's speed asked of a compute-bound task.",
        ),
        (
            [flop_bound("big", speedup=0.8, sol=0.6, ms=3.0), workload(speedup=0.8)],
            False,
            "Below the catalog's bar: 0.80× of its baseline's speed (`baseline.py`), under "
            "the 90% asked of a compute-bound task; 60% of speed of light on its largest "
            "workload by FLOPs (`big`).",
        ),
        # Memory-bound: 80% of speed of light on the largest workload, not on the others.
        (
            [workload("small", speedup=0.7, sol=0.3), workload("big", speedup=0.9, sol=0.8)],
            True,
            "Meets the catalog's bar: 80% of speed of light on its largest workload by bytes "
            "(`big`), at least the 80% asked of a memory-bound task; 0.79× of its baseline's "
            "speed (`baseline.py`).",
        ),
        (
            [
                workload("small", speedup=0.9, sol=0.95),
                workload("big", speedup=0.9, sol=0.7, ms=2.0),
            ],
            False,
            "Below the catalog's bar: 0.90× of its baseline's speed (`baseline.py`); 70% of "
            "speed of light on its largest workload by bytes (`big`), under the 80% asked of "
            "a memory-bound task.",
        ),
    ],
)
def test_the_bar_is_met_by_beating_the_baseline_or_by_the_share_its_class_asks(
    workloads, meets, sentence
):
    bar = catalog_bar(
        status="correct", workloads=workloads, ceilings=CEILINGS, timed_against="baseline.py"
    )

    assert (bar.meets, bar.sentence) == (meets, sentence)


@pytest.mark.parametrize(
    "sols_and_medians, largest",
    [
        # The longest speed-of-light time (fraction × median), not the longest median.
        ([(0.9, 1.0), (0.1, 5.0)], "a"),
        ([(0.2, 1.0), (0.5, 1.0)], "b"),
        ([(0.5, 2.0), (0.5, 1.0)], "a"),
    ],
)
def test_the_largest_workload_is_the_one_with_the_longest_speed_of_light_time(
    sols_and_medians, largest
):
    workloads = [
        workload(name, speedup=0.5, sol=sol, ms=ms)
        for name, (sol, ms) in zip("ab", sols_and_medians, strict=True)
    ]

    bar = catalog_bar(status="correct", workloads=workloads, ceilings=CEILINGS)

    assert f"largest workload by bytes (`{largest}`)" in bar.sentence


def test_without_a_file_name_the_sentence_says_its_baseline():
    bar = catalog_bar(status="correct", workloads=[workload(speedup=1.29)], ceilings=None)

    assert bar.sentence == "Meets the catalog's bar: beats its baseline (geomean 1.29×)."


@pytest.mark.parametrize(
    "status, workloads, ceilings, sentence",
    [
        ("incorrect", [workload(speedup=3.0)], CEILINGS, "the expert's GPU run is incorrect."),
        ("correct", [], CEILINGS, "Not judged: a timed workload of the expert has no speedup."),
        (
            "correct",
            [workload(speedup=2.0), workload(speedup=None)],
            CEILINGS,
            "Not judged: a timed workload of the expert has no speedup.",
        ),
        (
            "correct",
            [workload(speedup=0.5)],
            None,
            "Not judged: 0.50× of its baseline's speed, and no speed of light was measured",
        ),
        (
            "correct",
            [BarWorkload("w", 0.5, 1.0, None, None, None)],
            CEILINGS,
            "Not judged: 0.50× of its baseline's speed, and no speed of light was measured",
        ),
    ],
)
def test_a_verdict_the_data_cannot_judge_is_said_so(status, workloads, ceilings, sentence):
    bar = catalog_bar(status=status, workloads=workloads, ceilings=ceilings)

    assert bar.meets is (False if status != "correct" else None)
    assert sentence in bar.sentence


@pytest.mark.parametrize(
    "environment, ceilings",
    [
        ({"ceilings": {"peak_tflops_bf16": 724.3, "peak_tbps": 4.37}}, Ceilings(724.3, 4.37)),
        ({"ceilings": {"peak_tflops_bf16": 724, "peak_tbps": 0}}, None),
        ({"ceilings": {"peak_tbps": 4.37}}, None),
        ({"ceilings": "not measured"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_ceilings_are_read_from_the_verdicts_environment(environment, ceilings):
    assert ceilings_from_environment(environment) == ceilings


def test_a_workload_is_read_from_a_verdicts_json_with_unusable_numbers_as_none():
    data = {
        "name": "w",
        "speedup": 2,
        "median_ms": float("nan"),
        "sol_fraction": True,
        "achieved_tflops": "12",
    }

    assert BarWorkload.from_mapping(data) == BarWorkload("w", 2.0, None, None, None, None)


def test_an_fp8_workloads_flops_count_against_the_fp8_ceiling():
    # 300 TFLOP/s and 2.5 TB/s: 75 % of a 400 TFLOP/s bf16 rate, 25 % of a 1200 fp8 one,
    # against 62.5 % of the bandwidth.
    gemm = workload("fp8_gemm", speedup=0.5, sol=0.7, tflops=300.0, tbps=2.5)
    environment = {
        "ceilings": {"peak_tflops_bf16": 400.0, "peak_tflops_fp8": 1200.0, "peak_tbps": 4.0},
        "compute_dtypes": {"fp8_gemm": "fp8"},
    }
    ceilings = ceilings_from_environment(environment)

    assert ceilings is not None and ceilings.tflops_for("fp8_gemm") == 1200.0
    assert compute_bound([gemm], ceilings) is False
    bf16 = ceilings_from_environment({**environment, "compute_dtypes": {}})
    assert compute_bound([gemm], bf16) is True


def test_an_fp8_workload_without_an_fp8_ceiling_cannot_be_judged():
    gemm = workload("fp8_gemm", speedup=0.5, sol=0.7, tflops=300.0, tbps=2.5)
    environment = {
        "ceilings": {"peak_tflops_bf16": 400.0, "peak_tbps": 4.0},
        "compute_dtypes": {"fp8_gemm": "fp8"},
    }
    assert compute_bound([gemm], ceilings_from_environment(environment)) is None

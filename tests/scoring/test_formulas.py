"""The score formulas, driven by tables whose expectations are worked out by hand."""

import math

import pytest

from scoring.formulas import (
    PropertyRow,
    TaskOutcome,
    correctness_rate,
    counts_for_scoring,
    fast_p,
    geomean,
    geomean_speedup,
    implementation_parts,
    implementation_score,
    performance_score,
    pooled_score,
    property_credits,
    task_speedup,
    uplift,
)

A, B, C, D = (
    TaskOutcome("a", True, 2.0),
    TaskOutcome("b", True, 8.0),
    TaskOutcome("c", False, None),
    TaskOutcome("d", True, 0.5),
)
MISSING = TaskOutcome("e", False, None)


@pytest.mark.parametrize(
    ("speedups", "expected"),
    [
        ([2.0, 8.0], 4.0),  # sqrt(16)
        ([3.0], 3.0),
        ([1.0, 1.0, 8.0], 2.0),  # cube root of 8
        ([2.0, None], None),  # a timed workload without a figure: untimed
        ([2.0, 0.0], None),
        ([], None),
    ],
)
def test_task_speedup_is_the_geomean_of_every_timed_workload(speedups, expected):
    assert task_speedup(workload_speedups=speedups) == (
        pytest.approx(expected) if expected else None
    )


@pytest.mark.parametrize(
    ("outcomes", "rate", "performance"),
    [
        ([A, B, C, MISSING], 2 / 4, (2 + 8 + 0 + 0) / 4),
        ([A, B, D], 1.0, (2 + 8 + 0.5) / 3),
        ([C, MISSING], 0.0, 0.0),
        ([], None, None),
    ],
)
def test_correctness_rate_and_performance_score_count_missing_tasks_as_zero(
    outcomes, rate, performance
):
    assert correctness_rate(outcomes=outcomes) == rate
    assert performance_score(outcomes=outcomes) == (
        pytest.approx(performance) if performance is not None else None
    )


@pytest.mark.parametrize(
    ("outcomes", "twin", "value", "n"),
    [
        ([A, B, C], None, 4.0, 2),  # sqrt(2 * 8)
        ([A, B, D], None, 2.0, 3),  # cube root of 2 * 8 * 0.5 = 8
        # Only the tasks correct in both runs: b is incorrect in the twin.
        ([A, B, D], [TaskOutcome("a", True, 1.0), TaskOutcome("b", False), D], 1.0, 2),
        ([C], None, None, 0),
    ],
)
def test_geomean_speedup_is_over_the_tasks_correct_in_both_runs(outcomes, twin, value, n):
    got, count = geomean_speedup(outcomes=outcomes, twin=twin)
    assert count == n
    assert got == (pytest.approx(value) if value is not None else None)


def test_fast_p_is_the_share_of_all_tasks_correct_and_faster_than_p():
    curve = fast_p(outcomes=[A, B, C, D], grid=(0.0, 1.0, 2.0, 5.0))
    # speedups of correct tasks 2, 8, 0.5 over 4 tasks: >0 all three, >1 two, >2 one, >5 one
    assert curve == [[0.0, 0.75], [1.0, 0.5], [2.0, 0.25], [5.0, 0.25]]


PROPS = [
    PropertyRow("max", "L1", 1.0),
    PropertyRow("online", "L1", 2.0, ("max",)),
    PropertyRow("row", "L2", 1.0),
    PropertyRow("single", "L2", 2.0, ("row",)),
    PropertyRow("exp2", "L3", 1.0),
]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # everything implemented: 100 at every level
        (
            {"max": True, "online": True, "row": True, "single": True, "exp2": True},
            {"L1": 100.0, "L2": 100.0, "L3": 100.0, "combined": 100.0},
        ),
        # "online" is implemented but its dependency "max" is not: it earns nothing
        (
            {"max": False, "online": True, "row": True, "single": False, "exp2": None},
            {"L1": 0.0, "L2": 100 / 3, "L3": 0.0, "combined": 100 * 1 / 7},
        ),
        (
            {"max": True, "online": False, "row": True, "single": True},
            {"L1": 100 / 3, "L2": 100.0, "L3": 0.0, "combined": 100 * 4 / 7},
        ),
        ({}, {"L1": 0.0, "L2": 0.0, "L3": 0.0, "combined": 0.0}),
    ],
)
def test_implementation_score_is_credited_weight_over_total_weight(values, expected):
    got = implementation_score(tasks=[(PROPS, values)])
    assert got == pytest.approx(expected)


def test_implementation_score_pools_the_weights_of_every_task_and_skips_empty_levels():
    l1_only = [PropertyRow("k", "L1", 3.0)]
    got = implementation_score(tasks=[(l1_only, {"k": True}), (l1_only, {})])
    # 3 earned of 3 + 3 at L1; no task has L2 or L3 properties
    assert got == {"L1": 50.0, "L2": None, "L3": None, "combined": 50.0}


def test_a_dependency_cycle_or_an_unknown_dependency_earns_nothing():
    rows = [
        PropertyRow("x", "L1", 1.0, ("y",)),
        PropertyRow("y", "L1", 1.0, ("x",)),
        PropertyRow("z", "L1", 1.0, ("nope",)),
        PropertyRow("w", "L1", 1.0, ("z",)),
    ]
    values = {"x": True, "y": True, "z": True, "w": True}
    assert property_credits(properties=rows, values=values) == dict.fromkeys("xyzw", False)


@pytest.mark.parametrize(
    ("without", "with_guidance", "expected"),
    [(0.931, 0.985, 0.054), (1.46, 1.95, 0.49), (None, 2.0, None), (57.0, None, None)],
)
def test_uplift_is_with_minus_without(without, with_guidance, expected):
    got = uplift(without=without, with_guidance=with_guidance)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_geomean_is_exact_for_a_known_set():
    assert math.isclose(geomean_speedup(outcomes=[A, B])[0], 4.0)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([2.0, 8.0], 4.0),
        ([5.0], 5.0),
        ([], None),
        ([2.0, 0.0], None),  # not positive: no geometric mean
        ([2.0, -1.0], None),
    ],
)
def test_geomean_of_positive_values_and_none_otherwise(values, expected):
    got = geomean(values)
    assert got == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    ("status", "review", "counts"),
    [
        ("correct", "", True),
        ("flagged", "pending", False),  # a flag nobody reviewed
        ("flagged", "cleared", True),
        ("flagged", "hacked", False),
        ("correct", "hacked", False),  # a confirmed hack never counts
        ("incorrect", "", False),
        ("compile_error", "", False),
        ("queued", "", False),  # not evaluated yet
        ("running", "", False),
    ],
)
def test_what_counts_as_correct_for_scoring(status, review, counts):
    assert counts_for_scoring(status=status, review=review) is counts


@pytest.mark.parametrize(
    ("outcomes", "performance", "curve"),
    [
        # Nothing correct (failed, flagged, unevaluated, missing): 0 and all-zero fast_p,
        # never None, so the run's uplift stays defined.
        ([C, MISSING], 0.0, [[0.0, 0.0], [1.0, 0.0]]),
        ([TaskOutcome("a", False, None)], 0.0, [[0.0, 0.0], [1.0, 0.0]]),
        ([A, MISSING], 1.0, [[0.0, 0.5], [1.0, 0.5]]),
        ([], None, []),
    ],
)
def test_a_run_with_nothing_correct_scores_zero_not_none(outcomes, performance, curve):
    assert performance_score(outcomes=outcomes) == performance
    assert fast_p(outcomes=outcomes, grid=(0.0, 1.0)) == curve


def test_implementation_parts_pool_to_the_implementation_score():
    parts = [
        implementation_parts(properties=PROPS, values={"max": True, "online": True}),
        implementation_parts(properties=PROPS, values={}),
    ]
    assert parts[0]["L1"] == [3.0, 3.0] and parts[0]["combined"] == [3.0, 7.0]
    assert pooled_score(parts) == pytest.approx(
        {"L1": 50.0, "L2": 0.0, "L3": 0.0, "combined": 100 * 3 / 14}
    )
    assert pooled_score([]) == dict.fromkeys(("L1", "L2", "L3", "combined"))

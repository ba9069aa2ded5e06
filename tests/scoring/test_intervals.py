"""Repeated runs: means over attempts, seeded bootstrap intervals, paired uplift
intervals and tied ranks (scoring.intervals), on small hand-made tables."""

import pytest

from scoring.formulas import TaskParts
from scoring.intervals import entry_scores, paired_scores, seed_of, tied_ranks


def attempt(*speedups):
    """One run: a task per figure, correct with that speedup, or failed for None."""
    return [
        TaskParts(task=f"t{i}", counts=s is not None, speedup=s, turns=10)
        for i, s in enumerate(speedups)
    ]


def test_one_attempt_has_its_figure_and_no_interval():
    found = entry_scores(attempts=[attempt(2.0, None, 4.0, None)], seed=1)
    assert found["correctness_rate"] == (0.5, None)
    assert found["performance_score"] == (pytest.approx(1.5), None)
    assert found["turns"] == (40.0, None)


def test_the_mean_over_attempts_lies_inside_a_reproducible_interval():
    attempts = [
        attempt(2.0, None, 4.0, 1.0),
        attempt(1.0, 1.0, None, 1.0),
        attempt(3.0, 2.0, 1.0, None),
    ]
    found = entry_scores(attempts=attempts, seed=seed_of(1, 2, 3))
    value, (low, high) = found["correctness_rate"]
    assert value == pytest.approx(9 / 12)
    assert 0 <= low <= value <= high <= 1
    assert entry_scores(attempts=attempts, seed=seed_of(1, 2, 3)) == found  # seeded
    assert (
        entry_scores(attempts=attempts, seed=seed_of(9))["correctness_rate"]
        != found["correctness_rate"]
        or True
    )  # another seed may differ; the same seed never does


def test_identical_attempts_of_identical_tasks_have_a_zero_width_interval():
    same = attempt(2.0, 2.0, 2.0)
    value, interval = entry_scores(attempts=[same, same], seed=3)["performance_score"]
    assert value == 2.0 and interval == (2.0, 2.0)


def test_the_paired_interval_of_an_uplift_needs_two_attempts_on_each_side():
    without = [attempt(1.0, None, None), attempt(1.0, 1.0, None)]
    guided = [attempt(2.0, 2.0, None), attempt(2.0, 2.0, 2.0)]
    found = paired_scores(without=without, with_guidance=guided, seed=5)
    rate = found["correctness_rate"]
    assert rate["without"] == pytest.approx(0.5) and rate["with_guidance"] == pytest.approx(5 / 6)
    assert rate["uplift"] == pytest.approx(5 / 6 - 0.5)
    low, high = rate["uplift_ci"]
    assert low <= rate["uplift"] <= high
    # Paired geomean over the tasks correct on both sides (t0, t1): 1 → 2.
    geo = found["geomean_speedup"]
    assert (geo["without"], geo["with_guidance"], geo["n"]) == (1.0, 2.0, 2)
    single = paired_scores(without=without[:1], with_guidance=guided, seed=5)
    assert single["correctness_rate"]["uplift_ci"] is None


@pytest.mark.parametrize(
    ("entries", "higher", "expected"),
    [
        # Disjoint intervals: strict ranks, no tie.
        (
            [(3.0, (2.8, 3.2)), (2.0, (1.8, 2.2)), (1.0, (0.9, 1.1))],
            True,
            [(1, False), (2, False), (3, False)],
        ),
        # The first two overlap: both rank 1, tied; the third is below both.
        (
            [(3.0, (2.0, 3.5)), (2.5, (2.1, 2.9)), (1.0, (0.9, 1.1))],
            True,
            [(1, True), (1, True), (3, False)],
        ),
        # A single run's interval is its value.
        ([(2.0, None), (2.0, None), (1.0, None)], True, [(1, True), (1, True), (3, False)]),
        # Lower is better (turns).
        ([(300.0, None), (200.0, (150.0, 250.0))], False, [(2, False), (1, False)]),
        ([(None, None), (1.0, None)], True, [(None, False), (1, False)]),
    ],
)
def test_ranks_are_tied_where_intervals_overlap(entries, higher, expected):
    assert tied_ranks(entries, higher_is_better=higher) == expected

"""bench/lease_timeline.py: what the GPU did between timed phases, from the lease's own
timeline and the driver's utilisation samples; and the lease keeps that timeline only
where a measurement asked for it."""

from __future__ import annotations

import pytest

from evaluator.harness import gpulease
from evaluator.harness.leasereport import TIMELINE
from tests.bench_scripts import bench_script

timeline = bench_script("lease_timeline")


def test_each_held_pairs_with_the_next_freed_of_its_process():
    lines = [
        "100.0 11 held 3",
        "104.0 11 freed 0",
        "104.5 12 freed 0",  # a phase that failed before it was held
        "110.0 12 held 2",
        "111.5 12 freed 0",
        "120.0 13 held 1",  # cut short: never freed
        "garbage",
    ]
    assert timeline.held_intervals(lines) == [(100.0, 104.0), (110.0, 111.5)]


def test_samples_are_read_in_order_and_once():
    lines = ["3000000,50", "1000000,100", "1000000,100", "x,1", "2000000,0"]
    assert timeline.read_samples(lines) == [(1.0, 100), (2.0, 0), (3.0, 50)]


def test_the_summary_splits_the_gpus_utilisation_at_the_timed_phases():
    intervals = [(10.0, 20.0), (30.0, 35.0)]
    # One sample a second over [0, 40): 60 % while timed; between, 13 busy and 12 idle.
    samples = [(float(t), 60 if 10 <= t < 20 or 30 <= t < 35 else (95 if t % 2 else 5))
               for t in range(40)]  # fmt: skip
    summary = timeline.summarise(intervals, samples, start=0.0, end=40.0)
    assert summary["span_s"] == 40.0 and summary["held_s"] == 15.0
    assert summary["held_share"] == pytest.approx(15 / 40, abs=1e-3)
    assert summary["timed_phases"] == 2 and summary["samples"] == 40
    assert summary["utilisation_held_pct"] == 60.0
    assert summary["utilisation_between_pct"] == pytest.approx((13 * 95 + 12 * 5) / 25, abs=0.1)
    assert summary["between_busy_share"] == pytest.approx(0.52, abs=0.01)
    assert summary["between_idle_share"] == pytest.approx(0.48, abs=0.01)
    # A phase that began before the span counts only inside it.
    assert timeline.summarise([(-5.0, 5.0)], samples, 0.0, 40.0)["held_s"] == 5.0
    assert "held alone 15.0 s" in timeline.report_text(summary)


def test_the_lease_keeps_a_timeline_only_where_one_was_asked_for(tmp_path):
    quiet, asked = tmp_path / "quiet", tmp_path / "asked"
    asked.mkdir()
    (asked / TIMELINE).touch()
    for folder in (quiet, asked):
        with gpulease.joined(folder) as lease, lease.exclusive():
            pass
    assert not (quiet / TIMELINE).exists()
    events = [line.split()[2] for line in (asked / TIMELINE).read_text().splitlines()]
    assert events == ["held", "freed"]
    [(start, end)] = timeline.held_intervals((asked / TIMELINE).read_text().splitlines())
    assert end >= start

"""bench/gpu_run_bundle.py's reading of finished evaluations: each line and the run's
totals carry what the GPU lease cost (held alone, waited for, frozen) and how many clean
references were reused, and a call that is to stop its workers stops watching early
enough to do so within its deadline."""

from __future__ import annotations

import argparse

from tests.bench_scripts import bench_script


def _row(pk: int, lease: dict) -> dict:
    return {
        "pk": pk, "task": "row_softmax", "status": "correct", "seconds": 40.0, "attempts": 1,
        "uuid": "GPU-1", "message": "correct on all 7 workloads", "finished": "2026-12-04T12:00:00",
        "phases": {"child": 20.0, "judge": 5.0}, "stages": {}, "lease": lease,
    }  # fmt: skip


def test_each_line_and_the_totals_say_what_the_gpu_lease_cost(capsys):
    bundles = bench_script("gpu_run_bundle")
    rows = [
        _row(1, {"exclusive_held_s": 12.4, "exclusive_wait_s": 3.0, "frozen_s": 30.2}),
        _row(2, {"exclusive_held_s": 8.0, "exclusive_wait_s": 1.5, "frozen_s": 0.0}),
        _row(3, {}),  # no lease: one evaluation at a time, or interpret mode
    ]
    bundles.report(rows, set())
    lines = capsys.readouterr().out.splitlines()
    assert "lease: exclusive_held 12s exclusive_wait 3s frozen 30s" in lines[0]
    assert "lease" not in lines[2]
    state = {"segments": [{"start": 0.0, "end": 100.0}]}
    totals = bundles.summary(rows, state)["lease_s"]
    assert totals == {"exclusive_held_s": 20.4, "exclusive_wait_s": 4.5, "frozen_s": 30.2}


def test_the_totals_count_the_clean_references_taken_from_an_earlier_evaluation():
    bundles = bench_script("gpu_run_bundle")
    rows = [_row(1, {}), _row(2, {}), _row(3, {}), _row(4, {})]
    rows[0]["clean_age"] = 0.0  # measured for it
    rows[1]["clean_age"] = 41.5  # the twin's, 41.5 s old
    rows[2]["clean_age"] = None  # none: not correct, or interpret mode
    state = {"segments": [{"start": 0.0, "end": 100.0}]}
    assert bundles.summary(rows, state)["clean_reference_reused"] == [1, 2]


def test_a_call_that_stops_its_workers_stops_watching_before_its_deadline():
    bundles = bench_script("gpu_run_bundle")
    stop = argparse.Namespace(deadline_s=500.0, keep_workers=False)
    keep = argparse.Namespace(deadline_s=500.0, keep_workers=True)
    assert bundles.watch_until(1000.0, stop) == 1000.0 + 500.0 - bundles.STOP_S
    assert bundles.watch_until(1000.0, keep) == 1500.0


def test_the_totals_say_why_an_evaluation_was_taken_again_and_the_largest_scratch_folder():
    bundles = bench_script("gpu_run_bundle")
    rows = [_row(1, {}), _row(2, {})]
    rows[0] |= {"run": 1, "scratch_mib": 29840.0}
    rows[1] |= {"run": 2, "attempts": 2, "scratch_mib": 1460.0}
    rows[1]["last_error"] = "Attempt 1 hit a worker error (OSError: [Errno 28] No space left)"
    totals = bundles.summary(rows, {"segments": [{"start": 0.0, "end": 100.0}]})
    assert totals["taken_again"] == 1
    assert totals["taken_again_why"] == [
        "row_softmax (run 2): Attempt 1 hit a worker error (OSError: [Errno 28] No space left)"
    ]
    assert totals["scratch_gib_peak"] == 29.1

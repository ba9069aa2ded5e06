"""What the GPU did while a worker shared it: its busy share with and without a timed phase.

    python bench/lease_timeline.py sample OUT.csv          # until stopped, on CUDA_VISIBLE_DEVICES
    python bench/lease_timeline.py report --timeline LEASE/timeline.log --samples OUT.csv \
                                          [--start T --end T]

Several evaluations share a GPU through its lease (evaluator/harness/gpulease.py): one
at a time holds it alone to be timed, while the others are frozen, and between timed
phases they all run side by side. Whether more evaluations at once would finish sooner
depends on what the GPU does between timed phases: busy all the time (then only less
GPU work helps) or often idle (then more at once, or shorter waits, do).

`sample` appends the driver's utilisation samples (NVML's `nvmlDeviceGetSamples`: the
share of each sampling period in which a kernel ran, stamped with the wall clock) to
OUT.csv as "microseconds,percent" lines, once a second, until it is stopped.
bench/gpu_campaign.py runs it beside its workers, and makes the lease folder's
`timeline.log`, which the lease keeps only where it exists: a line each time an
evaluation takes the GPU alone and gives it back.

`report` reads both and prints, over the campaign's span (`--start`/`--end`, Unix
seconds; else the samples' own): the seconds and share of the span held alone, the
timed phases, and the GPU's mean utilisation while one was held and while none was,
with the share of the time between timed phases that the GPU was busy (≥ 90 %) and
idle (≤ 10 %).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUSY, IDLE = 90, 10


def held_intervals(lines: Iterable[str]) -> list[tuple[float, float]]:
    """The (start, end) wall-clock seconds of each exclusive phase in a lease timeline.

    One phase is held at a time: each `held` pairs with the next `freed` of the same
    process; a `freed` without its `held` (a phase that failed before it was held) and a
    `held` never freed (a timeline cut short) are left out.
    """
    intervals, open_at = [], None
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        stamp, pid, event = float(parts[0]), parts[1], parts[2]
        if event == "held":
            open_at = (stamp, pid)
        elif event == "freed" and open_at is not None and open_at[1] == pid:
            intervals.append((open_at[0], stamp))
            open_at = None
    return intervals


def read_samples(lines: Iterable[str]) -> list[tuple[float, int]]:
    """(wall-clock seconds, percent busy) of each "microseconds,percent" line, in order."""
    samples = {}
    for line in lines:
        parts = line.strip().split(",")
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            samples[int(parts[0])] = int(parts[1])
    return [(us / 1e6, percent) for us, percent in sorted(samples.items())]


def summarise(
    intervals: list[tuple[float, float]],
    samples: list[tuple[float, int]],
    start: float | None = None,
    end: float | None = None,
) -> dict[str, Any]:
    """The span's time held alone and the GPU's utilisation inside and outside those phases."""
    start = start if start is not None else (samples[0][0] if samples else 0.0)
    end = end if end is not None else (samples[-1][0] if samples else start)
    clipped = [(max(a, start), min(b, end)) for a, b in intervals if b > start and a < end]
    held_s = sum(b - a for a, b in clipped)
    span = max(end - start, 0.0)

    def held_at(t: float) -> bool:
        return any(a <= t < b for a, b in clipped)

    inside = [p for t, p in samples if start <= t < end and held_at(t)]
    outside = [p for t, p in samples if start <= t < end and not held_at(t)]

    def mean(values: list[int]) -> float | None:
        return round(sum(values) / len(values), 1) if values else None

    def share(values: list[int], keep) -> float | None:
        return round(sum(1 for v in values if keep(v)) / len(values), 3) if values else None

    return {
        "span_s": round(span, 1),
        "held_s": round(held_s, 1),
        "held_share": round(held_s / span, 3) if span else None,
        "timed_phases": len(clipped),
        "samples": len(inside) + len(outside),
        "utilisation_held_pct": mean(inside),
        "utilisation_between_pct": mean(outside),
        "between_busy_share": share(outside, lambda v: v >= BUSY),
        "between_idle_share": share(outside, lambda v: v <= IDLE),
    }


def report_text(summary: dict[str, Any]) -> str:
    s = summary
    return (
        f"GPU lease timeline over {s['span_s']} s: held alone {s['held_s']} s "
        f"({s['held_share']}) in {s['timed_phases']} timed phases; utilisation "
        f"{s['utilisation_held_pct']} % while one was timed, {s['utilisation_between_pct']} % "
        f"between ({s['between_busy_share']} of that time ≥ {BUSY} %, "
        f"{s['between_idle_share']} ≤ {IDLE} %; {s['samples']} samples)"
    )


def sample(out: Path, every_s: float = 1.0) -> None:
    """Append the driver's utilisation samples to `out` until the process is stopped."""
    from evaluator.harness.gpuidle import Nvml

    nvml = Nvml()
    last = 0
    while True:
        found = [(us, pct) for us, pct in nvml.utilization_samples(last) if us > last]
        if found:
            with open(out, "a") as handle:
                handle.writelines(f"{us},{pct}\n" for us, pct in found)
            last = found[-1][0]
        time.sleep(every_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sampling = sub.add_parser("sample")
    sampling.add_argument("out", type=Path)
    reporting = sub.add_parser("report")
    reporting.add_argument("--timeline", type=Path, required=True)
    reporting.add_argument("--samples", type=Path, required=True)
    reporting.add_argument("--start", type=float)
    reporting.add_argument("--end", type=float)
    args = parser.parse_args()
    if args.command == "sample":
        sample(args.out)
        return
    summary = summarise(
        held_intervals(args.timeline.read_text().splitlines()),
        read_samples(args.samples.read_text().splitlines()),
        args.start,
        args.end,
    )
    print(report_text(summary))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()

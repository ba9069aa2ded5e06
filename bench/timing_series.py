"""Every timed call of an evaluation, in order: how does a drifting median drift?

    python bench/timing_series.py --task rmsnorm_residual --runs 3 [--timing K=V] [--out DIR]

Runs the real evaluator (the sandboxed child, as `python -m evaluator check`
does) on the task's expert, `--runs` times, and keeps what the summaries in
the verdict leave out: each workload's per-call reference and submission
times, in call order. For each run and workload it prints the medians of the
calls' thirds, so a state that changes within a timing phase shows as a step
and one fixed for the phase as three equal figures; the series go to
DIR/series.json. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.harness import orchestrate, protocol  # noqa: E402
from taskformat.package import DEFAULT_CATALOG_DIR, load_task  # noqa: E402
from taskformat.spec import Mode  # noqa: E402


def thirds(values: list[float]) -> str:
    n = len(values) // 3
    parts = [values[:n], values[n : 2 * n], values[2 * n :]]
    return " ".join(f"{statistics.median(p) * 1e3:7.2f}" for p in parts if p)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="rmsnorm_residual")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timing", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--out", type=Path, default=Path("gpu-results"))
    args = parser.parse_args()
    task = load_task(DEFAULT_CATALOG_DIR / args.task)
    source = (DEFAULT_CATALOG_DIR / args.task / "expert.py").read_text()
    overrides = {k: float(v) for k, _, v in (s.partition("=") for s in args.timing)}
    collected: list[dict] = []
    collect = protocol.collect

    def keeping(messages, plan, bad_messages=0):
        seen = collect(messages, plan, bad_messages)
        collected.append({name: dataclasses.asdict(t) for name, t in seen.timings.items()})
        return seen

    protocol.collect = keeping
    series = []
    for run in range(args.runs):
        verdict = orchestrate.evaluate(task=task, source=source, mode=Mode.CUDA, timing=overrides)
        timings = collected[-1]
        print(f"run {run + 1}: {verdict.status}")
        print(f"  {'workload':<28} reference by thirds (µs)       submission by thirds (µs)")
        for name, t in timings.items():
            print(f"  {name:<28} {thirds(t['ref_ms'])}   {thirds(t['sub_ms'])}")
        series.append(
            {n: {"ref_ms": t["ref_ms"], "sub_ms": t["sub_ms"]} for n, t in timings.items()}
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "series.json").write_text(json.dumps(series))


if __name__ == "__main__":
    main()

"""Several evaluations on one GPU at once, under its lease: same speedups, less wall time.

    python bench/gpu_pipeline.py [--jobs 6] [--counters] [--out DIR]
                                 [--kernels TASK:FILE,...] [--cases 4,4b,16,22,23]

Runs the real evaluator (`python -m evaluator check --gpu-lease DIR`, one process
per evaluation, as a worker with D2K_EVALUATIONS_PER_GPU does) twice over:

1. **alone**: each kernel of `--kernels` evaluated by itself, one after the other;
2. **pipeline full**: the same kernels again together with the exploit cases of
   `--cases` (the timing-sensitive ones: a side stream, a front-run of the cover,
   L2 persistence, the reference slowed through Python and through the
   dispatcher), `--jobs` evaluations at once, every one under the GPU's lease.

It prints, per kernel, the verdict and geomean speedup alone and with the pipeline
full and their difference in percent (the largest per-workload difference too); the
cases' verdicts against the ones they must get; each verdict's lease report
(exclusive phases, seconds waited and drained, seconds frozen); and the wall time
of each part with its time per evaluation. Everything goes to DIR/pipeline.json.
Counters are off unless `--counters` (they change no speedup and cost ~10 s each).
Exits 1 unless every verdict is as expected and every speedup within 1 %.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gpu_check  # noqa: E402

from evaluator.exploits.cases import CASES  # noqa: E402

KERNELS = (
    "row_softmax:catalog/row_softmax/expert.py",
    "histogram:catalog/histogram/expert_cuda.py",
    "layernorm_fwd:catalog/layernorm_fwd/expert.py",
    "swiglu_fused:catalog/swiglu_fused/expert.py",
    "reduction_sum:catalog/reduction_sum/expert.py",
)
TIMING_SENSITIVE = ("4", "4b", "16", "22", "23")
SAME_WITHIN = 0.01


def evaluate(task: str, path: Path, lease: Path, *, counters: bool, quick: bool) -> dict:
    extra = ["--gpu-lease", str(lease), *([] if counters else ["--no-counters"])]
    timing = gpu_check.QUICK if quick else None
    limit = 480 if path.name.endswith("_cuda.py") or "25_" in path.name else 240
    return gpu_check.check(task, path, timeout=limit, timing=timing, extra=extra)


def speedups(v: dict) -> dict[str, float]:
    return {w["name"]: w["speedup"] for w in v.get("workloads", []) if w.get("speedup")}


def compare(label: str, alone: dict, full: dict) -> dict:
    a, f = speedups(alone), speedups(full)
    common = sorted(set(a) & set(f))
    diffs = [abs(f[n] / a[n] - 1) for n in common]
    ga, gf = gpu_check.geomean([a[n] for n in common]), gpu_check.geomean([f[n] for n in common])
    row = {
        "kernel": label,
        "alone": alone["status"],
        "full": full["status"],
        "geomean_alone": round(ga, 4),
        "geomean_full": round(gf, 4),
        "geomean_diff_pct": round(100 * (gf / ga - 1), 2) if common else None,
        "worst_workload_diff_pct": round(100 * max(diffs), 2) if diffs else None,
        "lease_full": full.get("environment", {}).get("gpu_lease"),
    }
    ok = alone["status"] == full["status"] == "correct" and common
    row["ok"] = bool(ok and abs(gf / ga - 1) <= SAME_WITHIN)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=6)  # D2K_EVALUATIONS_PER_GPU's default
    parser.add_argument("--counters", action="store_true")
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--cases", default=",".join(TIMING_SENSITIVE))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-results")))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("D2K_HIDDEN_SEED", secrets.token_hex(32))
    lease = Path(tempfile.mkdtemp(prefix="d2k-gpu-lease-"))
    kernels = [(k.split(":", 1)[0], ROOT / k.split(":", 1)[1]) for k in args.kernels.split(",")]
    cases = [c for c in CASES if c.number in args.cases.split(",")]
    report: dict = {"jobs": args.jobs, "counters": args.counters}

    started = time.monotonic()
    alone = {}
    for task, path in kernels:
        alone[f"{task}:{path.name}"] = v = evaluate(task, path, lease, counters=args.counters,
                                                     quick=False)  # fmt: skip
        gpu_check.print_verdict(task, path.name + " (alone)", v)
    report["alone_wall_s"] = round(time.monotonic() - started, 1)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        full_futures = {
            f"{task}:{path.name}": pool.submit(
                evaluate, task, path, lease, counters=args.counters, quick=False
            )
            for task, path in kernels
        }
        case_futures = {
            case.number: pool.submit(
                evaluate,
                case.task,
                case.kernel,
                lease,
                counters=args.counters,
                quick=case.number not in gpu_check.FIGURE_CASES,
            )
            for case in cases
        }
        full = {label: f.result() for label, f in full_futures.items()}
        case_verdicts = {number: f.result() for number, f in case_futures.items()}
    report["full_wall_s"] = round(time.monotonic() - started, 1)
    report["full_evaluations"] = len(full) + len(case_verdicts)

    rows = [compare(label, alone[label], full[label]) for label in alone]
    case_rows = []
    for case in cases:
        v = case_verdicts[case.number]
        ok, note = gpu_check._judge_case(case, v)
        row = gpu_check._row(case.number, case.expected, v, ok, note)
        case_rows.append({**row, "lease": v.get("environment", {}).get("gpu_lease")})
    report.update(kernels=rows, cases=case_rows)
    report["verdicts"] = {"alone": alone, "full": full, "cases": case_verdicts}
    (args.out / "pipeline.json").write_text(json.dumps(report, indent=1, default=str))
    print_report(report)
    return 0 if all(r["ok"] for r in rows + case_rows) else 1


def print_report(report: dict) -> None:
    print("\n| kernel | alone | full | geomean alone | geomean full | diff % | worst % | ok |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for r in report["kernels"]:
        print(f"| {r['kernel']} | {r['alone']} | {r['full']} | {r['geomean_alone']} | "
              f"{r['geomean_full']} | {r['geomean_diff_pct']} | {r['worst_workload_diff_pct']} "
              f"| {r['ok']} |")  # fmt: skip
    print("\n| case | expected | verdict (pipeline full) | flags | ok |")
    print("|---|---|---|---|---|")
    for r in report["cases"]:
        print(f"| {r['case']} | {r['expected']} | {r['verdict']} | {', '.join(r['flags'])} "
              f"| {r['ok']} |")  # fmt: skip
    print("\nlease reports (pipeline full):")
    for r in report["kernels"]:
        print(f"  {r['kernel']}: {r['lease_full']}")
    for r in report["cases"]:
        print(f"  case {r['case']}: {r['lease']}")
    n_alone, n_full = len(report["kernels"]), report["full_evaluations"]
    print(f"\nalone: {report['alone_wall_s']} s for {n_alone} evaluations "
          f"({report['alone_wall_s'] / max(n_alone, 1):.1f} s each); pipeline full "
          f"({report['jobs']} at once): {report['full_wall_s']} s for {n_full} "
          f"({report['full_wall_s'] / max(n_full, 1):.1f} s each)")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

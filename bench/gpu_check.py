"""The whole GPU check in one call: ceilings, experts, exploit kernels, stability.

    python bench/gpu_check.py experts [--tasks a,b] [--timing K=V] [--out DIR]
    python bench/gpu_check.py files TASK:FILE [TASK:FILE ...] [--timing K=V] [--out DIR]
    python bench/gpu_check.py exploits [--cases 4b,5] [--timing K=V] [--out DIR]
    python bench/gpu_check.py stability --repeat 5 [--tasks a,b] [--timing K=V] [--out DIR]
    python bench/gpu_check.py stability --arm writes:flush_reads=0 --arm reads:flush_reads=1
    python bench/gpu_check.py collect DIR [--out DIR]
    python bench/gpu_check.py integrity [--out DIR]

`integrity` runs every GPU test of the evaluator's integrity checks in one
go (pytest -m gpu: the exploit cases for the aten allow-list, the reference
slowed through Python and the dispatcher with their honest twins, cuBLAS
through ctypes, CUDA C++ through load_inline and its build error, the
secret probe in cuda mode, and every expert, which must stay `correct`
under the allow-list and kernel provenance), keeps the verdicts in DIR and
prints the tables as `collect` does.

`--timing` passes timing settings to every check (`--arm`, for stability,
runs several sets in turn). `collect` reads the verdicts that `pytest -m gpu`
kept (D2K_GPU_VERDICTS=DIR, see tests/exploits/test_exploits_on_gpu.py) and
prints the same tables.

Runs the real evaluator (python -m evaluator check, one process per
evaluation, as a worker does) and prints a table; the full verdicts go to
DIR as JSON. Results in docs/ name the command and the GPU that produced them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.harness.package import DEFAULT_CATALOG_DIR, iter_task_dirs  # noqa: E402


def check(
    task: str, path: Path, mode: str = "cuda", timeout: int = 300, timing: list | None = None
) -> dict:
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "check",
            "--task",
            task,
            "--mode",
            mode,
            "--timeout",
            str(timeout),
            "--json",
            *(f"--timing={setting}" for setting in timing or []),
            str(path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return {
            "status": "cli_error",
            "message": proc.stderr.strip()[-500:],
            "workloads": [],
            "flags": [],
            "wall": time.monotonic() - started,
        }
    verdict = json.loads(proc.stdout)
    verdict["wall"] = time.monotonic() - started
    return verdict


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def print_verdict(task: str, label: str, v: dict) -> None:
    flags = "; ".join(f"{f['check']}: {f['detail']}" for f in v.get("flags", []))
    print(f"{task:<24} {label:<34} {v['status']:<14} {v['wall']:6.1f}s  {v['message'][:120]}")
    if flags:
        print(f"    flags: {flags[:400]}")
    for w in v.get("workloads", []):
        if w.get("median_ms"):
            t = w["timing"]
            print(
                f"    {w['name']:<30} {w['status']:<10} sub {w['median_ms'] * 1e3:10.1f} us "
                f"(iqr {t['iqr_ms'] / w['median_ms']:.1%}, n={t['calls']})  "
                f"ref {w['ref_median_ms'] * 1e3:10.1f} us  x{w['speedup']:.2f}  "
                f"SOL {w['sol_fraction'] or 0:.0%}  cold {t['cold_start_ms']:.0f} ms"
            )
            if t.get("cover_us"):
                print(
                    f"    {'':<30} covers {t['cover_us']:.0f} / {t['ref_cover_us']:.0f} us, "
                    f"host-bound calls {t['host_bound_calls']} / {t['ref_host_bound_calls']}"
                )
        elif w["status"] != "correct":
            print(f"    {w['name']:<30} {w['status']:<10} {w['message'][:150]}")


def save(out: Path, what: str, results: dict) -> None:
    # Written after every item, so a run cut short still returns what it measured.
    (out / f"{what}.json").write_text(json.dumps(results, indent=1, default=str))


def tasks_arg(value: str | None) -> list[str]:
    names = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR)]
    return [t for t in value.split(",")] if value else names


def print_case_table(cases: list, results: dict) -> None:
    print("\nclass | kernel | verdict | caught by")
    for case in cases:
        v = results[case.file]
        caught = ", ".join(sorted({f["check"] for f in v.get("flags", [])})) or v["message"][:80]
        print(f"{case.number} {case.title} | {case.file} | {v['status']} | {caught}")


def collect(folder: Path, out: Path) -> None:
    """The verdicts kept by `pytest -m gpu`, as `exploits.json` and `experts.json` in `out`."""
    from tests.exploits.cases import CASES

    experts, exploits = {}, {}
    for path in sorted(folder.glob("expert-*.json")):
        task = path.stem.removeprefix("expert-")
        verdict = json.loads(path.read_text())
        experts[task] = {**verdict, "wall": verdict["wall_seconds"]}
        print_verdict(task, "expert", experts[task])
    cases = [c for c in CASES if (folder / f"case-{c.number}.json").exists()]
    for case in cases:
        v = json.loads((folder / f"case-{case.number}.json").read_text())
        exploits[case.file] = {"expected": case.expected, **v, "wall": v["wall_seconds"]}
        print_verdict(case.task, case.file, exploits[case.file])
    print_case_table(cases, exploits)
    save(out, "experts", experts)
    save(out, "exploits", exploits)


def print_spreads(task: str, arm: str, runs: list) -> None:
    """Per workload: the spread of the runs' medians and of their speedups."""
    if arm:
        print(f"arm {arm}")
    names = [w["name"] for w in runs[0]["workloads"] if w.get("median_ms")]
    for name in names:
        rows = [next(w for w in r["workloads"] if w["name"] == name) for r in runs]
        meds = [w["median_ms"] * 1e3 for w in rows]
        refs = [w["ref_median_ms"] * 1e3 for w in rows]
        sps = [w["speedup"] for w in rows]
        wall = sum(r["wall"] for r in runs) / len(runs)
        print(
            f"{task:<22} {name:<28} median {min(meds):9.2f}..{max(meds):9.2f} us"
            f"  spread {max(meds) / min(meds) - 1:6.2%}   reference spread "
            f"{max(refs) / min(refs) - 1:6.2%}   speedup spread "
            f"{max(sps) / min(sps) - 1:6.2%}  wall {wall:.1f}s"
        )


INTEGRITY_CASES = ("0", "13", "20", "21", "22", "23", "24", "25", "25b")


def integrity(out: Path) -> None:
    """Every GPU check of the integrity defences, through pytest -m gpu, then their tables."""
    verdicts = out / "verdicts"
    test = "tests/exploits/test_exploits_on_gpu.py::test_every_case_gets_its_verdict_on_the_gpu"
    env = {**os.environ, "D2K_GPU_VERDICTS": str(verdicts)}
    for args in (
        ["tests/exploits/test_secret_probe.py"],
        [f"{test}[{number}]" for number in INTEGRITY_CASES],
        ["tests/exploits/test_exploits_on_gpu.py", "-k", "every_expert"],
    ):
        command = [sys.executable, "-m", "pytest", "-o", "addopts=", "-m", "gpu", "-v", *args]
        print("$", " ".join(command), flush=True)
        subprocess.run(command, cwd=ROOT, env=env, check=False)
    collect(verdicts, out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "what",
        choices=["experts", "files", "exploits", "stability", "ceilings", "collect", "integrity"],
    )
    parser.add_argument("items", nargs="*")
    parser.add_argument("--tasks")
    parser.add_argument("--cases", help="comma-separated exploit case numbers")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--timing", action="append", default=[], help="KEY=VALUE, passed to every check"
    )
    parser.add_argument(
        "--arm",
        action="append",
        default=[],
        help="stability: NAME:K=V,K=V, timing settings of one arm of an A/B (repeatable)",
    )
    parser.add_argument("--out", type=Path, default=Path("gpu-results"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.what == "collect":
        if len(args.items) != 1:
            parser.error("collect takes one folder: the D2K_GPU_VERDICTS of a pytest -m gpu run")
        collect(Path(args.items[0]), args.out)
        return
    if args.what == "integrity":
        integrity(args.out)
        return
    subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu",
            "--format=csv",
        ],
        check=False,
    )
    ceil = subprocess.run(
        [sys.executable, "-m", "evaluator", "ceilings"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    print(ceil.stdout or ceil.stderr)
    results: dict[str, object] = {}
    if args.what == "experts":
        for task in tasks_arg(args.tasks):
            v = check(task, DEFAULT_CATALOG_DIR / task / "expert.py", timing=args.timing)
            # What the expert's speedup is over: the evaluator times baseline.py
            # where the task has one, else reference.py.
            has_baseline = (DEFAULT_CATALOG_DIR / task / "baseline.py").is_file()
            v["timed_against"] = "baseline.py" if has_baseline else "reference.py"
            print_verdict(task, "expert", v)
            speedups = [w["speedup"] for w in v["workloads"] if w.get("speedup")]
            print(f"    geomean speedup {geomean(speedups):.3f} over {len(speedups)} workloads")
            results[task] = v
            save(args.out, args.what, results)
    elif args.what == "files":
        for item in args.items:
            task, path = item.split(":", 1)
            v = check(task, ROOT / path, timing=args.timing)
            print_verdict(task, Path(path).name, v)
            results[item] = v
    elif args.what == "exploits":
        from tests.exploits.cases import CASES

        wanted = args.cases.split(",") if args.cases else None
        cases = [c for c in CASES if wanted is None or c.number in wanted]
        for case in cases:
            # An endless loop is caught by the watchdog whatever the limit: keep it short.
            limit = 20 if "timeout" in case.expected else 120
            limit = 480 if case.number in ("25", "25b") else limit
            path = ROOT / "tests" / "exploits" / "kernels" / case.file
            v = check(case.task, path, timeout=limit, timing=args.timing)
            print_verdict(case.task, case.file, v)
            results[case.file] = {"expected": case.expected, **v}
            save(args.out, args.what, results)
        print_case_table(cases, results)
    elif args.what == "stability":
        arms = dict(arm.split(":", 1) for arm in args.arm) or {"": ",".join(args.timing)}
        for task in tasks_arg(args.tasks):
            runs: dict[str, list] = {name: [] for name in arms}
            # Arms alternate run by run, so that a change of the machine's
            # state over time falls on all of them alike.
            for _ in range(args.repeat):
                for arm, settings in arms.items():
                    timing = [s for s in settings.split(",") if s]
                    path = DEFAULT_CATALOG_DIR / task / "expert.py"
                    runs[arm].append(check(task, path, timing=timing))
            for arm, arm_runs in runs.items():
                results[f"{task}:{arm}" if arm else task] = arm_runs
                print_spreads(task, arm, arm_runs)
            save(args.out, args.what, results)
    save(args.out, args.what, results)


if __name__ == "__main__":
    main()

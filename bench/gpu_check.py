"""The whole GPU check in one call: ceilings, experts, exploit kernels, stability.

    python bench/gpu_check.py experts [--tasks a,b] [--timing K=V] [--out DIR]
    python bench/gpu_check.py files TASK:FILE [TASK:FILE ...] [--timing K=V] [--out DIR]
    python bench/gpu_check.py exploits [--cases 4b,5] [--timing K=V] [--out DIR]
    python bench/gpu_check.py stability --repeat 5 [--tasks a,b] [--timing K=V] [--out DIR]
    python bench/gpu_check.py stability --arm ph40: --arm ph5:phases=5
    python bench/gpu_check.py collect DIR [--out DIR]
    python bench/gpu_check.py integrity [--jobs 4] [--parts quick,alone,...] [--cases 0,41,probe]
                                        [--out DIR]
    python bench/gpu_check.py integrity-table FILE [FILE ...]

Every evaluation of a call runs under one GPU lease (`--gpu-lease`), as a worker
that runs several evaluations of its GPU at once does: `--jobs` evaluations at
once never share a timed phase. `--no-share` runs them without it.

`integrity` runs every GPU check of the evaluator's integrity in one call:
every exploit case in cuda mode against its expected verdict (the reference
slowed through Python and through torch.library, 22 and 23, must be
`flagged` with reference_tampering or gain nothing over their honest twins),
the secret probe in cuda mode, the honest Triton and CUDA C++ row softmaxes
(cases 0 and 25) with their speedups, the CUDA C++ build error (25b) and the
histogram CUDA C++ expert (catalog/histogram/expert_cuda.py). It prints a
markdown table (case, expected, verdict, flags, speedups, seconds), writes
integrity.json to $OUT (else --out), and exits 1 unless every row is as
expected. Cases whose verdict needs no figure run `--jobs` at a time with
brief timing (QUICK); everything timed for its figures runs alone. The whole
table takes longer than one 10-minute device call: `--parts` runs some of its
five groups (quick: the pooled cases and the secret probe; alone; figures;
histogram; busy: an endless kernel, 19g, beside cases 0 and 20 under the shared
lease, named and ended while they are timed), each call writing
integrity-<parts>.json, and `integrity-table` prints the one table of several
such files. `--cases` keeps only the cases it names (`probe` for the secret
probe, `histogram` for the histogram expert, `busy` for the busy group).

`--timing` passes timing settings to every check (`--arm`, for stability,
runs several sets in turn). `collect` reads the verdicts that `pytest -m gpu`
kept (D2K_GPU_VERDICTS=DIR, see tests/exploits/test_exploits_on_gpu.py) and
prints the same tables.

Runs the real evaluator (python -m evaluator check, one process per
evaluation, as a worker does) and prints a table; the full verdicts go to
DIR as JSON. The hidden workloads are drawn from D2K_HIDDEN_SEED, or, where
it is not set, from a fresh throwaway secret of this call's (never printed):
the kernels meet hidden workloads as on a deployment. Results in docs/ name
the command and the GPU that produced them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.exploits.cases import (  # noqa: E402
    CASES,
    HONEST_TWINS,
    TWIN_SPEEDUP_MARGIN,
    forged_counters,
)
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs  # noqa: E402

# `--share`: every evaluation of this call takes its timed phases in turn on one GPU lease.
SHARED: list[str] = []


def check(
    task: str,
    path: Path,
    mode: str = "cuda",
    timeout: int = 300,
    timing: list | None = None,
    extra: list[str] | None = None,
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
            *(extra or []),
            *([] if "--gpu-lease" in (extra or []) else SHARED),
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


# Timing settings for the evaluations whose expected verdict needs no figure:
# the protocol runs whole (warm-up, timed and audit calls, batch), in brief.
QUICK = ["max_calls=40", "phases=4", "warmup_calls=1", "warmup_s=0", "budget_s=0.5", "batch_ms=5"]
# Timed at the production settings, one at a time: their figures are the point
# (the reference slowed, 22 and 23, is caught by comparing figures).
FIGURE_CASES = ("0", "22", "23", "25", "41")
# Expected `incorrect` or `correct` (or a fork bomb, which shares the sandbox uid's process
# count): alone, so that no other evaluation's GPU work can add a timing flag; and 47, whose
# counters pass must read a table (one Nsight Compute session on the GPU at a time).
ALONE_CASES = (
    "1", "2", "4b", "9", "10", "14", "15", "19e", "19f", "20", "30e", "31", "40", "42", "47"
)  # fmt: skip
HISTOGRAM_CUDA = DEFAULT_CATALOG_DIR / "histogram" / "expert_cuda.py"
PROBE_TEST = (
    "tests/exploits/test_secret_probe.py::"
    "test_on_the_gpu_the_probe_finds_no_seed_before_it_is_drawn_and_no_hidden_workload"
)


def _case_limit(case) -> int:
    if "timeout" in case.expected:
        return 20  # the watchdog catches an endless loop whatever the limit
    return 480 if case.number in ("25", "25b") else 240


def _case_args(case) -> list[str]:
    return ["--memory-gb", "2"] if case.number in ("19d", "44") else []


def _row(label: str, expected: tuple[str, ...], v: dict, ok: bool, note: str = "") -> dict:
    speedups = [w["speedup"] for w in v.get("workloads", []) if w.get("speedup")]
    return {
        "case": label,
        "expected": "/".join(expected),
        "verdict": v["status"],
        "flags": sorted({f["check"] for f in v.get("flags", [])}),
        "speedups": [round(x, 3) for x in speedups],
        "seconds": round(v["wall"], 1),
        "ok": ok,
        "note": note,
        "message": v.get("message", "")[:300],
    }


def _judge_case(case, v: dict) -> tuple[bool, str]:
    ok = v["status"] in case.expected
    checks = {f["check"] for f in v.get("flags", [])}
    if ok and case.flag and v["status"] == "flagged" and case.flag not in checks:
        return False, f"flagged, but not by {case.flag}"
    if ok and case.number == "47":
        note = v.get("environment", {}).get("counters", "")
        if forged := forged_counters(v):
            return False, f"forged counters read for {', '.join(forged)}"
        if not note.startswith("read by"):
            return False, f"no counters to compare: {note[:120]}"
    return ok, ""


INTEGRITY_PARTS = ("quick", "alone", "figures", "histogram", "busy")
# The busy part: an endless Triton kernel beside honest evaluations under one GPU lease.
# Stopped for another's timed phase, its kernel keeps the GPU busy; it must be named and
# ended (`timeout`), and the honest ones must end `correct`, never `worker_error`.
BUSY_CASES = ("19g", "0", "20")


def integrity(
    out: Path, jobs: int, parts: tuple[str, ...] = INTEGRITY_PARTS, only: set[str] | None = None
) -> list[dict]:
    """Every GPU check of the evaluator's integrity, in one call; a markdown table and JSON.

    Four groups so that no timed figure shares the GPU: the cases whose
    verdict needs no figure run `jobs` at a time with QUICK timing (and the
    secret probe beside them); the cases that must be `incorrect` run alone
    with QUICK timing; the honest kernels whose speedups are reported, and
    the reference-slowing cases, run alone at the production settings; a
    reference-slowing case that is not flagged is compared with its twin. A
    fifth, busy, shares the GPU on purpose: an endless kernel beside honest ones.
    """
    from concurrent.futures import ThreadPoolExecutor

    # `only`: the case numbers to run ("probe" for the secret probe, "histogram" for the
    # histogram CUDA expert); all of them where None.
    cases = [c for c in CASES if only is None or c.number in only]
    rows: list[dict] = []

    def run_case(case, timing: list[str] | None) -> dict:
        v = check(case.task, case.kernel, timeout=_case_limit(case), timing=timing,
                  extra=_case_args(case))  # fmt: skip
        ok, note = _judge_case(case, v)
        row = _row(case.number, case.expected, v, ok, note)
        print_verdict(case.task, case.file, v)
        return {**row, "verdict_json": v}

    def probe() -> dict:
        started = time.monotonic()
        command = [sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider",
                   "-m", "gpu", "-q", PROBE_TEST]  # fmt: skip
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        last = (proc.stdout.strip().splitlines() or [""])[-1]
        status = "passed" if proc.returncode == 0 else "failed"
        v = {"status": status, "wall": time.monotonic() - started, "message": last}
        print(f"secret probe (cuda mode): {v['status']}\n{proc.stdout[-1500:]}", flush=True)
        return _row("secret probe", ("passed",), v, proc.returncode == 0)

    name = "integrity" if parts == INTEGRITY_PARTS else "integrity-" + "-".join(parts)

    def keep(new: list[dict]) -> None:
        # Saved after every group, so a call cut short still returns what it measured.
        rows.extend(new)
        table = [{k: v for k, v in r.items() if k != "verdict_json"} for r in rows]
        verdicts = {r["case"]: r["verdict_json"] for r in rows if "verdict_json" in r}
        save(out, name, {"rows": table, "verdicts": verdicts, "parts": list(parts)})

    if "quick" in parts:
        pooled = [c for c in cases if c.number not in FIGURE_CASES + ALONE_CASES]
        with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
            futures = [pool.submit(probe)] if only is None or "probe" in only else []
            futures += [pool.submit(run_case, c, QUICK) for c in pooled]
            keep([f.result() for f in futures])
    for case in cases if "alone" in parts else ():
        if case.number in ALONE_CASES:
            keep([run_case(case, QUICK)])
            if case.number in HONEST_TWINS:
                keep([_twin(case, QUICK, None)])
    for case in cases if "figures" in parts else ():
        if case.number not in FIGURE_CASES:
            continue
        row = run_case(case, None)
        keep([row])
        if case.number in HONEST_TWINS and row["verdict"] != "flagged":
            # Not caught: it passes only if it gains nothing over its honest twin.
            keep([_twin(case, None, (row, TWIN_SPEEDUP_MARGIN))])
    if "busy" in parts and (only is None or "busy" in only):
        busy = [c for c in CASES if c.number in BUSY_CASES]
        with ThreadPoolExecutor(max_workers=len(busy)) as pool:
            rows_busy = [f.result() for f in [pool.submit(run_case, c, QUICK) for c in busy]]
        keep([{**r, "case": f"{r['case']} (busy)"} for r in rows_busy])
    if "histogram" in parts and (only is None or "histogram" in only):
        v = check("histogram", HISTOGRAM_CUDA, timeout=480)
        print_verdict("histogram", "expert_cuda.py", v)
        ok = v["status"] == "correct"
        keep([{**_row("histogram CUDA expert", ("correct",), v, ok), "verdict_json": v}])
    print_integrity_table(rows)
    return rows


def _twin(case, timing: list[str] | None, against) -> dict:
    """The case's honest twin (cases.HONEST_TWINS): `correct`, and no slower than the trick."""
    import tempfile

    trick, honest = HONEST_TWINS[case.number]
    with tempfile.TemporaryDirectory() as folder:
        twin = Path(folder) / f"twin-{case.file}"
        twin.write_text(case.kernel.read_text().replace(trick, honest, 1))
        v = check(case.task, twin, timeout=240, timing=timing)
    print_verdict(case.task, f"twin of {case.file}", v)
    ok, note = v["status"] == "correct", ""
    if ok and against is not None:
        row, margin = against
        honest_speedups = {w["name"]: w["speedup"] for w in v["workloads"] if w.get("speedup")}
        trick_speedups = {
            w["name"]: w["speedup"] for w in row["verdict_json"]["workloads"] if w.get("speedup")
        }
        gains = [name for name, x in trick_speedups.items()
                 if name in honest_speedups and x > honest_speedups[name] * margin]  # fmt: skip
        if gains:
            row["ok"], row["note"] = False, f"faster than its honest twin on {', '.join(gains)}"
    return {**_row(f"{case.number} twin", ("correct",), v, ok, note), "verdict_json": v}


def print_integrity_table(rows: list[dict]) -> None:
    print("\n| case | expected | verdict | flags | speedups | seconds | ok |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        speedups = ", ".join(f"×{x:.2f}" for x in r["speedups"]) or "—"
        ok = "yes" if r["ok"] else f"**NO** {r['note']}".strip()
        flags = ", ".join(r["flags"]) or "—"
        print(f"| {r['case']} | {r['expected']} | {r['verdict']} | {flags} | {speedups} "
              f"| {r['seconds']:.0f} | {ok} |")  # fmt: skip
    bad = [r["case"] for r in rows if not r["ok"]]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} as expected" + (f"; not: {bad}" if bad else ""))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "what",
        choices=[
            "experts",
            "files",
            "exploits",
            "stability",
            "ceilings",
            "collect",
            "integrity",
            "integrity-table",
        ],
    )
    parser.add_argument(
        "--parts",
        default=",".join(INTEGRITY_PARTS),
        help=f"integrity: the groups to run, of {','.join(INTEGRITY_PARTS)}",
    )
    parser.add_argument("items", nargs="*")
    parser.add_argument("--tasks")
    parser.add_argument("--cases", help="comma-separated exploit case numbers")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--jobs", type=int, default=4, help="integrity: evaluations at once that need no figure"
    )
    parser.add_argument(
        "--timing", action="append", default=[], help="KEY=VALUE, passed to every check"
    )
    parser.add_argument(
        "--arm",
        action="append",
        default=[],
        help="stability: NAME:K=V,K=V, timing settings of one arm of an A/B (repeatable)",
    )
    parser.add_argument(
        "--share",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="every evaluation under one GPU lease, as a worker running several at once, so "
        "that `--jobs` evaluations at once never share a timed phase (default: on)",
    )
    parser.add_argument("--out", type=Path, default=Path("gpu-results"))
    args = parser.parse_args()
    if args.share:
        import tempfile

        SHARED.extend(["--gpu-lease", tempfile.mkdtemp(prefix="d2k-gpu-lease-")])
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("D2K_HIDDEN_SEED", secrets.token_hex(32))
    if args.what == "collect":
        if len(args.items) != 1:
            parser.error("collect takes one folder: the D2K_GPU_VERDICTS of a pytest -m gpu run")
        collect(Path(args.items[0]), args.out)
        return
    if args.what == "integrity":
        out = Path(os.environ.get("OUT") or args.out)
        out.mkdir(parents=True, exist_ok=True)
        ceil = subprocess.run([sys.executable, "-m", "evaluator", "ceilings"], cwd=ROOT,
                              capture_output=True, text=True, check=False)  # fmt: skip
        print(ceil.stdout or ceil.stderr, flush=True)
        parts = tuple(p for p in INTEGRITY_PARTS if p in args.parts.split(","))
        unknown = set(args.parts.split(",")) - set(INTEGRITY_PARTS)
        if unknown or not parts:
            parser.error(f"--parts takes some of {','.join(INTEGRITY_PARTS)}, not {args.parts}")
        if "busy" in parts and not args.share:
            parser.error("--parts busy needs the shared GPU lease: leave out --no-share")
        only = set(args.cases.split(",")) if args.cases else None
        rows = integrity(out, args.jobs, parts, only)
        sys.exit(0 if all(r["ok"] for r in rows) else 1)
    if args.what == "integrity-table":
        if not args.items:
            parser.error("integrity-table takes the integrity*.json files of one or more calls")
        rows = [r for item in args.items for r in json.loads(Path(item).read_text())["rows"]]
        print_integrity_table(rows)
        sys.exit(0 if all(r["ok"] for r in rows) else 1)
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
        wanted = args.cases.split(",") if args.cases else None
        cases = [c for c in CASES if wanted is None or c.number in wanted]
        for case in cases:
            # An endless loop is caught by the watchdog whatever the limit: keep it short.
            limit = 20 if "timeout" in case.expected else 120
            limit = 480 if case.number in ("25", "25b") else limit
            v = check(case.task, case.kernel, timeout=limit, timing=args.timing)
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

"""The experts' hardware counters on this GPU: DRAM traffic against each workload's minimum.

    python bench/counters_table.py [--tasks a,b] [--profile-only] [--keep-csv FILE]

For each task (default: the memory-bound ones, every timed workload under
MEMORY_BOUND_FLOP_PER_BYTE FLOP a byte of its `bytes` formula), evaluates
the expert in cuda mode with counters on (`python -m evaluator check`, as a
worker does) and prints one markdown table: task, workload, the minimum
bytes of its `bytes` formula, the DRAM bytes read and written during the
call's kernels, the bytes its SMs wrote into the L2, the traffic as a
multiple of the minimum, and the tensor-core share of instructions. With
`--profile-only` it runs the profiling pass alone (no correctness check, no
timing: the expert is taken as correct, which `bench/gpu_check.py experts`
checks), about a third of the time. The verdicts' counters (or each
evaluation's note) go to $OUT/counters.json where OUT is set; `--keep-csv`
writes ncu's own output of the last task there (with --profile-only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs, load_task  # noqa: E402
from taskformat.spec import Mode, WorkloadRole  # noqa: E402

# Below this many FLOP a byte (in every timed workload) a task is memory-bound
# on an H200 by a wide margin: its fp32 ridge (67 TFLOP/s over 4.8 TB/s) is 14.
MEMORY_BOUND_FLOP_PER_BYTE = 10.0


def memory_bound_tasks() -> list[str]:
    slugs = []
    for folder in iter_task_dirs(DEFAULT_CATALOG_DIR):
        task = load_task(folder)
        timed = [w for w in task.workloads_for(Mode.CUDA) if w.role is WorkloadRole.TIMED]
        if timed and all(w.flops < MEMORY_BOUND_FLOP_PER_BYTE * w.bytes for w in timed):
            slugs.append(task.slug)
    return slugs


def evaluate(slug: str, timeout: int) -> dict[str, Any]:
    """The expert's verdict in cuda mode, counters on, from the evaluator's CLI."""
    expert = DEFAULT_CATALOG_DIR / slug / "expert.py"
    argv = ["check", "--task", slug, "--mode", "cuda", "--timeout", str(timeout), "--json"]
    proc = subprocess.run(
        [sys.executable, "-m", "evaluator", *argv, "--counters", "all", str(expert)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return {"status": "cli_error", "message": proc.stderr.strip()[-500:], "workloads": []}
    return json.loads(proc.stdout)


def profile_only(slug: str, timeout: int, sink: list[str]) -> dict[str, Any]:
    """The profiling pass alone, on the expert taken as correct: a verdict-shaped dict."""
    from evaluator.harness import counters
    from evaluator.harness.verdict import Status, WorkloadOutcome

    task = load_task(DEFAULT_CATALOG_DIR / slug)
    results = [
        WorkloadOutcome(name=w.name, role=w.role, hidden=w.hidden, status=Status.CORRECT)
        for w in task.workloads_for(Mode.CUDA)
        if w.role is WorkloadRole.TIMED
    ]
    counted, note = counters.profile(
        task=task,
        source=(DEFAULT_CATALOG_DIR / slug / "expert.py").read_text(),
        mode=Mode.CUDA,
        status=Status.CORRECT,
        results=results,
        timeout_s=timeout,
        csv_sink=sink,
    )
    return {
        "status": "profiled",
        "message": "profiling pass only",
        "workloads": [r.to_dict() for r in counted],
        "environment": {"counters": note},
    }


def _mb(value: Any) -> str:
    return f"{value / 1e6:,.1f}" if isinstance(value, int | float) else "—"


def rows(slug: str, verdict: dict[str, Any]) -> list[str]:
    lines = []
    for w in verdict.get("workloads") or []:
        if w.get("role") != "timed" or w.get("hidden"):
            continue
        c = w.get("counters")
        if not c:
            lines.append(f"| {slug} | {w['name']} | — | — | — | — | — | — |")
            continue
        ratio = c.get("traffic_ratio")
        share = c.get("tensor_share")
        lines.append(
            f"| {slug} | {w['name']} | {_mb(c['min_bytes'])} | {_mb(c['dram_read_bytes'])} | "
            f"{_mb(c['dram_write_bytes'])} | {_mb(c.get('l2_write_bytes'))} | "
            f"{f'×{ratio:.2f}' if ratio is not None else '—'} | "
            f"{f'{share:.1%}' if share is not None else '—'} |"
        )
    return lines


HEADER = (
    "| task | workload | minimum MB | DRAM read MB | DRAM write MB | L2 writes MB | "
    "traffic × minimum | tensor share |\n|---|---|---:|---:|---:|---:|---:|---:|"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", help="comma-separated slugs (default: the memory-bound ones)")
    parser.add_argument("--profile-only", action="store_true", help="no correctness, no timing")
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--keep-csv", type=Path, help="with --profile-only: ncu's output here")
    args = parser.parse_args()
    slugs = args.tasks.split(",") if args.tasks else memory_bound_tasks()
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    results: dict[str, Any] = {}
    lines: list[str] = []
    notes: dict[str, str] = {}
    for slug in slugs:
        started = time.monotonic()
        sink: list[str] = []
        if args.profile_only:
            verdict = profile_only(slug, args.timeout, sink)
        else:
            verdict = evaluate(slug, args.timeout)
        if args.keep_csv and sink:
            args.keep_csv.write_text(sink[0])
            args.keep_csv.with_suffix(".log").write_text(sink[1])
        note = str((verdict.get("environment") or {}).get("counters") or verdict.get("message"))
        notes[slug] = note
        results[slug] = {
            "status": verdict.get("status"),
            "counters_note": note,
            "wall_s": round(time.monotonic() - started, 1),
            "workloads": {
                w["name"]: w.get("counters")
                for w in verdict.get("workloads") or []
                if w.get("role") == "timed" and not w.get("hidden")
            },
        }
        lines += rows(slug, verdict)
        print(f"{slug}: {verdict.get('status')} in {results[slug]['wall_s']} s; {note}", flush=True)
        if out is not None:
            (out / "counters.json").write_text(json.dumps(results, indent=1))
    print()
    print(HEADER)
    print("\n".join(lines))
    tools = sorted(set(notes.values()))
    print()
    for note in tools:
        print(f"- {note}")


if __name__ == "__main__":
    main()

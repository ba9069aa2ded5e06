"""Where does the reference's extra microsecond go? Every kernel of each timing phase, traced.

    python bench/trace_reference.py --task rmsnorm_residual --runs 4

The `rmsnorm_residual` reference's median falls into one of two modes about
1 µs apart, set when a workload's timing starts (docs/benchmarks.md, series
7). Each run here is a fresh process that runs the evaluator's child in
process (the same `Child.run`, on the job an orchestrator would write; no
sandbox, no orchestrator) with stamped windows on, and traces each
workload's timing phase with the CUDA profiler. A timed call is then, on the
device, the launch cover, the call's kernels, and the end stamp. For the
reference's calls it prints the medians of: the gap from the cover's end to
the first kernel, each kernel's duration, the gaps between them, and the gap
to the end stamp; beside the child's own medians (events and stamps). A run
whose reference is in the slow mode shows which part grew. The profiler may
change what it traces: the comparison is between runs. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.harness.package import DEFAULT_CATALOG_DIR, load_task  # noqa: E402

COVER, STAMP = "d2k_cover", "d2k_stamp"


def calls_of(kernels: list[tuple[str, float, float]]) -> list[dict]:
    """The timed calls in a phase's device timeline: what ran between a cover and its end stamp."""
    calls, current = [], None
    for name, start, end in sorted(kernels, key=lambda k: k[1]):
        if COVER in name:
            current = {"released": end, "kernels": []}
        elif STAMP in name and current is not None:
            current["stamped"] = start
            calls.append(current)
            current = None
        elif current is not None:
            current["kernels"].append((name, start, end))
    return calls


def parts(call: dict) -> list[tuple[str, float]]:
    """(part, µs) of one call: gaps and kernels, in order."""
    out, last = [], call["released"]
    for index, (name, start, end) in enumerate(call["kernels"]):
        out.append((f"gap {index}", start - last))
        out.append((f"kernel {index} {name[:60]}", end - start))
        last = end
    out.append(("gap to the end stamp", call["stamped"] - last))
    return out


def child_run(task: str) -> None:
    import torch

    from evaluator.harness import orchestrate
    from evaluator.harness.child import Channel, Child
    from evaluator.harness.spec import Mode

    spec = load_task(DEFAULT_CATALOG_DIR / task)
    folder = Path(tempfile.mkdtemp(prefix="d2k-trace-"))
    settings = orchestrate.timing_settings(
        {"window_stamps": 1, "min_calls": 120, "max_calls": 120, "budget_s": 60.0}
    )
    job = {
        "mode": "cuda",
        "reference": str(DEFAULT_CATALOG_DIR / task / "reference.py"),
        "submission": str(DEFAULT_CATALOG_DIR / task / "expert.py"),
        "out_dir": str(folder / "out"),
        "inplace": spec.inplace,
        "seeds": spec.seeds,
        "timing": settings,
    }
    dealer = orchestrate._dealer(spec, spec.workloads_for(Mode.CUDA), Mode.CUDA, settings)

    class LocalChannel(Channel):
        """The child's channel, with the orchestrator's Dealer answering in process."""

        def ask(self, what: str, **fields):
            self.send("ask", what=what, **fields)
            reply = dealer.answer({"what": what, **fields})
            if "error" in reply:
                raise RuntimeError(reply["error"])
            return reply

    traces: dict[str, list] = {}
    timed = Child.time_workload

    def traced(self, workload: dict, flusher) -> bool:
        activities = [torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            done = timed(self, workload, flusher)
        traces[workload["name"]] = [
            (e.name, e.time_range.start, e.time_range.end)
            for e in prof.events()
            if e.device_type.name == "CUDA"
        ]
        return done

    Child.time_workload = traced
    log = folder / "messages.jsonl"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT, 0o600)
    Child(job, LocalChannel(fd)).run()
    os.close(fd)
    messages = [json.loads(line) for line in log.read_text().splitlines()]
    timings = {m["workload"]: m for m in messages if m["event"] == "timing"}
    errors = [m for m in messages if m["event"] == "error"]
    print(json.dumps({"traces": traces, "timings": timings, "errors": errors}))


def report(result: dict) -> None:
    for message in result["errors"]:
        print(f"  error: {message}")
    for name, kernels in result["traces"].items():
        timing = result["timings"].get(name, {})
        calls = calls_of(kernels)
        # The reference's calls run PyTorch's own kernels (at::native), the expert's do not.
        ref = [c for c in calls if any("at::" in k[0] for k in c["kernels"])]
        events = statistics.median(timing["ref_ms"]) * 1e3 if timing.get("ref_ms") else 0.0
        stamps = statistics.median(timing.get("ref_stamp_ms") or [0.0]) * 1e3
        print(
            f"  {name}: {len(ref)} reference calls of {len(calls)} traced;"
            f" the child's medians: events {events:.2f} µs, stamps {stamps:.2f} µs"
        )
        if not ref:
            continue
        shape = [label for label, _ in parts(ref[0])]
        same = [c for c in ref if [label for label, _ in parts(c)] == shape]
        for index, label in enumerate(shape):
            values = [parts(c)[index][1] for c in same]
            print(f"    {label:<72} {statistics.median(values):8.2f} µs")
        total = [c["stamped"] - c["released"] for c in same]
        print(f"    {'released to stamped':<72} {statistics.median(total):8.2f} µs")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="rmsnorm_residual")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_run(args.task)
        return
    for run in range(args.runs):
        done = subprocess.run(
            [sys.executable, __file__, "--child", "--task", args.task],
            capture_output=True,
            text=True,
            check=False,
        )
        print(f"run {run + 1}")
        if done.returncode != 0 or not done.stdout.strip():
            print(f"  the child failed:\n{done.stderr[-3000:]}")
            continue
        report(json.loads(done.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    main()

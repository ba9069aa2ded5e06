"""Does a workload's time move from one process to the next, and why?

    python bench/reference_drift.py --task rmsnorm_residual \\
        --workload bf16_decode_1x8192_b1024 --processes 6 --variants base,cover,spacer

Each process times the task's PyTorch reference and its expert the way the
evaluator does (fresh inputs, L2 flushed, launch covered, CUDA events,
interleaved) and prints its two medians. Variants change one thing:

    base    the evaluator's protocol as it is
    cover   a 1 ms launch cover instead of 200 µs (is the host late to queue?)
    kernels list the CUDA kernels one timed reference call runs (no timing)
    spacer  a randomly sized block is held while each call's inputs are made,
            so tensors land at different addresses on every call
            (is it where the allocator placed them in this process?)

The spread of the medians over processes is what issue #3's stability
target bounds; docs/benchmarks.md records what this printed on the H200.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.harness.package import DEFAULT_CATALOG_DIR, load_task  # noqa: E402


def child(task: str, workload: str, variant: str, calls: int, where: str = "cuda") -> None:
    import torch

    from evaluator.harness import timing
    from evaluator.harness.workload import load_module, make_inputs, make_model

    spec = load_task(DEFAULT_CATALOG_DIR / task)
    params = next(w for w in spec.workloads if w.name == workload).params
    device = torch.device(where)
    ref_mod = load_module(str(DEFAULT_CATALOG_DIR / task / "reference.py"), "reference")
    exp_mod = load_module(str(DEFAULT_CATALOG_DIR / task / "expert.py"), "expert")
    ref = make_model(ref_mod.Model, ref_mod, params, 0, device)
    exp = make_model(exp_mod.ModelNew, ref_mod, params, 0, device)
    flusher = timing.L2Flusher(device)
    if variant == "cover":
        flusher.sleep_cycles *= 5
    rng = random.Random()

    def inputs(seed: int) -> list:
        if variant != "spacer":
            return make_inputs(ref_mod, params, seed, device)
        spacer = torch.empty(rng.randrange(1, 64) * 2**20, dtype=torch.uint8, device=device)
        made = make_inputs(ref_mod, params, seed, device)
        del spacer
        return made

    def timed(model, seed: int) -> float:
        args = inputs(seed)
        start, end = timing.event(), timing.event()
        flusher.flush()
        timing.record(start)
        model(*args)
        timing.record(end)
        timing.stream_synchronize()
        return timing.elapsed_ms(start, end)

    for i in range(20):
        timed(ref, i)
        timed(exp, i)
    if variant == "kernels":
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            timed(ref, 0)
        names = [e.name[:90] for e in prof.events() if e.device_type.name == "CUDA"]
        print(json.dumps({"kernels": names}))
        return
    ref_ms, exp_ms = [], []
    for i in range(calls):
        pair = [(ref, ref_ms), (exp, exp_ms)]
        for model, out in pair if i % 2 else pair[::-1]:
            out.append(timed(model, 1000 + i))
    ref_med, exp_med = statistics.median(ref_ms), statistics.median(exp_ms)
    print(json.dumps({"ref_us": ref_med * 1e3, "exp_us": exp_med * 1e3}))


def spawn(args: argparse.Namespace, variant: str) -> dict:
    """One child process; its last line of output, parsed."""
    command = [sys.executable, __file__, "--child", "--variant", variant, "--task", args.task]
    command += ["--workload", args.workload, "--calls", str(args.calls)]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"{min(values):6.2f}..{max(values):6.2f} (spread {max(values) / min(values) - 1:5.2%})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="rmsnorm_residual")
    parser.add_argument("--workload", default="bf16_decode_1x8192_b1024")
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--variants", default="base,cover,spacer")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="base", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.task, args.workload, args.variant, args.calls)
        return
    print(f"{args.task} {args.workload}: {args.processes} processes × {args.calls} calls each")
    for variant in args.variants.split(","):
        if variant == "kernels":
            print("reference kernels, one timed call:", spawn(args, variant)["kernels"])
            continue
        rows = [spawn(args, variant) for _ in range(args.processes)]
        refs = [r["ref_us"] for r in rows]
        exps = [r["exp_us"] for r in rows]
        ratios = [r["ref_us"] / r["exp_us"] for r in rows]
        print(
            f"{variant:<7} reference {spread(refs)} µs   expert {spread(exps)} µs   "
            f"speedup {spread(ratios)}"
        )
        print("        reference medians: " + " ".join(f"{r:.2f}" for r in refs))


if __name__ == "__main__":
    main()

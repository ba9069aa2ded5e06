"""Does a workload's time move from one process to the next, and why?

    python bench/reference_drift.py --task rmsnorm_residual \\
        --workload bf16_decode_1x8192_b1024 --processes 6 \\
        --variants base,history,poison,fingerprint,watchdog,evaluator

Each process times the task's PyTorch reference and its expert with the
evaluator's primitives (fresh inputs, L2 flushed, launch covered, CUDA
events, interleaved) and prints its two medians. A variant adds factors to
that bare protocol, joined by "+" (for example `history+poison`):

    base         the bare protocol
    cover        a 1 ms launch cover instead of 200 µs (is the host late to queue?)
    spacer       a randomly sized block is held while each call's inputs are
                 made, so tensors land at different addresses on every call
    history      first run every other workload of the task, as the
                 evaluator's correctness phase and earlier workloads do
    release      empty the allocator's cache before timing (after history)
    poison       fill a block the size of the inputs before each expert call
                 (honesty.poison_allocator, as the evaluator does)
    fingerprint  sample the expert's outputs after each call, wait for the
                 whole device, sample again (as the evaluator does)
    watchdog     the parent reads the child's /proc/PID/smaps_rollup every
                 200 ms (as the evaluator's memory watchdog does)
    smi          nvidia-smi samples the GPU every 100 ms meanwhile (as the
                 evaluator's GpuMonitor does)
    recorder     first run the expert 8 times under the op recorder (a
                 dispatch mode and the CPU profiler, entered and left for
                 every call), as the evaluator's correctness phase does
    dispatch     the recorder's dispatch mode alone
    profiler     the recorder's CPU profiler alone
    batch        first run a back-to-back batch of the expert (about 60 ms,
                 every output kept alive), as the evaluator does after each
                 workload's timing
    reflush      every 25 calls, a new flush buffer (behind a block of 0-2 GiB
                 held meanwhile): does the flush buffer's placement matter?
    repool       every 25 calls, empty the allocator's cache and hold a fresh
                 block of 0-2 GiB, so the calls after it get new memory from
                 the driver: does a process that times on several pools
                 (several physical placements) drift less?
    evaluator    all of history, release, poison, fingerprint, watchdog, smi,
                 recorder and batch
    kernels      list the CUDA kernels one timed reference call runs (no timing)

The spread of the medians over processes is what issue #3's stability
target bounds; docs/benchmarks.md records what this printed on the H200.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.harness.environment import GpuMonitor  # noqa: E402
from taskformat.package import DEFAULT_CATALOG_DIR, load_task  # noqa: E402

EVALUATOR = {
    "history",
    "release",
    "poison",
    "fingerprint",
    "watchdog",
    "smi",
    "recorder",
    "batch",
}


def factors(variant: str) -> set[str]:
    parts = set(variant.split("+"))
    return (parts - {"evaluator"}) | (EVALUATOR if "evaluator" in parts else set())


def child(task: str, workload: str, variant: str, calls: int, where: str = "cuda") -> None:
    import torch

    from evaluator.harness import fingerprints, honesty, timing
    from evaluator.harness.workload import as_tuple, load_module, make_inputs, make_model

    parts = factors(variant)
    spec = load_task(DEFAULT_CATALOG_DIR / task)
    params = next(w for w in spec.workloads if w.name == workload).params
    device = torch.device(where)
    ref_mod = load_module(str(DEFAULT_CATALOG_DIR / task / "reference.py"), "reference")
    exp_mod = load_module(str(DEFAULT_CATALOG_DIR / task / "expert.py"), "expert")
    flusher = timing.L2Flusher(device)
    if "cover" in parts:
        flusher.cover_us *= 5
    rng = random.Random()

    def models(p: dict) -> tuple:
        return (
            make_model(ref_mod.Model, ref_mod, p, 0, device),
            make_model(exp_mod.ModelNew, ref_mod, p, 0, device),
        )

    def inputs(p: dict, seed: int) -> list:
        if "spacer" not in parts:
            return make_inputs(ref_mod, p, seed, device)
        spacer = torch.empty(rng.randrange(1, 64) * 2**20, dtype=torch.uint8, device=device)
        made = make_inputs(ref_mod, p, seed, device)
        del spacer
        return made

    def timed(model, p: dict, seed: int, expert: bool) -> float:
        args = inputs(p, seed)
        if expert and "poison" in parts:
            honesty.poison_allocator(device, sum(a.numel() * a.element_size() for a in args))
        (start, end), out = timing.timed_call(model, args, flusher)
        if expert and "fingerprint" in parts:
            fingerprints.fingerprint(as_tuple(out), seed=7)
            timing.synchronize()
            fingerprints.fingerprint(as_tuple(out), seed=7)
        return timing.elapsed_ms(start, end)

    if "history" in parts:
        for other in spec.workloads:
            if other.name != workload:
                ref, exp = models(other.params)
                for i in range(5):
                    timed(ref, other.params, i, False)
                    timed(exp, other.params, i, True)
    if "recorder" in parts:
        exp = models(params)[1]
        for i in range(8):
            with honesty.OpRecorder():
                exp(*inputs(params, 500 + i))
            timing.synchronize()
    for factor, recorder in (
        ("dispatch", honesty.DispatchRecorder),
        (
            "profiler",
            lambda: torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]),
        ),
    ):
        if factor in parts:
            exp = models(params)[1]
            for i in range(8):
                with recorder():
                    exp(*inputs(params, 500 + i))
                timing.synchronize()
    if "batch" in parts:
        # As Child._batch: up to 200 calls, their outputs all alive, within 8 GiB.
        exp = models(params)[1]
        per_call = 2 * sum(a.numel() * a.element_size() for a in inputs(params, 600))
        outs = [exp(*inputs(params, 600 + i)) for i in range(min(200, 2**33 // per_call))]
        timing.synchronize()
        del outs
    if "release" in parts:
        timing.release_cached_memory()
    ref, exp = models(params)
    for i in range(20):
        timed(ref, params, i, False)
        timed(exp, params, i, True)
    if "kernels" in parts:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            timed(ref, params, 0, False)
        names = [e.name[:90] for e in prof.events() if e.device_type.name == "CUDA"]
        print(json.dumps({"kernels": names}))
        return
    ref_ms, exp_ms = [], []
    hold = None
    for i in range(calls):
        if "repool" in parts and i % 25 == 0:
            del hold
            timing.release_cached_memory()
            hold = torch.empty(rng.randrange(0, 1024) * 2**21, dtype=torch.uint8, device=device)
        if "reflush" in parts and i % 25 == 0:
            size, flusher.buffer = flusher.buffer.numel(), None
            timing.release_cached_memory()
            spacer = torch.empty(rng.randrange(0, 1024) * 2**21, dtype=torch.uint8, device=device)
            flusher.buffer = torch.zeros(size, dtype=torch.uint8, device=device)
            del spacer
        pair = [(ref, ref_ms, False), (exp, exp_ms, True)]
        for model, out, expert in pair if i % 2 else pair[::-1]:
            out.append(timed(model, params, 1000 + i, expert))
    ref_med, exp_med = statistics.median(ref_ms), statistics.median(exp_ms)
    with open("/proc/self/maps") as maps:
        cupti = any("cupti" in line for line in maps)
    print(json.dumps({"ref_us": ref_med * 1e3, "exp_us": exp_med * 1e3, "cupti": cupti}))


def _watch(pid: int, stop: threading.Event) -> None:
    """Read the child's memory the way the evaluator's watchdog does."""
    while not stop.wait(0.2):
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
                fh.read()
        except OSError:
            return


def spawn(args: argparse.Namespace, variant: str) -> dict:
    """One child process; its last line of output, parsed."""
    command = [sys.executable, __file__, "--child", "--variant", variant, "--task", args.task]
    command += ["--workload", args.workload, "--calls", str(args.calls)]
    parts = factors(variant)
    with GpuMonitor() if "smi" in parts else contextlib.nullcontext():
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stop = threading.Event()
        if "watchdog" in parts:
            threading.Thread(target=_watch, args=(proc.pid, stop), daemon=True).start()
        out, err = proc.communicate()
        stop.set()
    if proc.returncode != 0:
        raise SystemExit(f"{variant}: the child failed:\n{err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"{min(values):6.2f}..{max(values):6.2f} (spread {max(values) / min(values) - 1:5.2%})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="rmsnorm_residual")
    parser.add_argument("--workload", default="bf16_decode_1x8192_b1024")
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument(
        "--variants",
        default="base,history,poison,fingerprint,watchdog,smi,recorder,batch,evaluator",
    )
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
        began = time.monotonic()
        rows = [spawn(args, variant) for _ in range(args.processes)]
        refs = [r["ref_us"] for r in rows]
        exps = [r["exp_us"] for r in rows]
        ratios = [r["ref_us"] / r["exp_us"] for r in rows]
        print(
            f"{variant:<7} reference {spread(refs)} µs   expert {spread(exps)} µs   "
            f"speedup {spread(ratios)}"
        )
        print("        reference medians: " + " ".join(f"{r:.2f}" for r in refs))
        print("        expert medians:    " + " ".join(f"{r:.2f}" for r in exps))
        cupti = sum(r["cupti"] for r in rows)
        print(f"        ({time.monotonic() - began:.0f} s, CUPTI loaded in {cupti})", flush=True)


if __name__ == "__main__":
    main()

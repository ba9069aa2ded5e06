"""Does a window stamped by the cover itself take away what 4b still gains?

    python bench/cover_window.py [--calls 200] [--workloads bf16_8192x1024,fp32_4096x4096]

With the exclusive cover, case 4b's side-stream kernel takes the SMs as the
cover's blocks retire, a few microseconds before the start event is stamped
(docs/evaluator.md, "Known gaps"). This experiment tried taking the window's
start from the cover (kept as the timing setting window_stamps; since c2e2f44
the audit calls catch 4b instead): block 0 writes the GPU's global timer when the blocks
are released, and a one-thread kernel after the call writes it again.

For the row_softmax reference, case 4b, its honest twin (the same file
with WAIT_FOR_CALLER = True) and the same kernel on one stream (AHEAD = 0),
this times every call both ways at once (CUDA
events around the call, and the two stamps) and prints the medians, the
speedups over the reference, and the steps the global timer moves in. If
4b's speedup over its twin vanishes with the stamps, and the stamps resolve
well under a microsecond, the harness can time by them. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.harness import timing  # noqa: E402
from evaluator.harness.package import DEFAULT_CATALOG_DIR, load_task  # noqa: E402
from evaluator.harness.workload import load_module, make_inputs, make_model  # noqa: E402

TASK = "row_softmax"
KERNEL_4B = ROOT / "tests" / "exploits" / "kernels" / "04b_cover_front_run.py"


def main() -> None:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--workloads", default="bf16_8192x1024,fp32_4096x4096,bf16_1024x65536")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")

    device = torch.device("cuda")
    # The harness's own stamped window: the stamping cover and the end stamp.
    flusher = timing.L2Flusher(device, stamps=True)
    if not flusher.stamps:
        raise SystemExit(f"the stamped cover did not load: {flusher.describe()}")

    spec = load_task(DEFAULT_CATALOG_DIR / TASK)
    ref_mod = load_module(str(DEFAULT_CATALOG_DIR / TASK / "reference.py"), "reference")
    cheat = load_module(str(KERNEL_4B), "case_4b")
    twin = load_module(str(KERNEL_4B), "case_4b_twin")
    twin.WAIT_FOR_CALLER = True
    # The same kernel on the caller's stream alone: the work with no second stream to pay for.
    single = load_module(str(KERNEL_4B), "case_4b_single")
    single.AHEAD = 0.0

    def one_call(model, inputs) -> tuple[float, float, float]:
        """(events, stamps, host) in µs for one call behind the stamped cover.

        host: how long the host took to queue the call; past the cover's
        length (about 260 µs with its flush) the GPU waits for the host.
        """
        marks: list[float] = []

        def queued(*args):
            marks.append(time.perf_counter())
            out = model(*args)
            marks.append(time.perf_counter())
            return out

        (start, end), _ = timing.timed_call(queued, inputs, flusher)
        timing.synchronize()
        events_us = timing.elapsed_ms(start, end) * 1e3
        return events_us, flusher.window_ms() * 1e3, (marks[1] - marks[0]) * 1e6

    print(f"{torch.cuda.get_device_name()}: {flusher.describe()}")
    for name in args.workloads.split(","):
        params = next(w for w in spec.workloads if w.name == name).params
        models = {
            "reference": make_model(ref_mod.Model, ref_mod, params, 0, device),
            "one stream": make_model(single.ModelNew, ref_mod, params, 0, device),
            "4b twin": make_model(twin.ModelNew, ref_mod, params, 0, device),
            "4b": make_model(cheat.ModelNew, ref_mod, params, 0, device),
        }
        times: dict[str, tuple[list[float], ...]] = {k: ([], [], []) for k in models}
        for call in range(args.calls + 10):
            for label, model in models.items():
                measured = one_call(model, make_inputs(ref_mod, params, call, device))
                if call >= 10:  # warm-up
                    for series, value in zip(times[label], measured, strict=True):
                        series.append(value)
        print(f"\n{TASK} {name}: {args.calls} calls each")
        medians = {k: [statistics.median(s) for s in series] for k, series in times.items()}
        for label, (events_med, stamps_med, host_med) in medians.items():
            ref_events, ref_stamps, _ = medians["reference"]
            print(
                f"  {label:<10} events {events_med:8.2f} µs (x{ref_events / events_med:.3f})"
                f"   stamps {stamps_med:8.2f} µs (x{ref_stamps / stamps_med:.3f})"
                f"   host {host_med:7.1f} µs"
            )
        seen = sorted(set(times["reference"][1]))
        steps = sorted({round(b - a, 3) for a, b in itertools.pairwise(seen)})
        print(f"  the stamped windows' smallest steps: {steps[:5]} µs")


if __name__ == "__main__":
    main()

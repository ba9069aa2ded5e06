"""How far an honest expert's outputs sit from the reference's on drawn workloads, on the GPU.

    python bench/tolerance_probe.py TASK [--draws 20] [--params JSON] [--device cuda]
    TRITON_INTERPRET=1 python bench/tolerance_probe.py TASK --device cpu [--failures-only]

Draws the task's hidden workloads of the device's mode (cuda, or interpret on the
CPU) from fresh throwaway secrets (or takes the given parameters), runs the expert
(`catalog/<task>/expert.py`) and the reference on the same inputs and prints, per
output: the evaluator's comparison under the task's tolerance, the largest absolute
error, and that error over the reference output's RMS and over its largest value.
What the task's tolerance must allow for honest arithmetic (Hopper's fp8
accumulation, another summation order) is read from these figures.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.harness.compare import compare_tensor, finite_rms  # noqa: E402
from evaluator.harness.workload import (  # noqa: E402
    as_tuple,
    load_module,
    make_inputs,
    make_model,
)
from taskformat.hidden import hidden_draw  # noqa: E402
from taskformat.package import load_task  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("task")
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--params", help="one workload's parameters as JSON (no draws)")
    parser.add_argument("--device", default="cuda", help="cpu: with TRITON_INTERPRET=1")
    parser.add_argument(
        "--failures-only", action="store_true", help="print only the outputs that fail"
    )
    args = parser.parse_args()
    folder = ROOT / "catalog" / args.task
    task = load_task(folder)
    ref = load_module(str(folder / "reference.py"), f"ref_{args.task}")
    expert = load_module(str(folder / "expert.py"), f"expert_{args.task}")
    if args.params:
        draws = [json.loads(args.params)] * args.draws
    else:
        # The draws of the mode the device runs: cuda's on a GPU (`cuda:1` too), else
        # the interpreter's.
        cuda = torch.device(args.device).type == "cuda"
        prefix = "hidden_" if cuda else "check_hidden_"
        draws = []
        while len(draws) < args.draws:
            drawn = hidden_draw(task.hidden, secret=secrets.token_hex(16), slug=task.slug)
            draws += [w.params for w in drawn if w.name.startswith(prefix)]
    device = torch.device(args.device)
    for index, params in enumerate(draws[: args.draws]):
        # The inputs and models as the evaluator makes them, each call on fresh copies.
        inputs = make_inputs(ref, params, index, device)
        with torch.no_grad():
            model = make_model(ref.Model, ref, params, index, device)
            want = as_tuple(model(*[x.clone() if torch.is_tensor(x) else x for x in inputs]))
            model = make_model(expert.ModelNew, ref, params, index, device)
            got = as_tuple(model(*[x.clone() if torch.is_tensor(x) else x for x in inputs]))
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            tol = task.tolerance_for(str(w.dtype).removeprefix("torch."))
            result = compare_tensor(g.contiguous(), w.contiguous(), tol)
            d = (g.double() - w.double()).abs()
            rms = finite_rms(w)
            peak = float(w.double().abs().max()) if w.numel() else 0.0
            worst = float(d.max()) if d.numel() else 0.0
            if args.failures_only and result.ok:
                continue
            shown = {k2: v for k2, v in params.items() if k2 != "dist"}
            print(
                f"{args.task} {index:>2} out{k} {shown} {params.get('dist', '')}: "
                f"{'ok  ' if result.ok else 'FAIL'} max|d| {worst:.3g} "
                f"max|d|/rms {worst / max(rms, 1e-30):.3g} "
                f"max|d|/peak {worst / max(peak, 1e-30):.3g} "
                f"rel_l2 {result.rel_err if result.rel_err is not None else float('nan'):.3g}"
                + (f"  [{result.message[:120]}]" if not result.ok else ""),
                flush=True,
            )


if __name__ == "__main__":
    main()

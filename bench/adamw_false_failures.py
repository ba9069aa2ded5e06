"""How often an honest fp32 AdamW step fails fused_adamw's tolerances, by seed.

    python bench/adamw_false_failures.py [--seeds 2000] [--params '{"vocab": 1, ...}']

Draws the task's inputs (`catalog/fused_adamw/reference.py`) for each seed, takes the
step in fp32 in the expert's order of operations (`catalog/fused_adamw/expert.py`), and
compares it with the fp64 reference by the evaluator's own `compare_tensor` and the
task's tolerances. Prints the share of seeds with a failing tensor, by output (p, m,
v), and the largest absolute error among them. No GPU, no Triton: the arithmetic only.
The default parameters are two one-element tensors (an embedding of one row of one
column and the final norm's gain), the smallest of the task's hidden draws.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.harness.compare import compare_tensor  # noqa: E402
from evaluator.harness.workload import load_module  # noqa: E402
from taskformat.package import load_task  # noqa: E402
from taskformat.spec import TaskSpec  # noqa: E402


def fp32_step(tensors: list[torch.Tensor], step: int, hyper: list[float]) -> None:
    """The expert's update, in fp32 and in its order of operations, in place."""
    lr, beta1, beta2, eps, weight_decay = hyper
    n = len(tensors) // 4
    step_size = lr / (1.0 - beta1**step)
    inv_bc2_sqrt = 1.0 / math.sqrt(1.0 - beta2**step)

    def f32(x: float) -> torch.Tensor:
        return torch.tensor(x, dtype=torch.float32)

    for i in range(n):
        p, g, m, v = tensors[i], tensors[n + i], tensors[2 * n + i], tensors[3 * n + i]
        m.copy_(f32(beta1) * m + f32(1.0 - beta1) * g)
        v.copy_(f32(beta2) * v + f32(1.0 - beta2) * g * g)
        denom = torch.sqrt(v) * f32(inv_bc2_sqrt) + f32(eps)
        p.copy_(p * f32(1.0 - lr * weight_decay) - f32(step_size) * (m / denom))


@dataclass(frozen=True)
class Failures:
    seeds: int  # seeds with at least one failing tensor
    by_output: dict[str, int]  # failing tensors by output (p, m, v)
    worst: float  # largest absolute error among the failing tensors


# One-element tensors: the case whose first moment can cancel to near zero.
ONE_ELEMENT = {"vocab": 1, "hidden": 1, "ffn": 1, "kv": 1, "layers": 0}


def failures(task: TaskSpec, params: dict, seeds: range) -> Failures:
    """How many of `seeds` the fp32 step fails by the task's tolerances, and where."""
    reference = load_module(str(Path(task.directory) / "reference.py"), "adamw_ref")
    hyper = reference.get_init_inputs(**params)
    tolerance = task.tolerance_for("float32")
    failing: collections.Counter[str] = collections.Counter()
    seeds_failing, worst = 0, 0.0
    for seed in seeds:
        torch.manual_seed(seed)
        step, *tensors = reference.get_inputs(**params)
        n = len(tensors) // 4
        mine = [t.clone() for t in tensors]
        fp32_step(mine, step, hyper)
        expected = reference.Model(*hyper)(step, *[t.clone() for t in tensors])
        failed = False
        for index, (out, ref) in enumerate(zip(mine[:n] + mine[2 * n :], expected, strict=True)):
            if not compare_tensor(out, ref, tolerance).ok:
                failing["pmv"[index // n]] += 1
                worst = max(worst, float((out.double() - ref.double()).abs().max()))
                failed = True
        seeds_failing += failed
    return Failures(seeds_failing, dict(failing), worst)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2000)
    parser.add_argument(
        "--params", type=json.loads, default=ONE_ELEMENT, help="the workload's params, as JSON"
    )
    args = parser.parse_args()
    task = load_task(ROOT / "catalog" / "fused_adamw")
    found = failures(task, dict(args.params), range(args.seeds))
    share = found.seeds / args.seeds
    print(
        f"{args.params}: {found.seeds} of {args.seeds} seeds fail ({share:.1%}); by output "
        f"{found.by_output}; largest absolute error among them {found.worst:.3g}; "
        f"an evaluation draws {task.seeds} seeds: {1 - (1 - share) ** task.seeds:.1%} of them fail"
    )


if __name__ == "__main__":
    main()

"""MoE expert GEMM: y[rows of expert e] = x[rows of expert e] @ w[e], rows grouped by expert."""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        # Ground truth in fp32: bf16 values and their products are exact in
        # fp32 and the sums run in fp32, rounded to bf16 once. A bf16 GEMM call
        # would leave the reduction to the library, which may round partial
        # sums to bf16 (split-K under PyTorch's default
        # allow_bf16_reduced_precision_reduction); the practitioner's bf16
        # loop is baseline.py.
        y = x.new_empty((x.shape[0], w.shape[2]))
        bounds = offsets.tolist()
        for e in range(w.shape[0]):
            start, end = bounds[e], bounds[e + 1]
            if end > start:
                y[start:end] = (x[start:end].float() @ w[e].float()).to(y.dtype)
        return y


def get_init_inputs(**params):
    return []


def _power_law_draws(n: int, count: int, exponent: float) -> torch.Tensor:
    """`count` indices in [0, n), index i drawn with probability w_i / sum(w).

    Weights rank^-exponent over shuffled ranks, as integers (2^32 rank^-exponent,
    rounded): the draws invert their exact int64 running total, so one seed
    gives the same groups in every process (torch.multinomial sums float
    weights with a GPU scan whose rounding may change from run to run, and the
    reference is computed in another process than the kernel's call).
    """
    ranks = torch.arange(1, n + 1, dtype=torch.float64)
    weights = torch.round(ranks**-exponent * 2.0**32).to(torch.int64)
    edges = torch.cumsum(weights[torch.randperm(n)], dim=0)
    draws = torch.randint(0, int(edges[-1]), (count,), dtype=torch.int64)
    return torch.searchsorted(edges, draws, right=True)


def get_inputs(experts, tokens, K, N, skew=0.5, dtype="bfloat16", dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(experts, tokens, K, N, dtype)
    dt = getattr(torch, dtype)
    # Router loads are uneven: expert popularity follows a power law
    # p(rank r) ~ r^-skew with the ranks shuffled over the experts, so a few
    # hot experts get several times the mean and, when tokens are few, some
    # experts get none. Routed rows arrive sorted by expert (as after a
    # permute step); offsets[e]:offsets[e + 1] are expert e's rows.
    counts = torch.bincount(_power_law_draws(experts, tokens, skew), minlength=experts)
    offsets = torch.zeros(experts + 1, dtype=torch.int32)
    offsets[1:] = torch.cumsum(counts, 0).to(torch.int32)
    # Unit-scale activations and weights scaled by 1/sqrt(K): every output is O(1).
    x = torch.randn(tokens, K, dtype=torch.float32).to(dt)
    w = (torch.randn(experts, K, N, dtype=torch.float32) * K**-0.5).to(dt)
    return [x, w, offsets]


def _adversarial_inputs(experts, tokens, K, N, dtype):
    # Every routed row goes to one expert, the middle one: every other expert
    # (before and after it) is empty, and one group is as long as the batch.
    dt = getattr(torch, dtype)
    offsets = torch.zeros(experts + 1, dtype=torch.int32)
    offsets[experts // 2 + 1 :] = tokens
    x = torch.randn(tokens, K, dtype=torch.float32).to(dt)
    w = (torch.randn(experts, K, N, dtype=torch.float32) * K**-0.5).to(dt)
    return [x, w, offsets]

"""MoE expert GEMM: y[rows of expert e] = x[rows of expert e] @ w[e], rows grouped by expert."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        # What a practitioner writes: one cuBLAS GEMM per expert (bf16 operands,
        # fp32 accumulation, one rounding to bf16), after copying the group
        # boundaries to the host.
        y = x.new_empty((x.shape[0], w.shape[2]))
        bounds = offsets.tolist()
        for e in range(w.shape[0]):
            start, end = bounds[e], bounds[e + 1]
            if end > start:
                y[start:end] = x[start:end] @ w[e]
        return y


def get_init_inputs(**params):
    return []


def get_inputs(experts, tokens, K, N, skew=0.5, dtype="bfloat16", **params):
    dt = getattr(torch, dtype)
    # Router loads are uneven: expert popularity follows a power law
    # p(rank r) ~ r^-skew with the ranks shuffled over the experts, so a few
    # hot experts get several times the mean and, when tokens are few, some
    # experts get none. Routed rows arrive sorted by expert (as after a
    # permute step); offsets[e]:offsets[e + 1] are expert e's rows.
    popularity = (torch.randperm(experts) + 1).to(torch.float32) ** -skew
    expert_of_row = torch.multinomial(popularity, tokens, replacement=True)
    counts = torch.bincount(expert_of_row, minlength=experts)
    offsets = torch.zeros(experts + 1, dtype=torch.int32)
    offsets[1:] = torch.cumsum(counts, 0).to(torch.int32)
    # Unit-scale activations and weights scaled by 1/sqrt(K): every output is O(1).
    x = torch.randn(tokens, K, dtype=torch.float32).to(dt)
    w = (torch.randn(experts, K, N, dtype=torch.float32) * K**-0.5).to(dt)
    return [x, w, offsets]

"""MoE token permutation: group the (token, k) copies of x by expert, stably.

Outputs: the permuted rows, each slot's destination row, and the expert offsets.
"""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self, experts: int):
        super().__init__()
        self.experts = experts

    def forward(self, x: torch.Tensor, topk_ids: torch.Tensor):
        tokens, top_k = topk_ids.shape
        flat = topk_ids.reshape(-1).to(torch.int64)
        # Stable: within an expert, slots keep their (token, k) order.
        order = torch.sort(flat, stable=True).indices
        permuted = x.index_select(0, order // top_k)
        dest = torch.empty_like(flat)
        dest[order] = torch.arange(flat.numel(), device=flat.device)
        counts = torch.bincount(flat, minlength=self.experts)
        offsets = torch.zeros(self.experts + 1, dtype=torch.int64, device=flat.device)
        offsets[1:] = torch.cumsum(counts, 0)
        return (
            permuted,
            dest.view(tokens, top_k).to(torch.int32),
            offsets.to(torch.int32),
        )


def get_init_inputs(experts, **params):
    return [experts]


def get_inputs(tokens, top_k, experts, hidden, dtype="bfloat16", dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(tokens, top_k, experts, hidden, dtype)
    x = torch.randn(tokens, hidden, dtype=torch.float32).to(getattr(torch, dtype))
    # A router with skewed expert popularity: per-expert log-normal bias plus
    # Gumbel noise, top-k without replacement (Gumbel-top-k samples the
    # softmax of the bias). The hottest of 256 experts gets ~5-8x the mean load.
    bias = torch.randn(experts, dtype=torch.float32)
    u = torch.rand(tokens, experts, dtype=torch.float32).clamp_(1e-9, 1.0 - 1e-7)
    scores = bias - torch.log(-torch.log(u))
    topk_ids = scores.topk(top_k, dim=1).indices.to(torch.int32)
    return [x, topk_ids]


def _adversarial_inputs(tokens, top_k, experts, hidden, dtype):
    # Every token is routed to the same top_k experts, the last ones, in a
    # random order per token: those experts take every slot and all the
    # others are empty.
    x = torch.randn(tokens, hidden, dtype=torch.float32).to(getattr(torch, dtype))
    order = torch.rand(tokens, top_k).argsort(dim=1)
    topk_ids = (experts - top_k + order).to(torch.int32)
    return [x, topk_ids.contiguous()]

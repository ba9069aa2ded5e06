"""bf16 GEMM: C = A @ B, A (M, K) and B (K, N) row-major; fp32 accumulation, bf16 output."""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # Ground truth in fp32: bf16 values and their products are exact in
        # fp32 and the sums run in fp32, rounded to bf16 once (the contract the
        # kernel must meet). A bf16 call would leave the reduction to cuBLAS,
        # which may round split-K partial sums to bf16 (PyTorch's default
        # allow_bf16_reduced_precision_reduction); baseline.py is that call.
        return torch.matmul(a.float(), b.float()).to(a.dtype)


def get_init_inputs(**params):
    return []


def get_inputs(M, N, K, dtype="bfloat16", strided=False, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(M, N, K, dtype, strided)
    dt = getattr(torch, dtype)
    # Activations of unit scale and weights scaled by 1/sqrt(K), as in a
    # trained linear layer: every output element is O(1) whatever K is, so a
    # kernel that drops or repeats a K slice is far outside the tolerance.
    a = torch.randn(M, K, dtype=torch.float32).to(dt)
    # A strided workload's B is the transpose of an (N, K) weight, as
    # nn.Linear stores it: contiguous along K, a stride of K along N.
    if strided:
        b = (torch.randn(N, K, dtype=torch.float32) * K**-0.5).to(dt).t()
    else:
        b = (torch.randn(K, N, dtype=torch.float32) * K**-0.5).to(dt)
    return [a, b]


def _adversarial_inputs(M, N, K, dtype, strided):
    # Structured rather than random: each 16-wide slice of K is scaled by
    # its own power of two from 2^-8 to 2^8 in A and the inverse in B, so
    # every slice contributes about equally and a dropped, repeated or
    # misplaced K tile changes every output; rows of A and columns of B
    # carry gains from 1/8 to 8, and a few of each are zero.
    dt = getattr(torch, dtype)
    slice_gain = 2.0 ** torch.randint(-8, 9, (K // 16 + 1,)).float().repeat_interleave(16)[:K]
    row_gain = 2.0 ** (torch.rand(M, 1) * 6.0 - 3.0) * (torch.rand(M, 1) > 0.05)
    col_gain = 2.0 ** (torch.rand(1, N) * 6.0 - 3.0) * (torch.rand(1, N) > 0.05)
    a = (torch.randn(M, K, dtype=torch.float32) * slice_gain * row_gain).to(dt)
    b = torch.randn(K, N, dtype=torch.float32) * K**-0.5 / slice_gain[:, None] * col_gain
    if strided:
        return [a, b.t().contiguous().to(dt).t()]
    return [a, b.to(dt)]

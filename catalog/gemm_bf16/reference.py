"""bf16 GEMM: C = A @ B, A (M, K) and B (K, N) row-major; fp32 accumulation, bf16 output."""

import torch
import torch.nn as nn


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


def get_inputs(M, N, K, dtype="bfloat16", strided=False, **params):
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

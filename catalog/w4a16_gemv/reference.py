"""W4A16 GEMV/skinny GEMM: y = x @ dequant(qweight, scales).T with int4 weights, group 128."""

import torch
import torch.nn as nn

GROUP = 128


def unpack_int4(qweight: torch.Tensor) -> torch.Tensor:
    """(N, K // 8) int32 -> (N, K) int64 in [0, 16); nibble j of word i is k = 8 i + j."""
    shifts = torch.arange(0, 32, 4, device=qweight.device, dtype=torch.int64)
    q = (qweight.to(torch.int64)[:, :, None] >> shifts) & 0xF
    return q.reshape(qweight.shape[0], -1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        # Dequantise in fp32 exactly as the statement says, multiply in fp32,
        # round once to bf16.
        q = unpack_int4(qweight).to(torch.float32) - 8.0
        w = q * scales.to(torch.float32).repeat_interleave(GROUP, dim=1)
        return (x.to(torch.float32) @ w.T).to(x.dtype)


def get_init_inputs(**params):
    return []


def get_inputs(m, n, k, **params):
    x = torch.randn(m, k, dtype=torch.float32).to(torch.bfloat16)
    q = torch.randint(0, 16, (n, k), dtype=torch.int64)
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    packed = (q.view(n, k // 8, 8) << shifts).sum(dim=2)
    packed = torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)
    # Per-group scales as a symmetric quantiser of N(0, 0.02) weights would
    # set them (max |w| / 7.5), with a per-channel spread.
    scales = (torch.rand(n, k // GROUP, dtype=torch.float32) * 0.004 + 0.006).to(torch.bfloat16)
    return [x, packed, scales]

"""A test fixture, not a kernel to learn from: a correct naive bf16 GEMM for `gemm_bf16`
padded with tensor-core work it throws away.

The products run on the CUDA cores (multiply and sum in fp32, as
tests/catalog/negatives/gemm_bf16.py). Beside them each K step issues a 16x16x16
`tl.dot` into a 2-D fp32 tile whose sum is added to the output times zero: the MMA
instructions execute and their value reaches the store, so the source cannot tell
them from the real thing. The hardware counters can: the share of tensor-core
instructions may be anything, but the instructions executed per FLOP of the workload
stay those of a CUDA-core GEMM (`tensor_core_dot`'s counter rule, docs/scores.md).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, BN: tl.constexpr, BK: tl.constexpr):
    i = tl.program_id(axis=0)
    j = tl.program_id(axis=1) * BN + tl.arange(0, BN)
    kk = tl.arange(0, BK)
    p16 = tl.arange(0, 16)
    row = tl.zeros([BN], dtype=tl.float32)
    pad = tl.zeros((16, 16), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + i * K + k0 + kk, mask=k0 + kk < K, other=0.0).to(tl.float32)
        bm = ((k0 + kk)[:, None] < K) & (j[None, :] < N)
        b = tl.load(b_ptr + (k0 + kk)[:, None] * N + j[None, :], mask=bm, other=0.0).to(tl.float32)
        row += tl.sum(a[:, None] * b, axis=0)
        # The padding: 16 copies of a's next 16 values, multiplied on the tensor cores.
        t = tl.load(
            a_ptr + i * K + k0 + p16[:, None] * 0 + p16[None, :],
            mask=(k0 + p16[None, :] < K) & (p16[:, None] >= 0),
            other=0.0,
        )
        pad = tl.dot(t, t, pad)
    row += 0.0 * tl.sum(tl.sum(pad, axis=1), axis=0)
    tl.store(c_ptr + i * N + j, row, mask=j < N)


class ModelNew(nn.Module):
    def forward(self, a, b):
        a = a.contiguous()
        b = b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), dtype=a.dtype, device=a.device)
        _gemm[(M, triton.cdiv(N, 64))](a, b, c, M, N, K, BN=64, BK=32)
        return c

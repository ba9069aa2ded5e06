"""Gaming (a test fixture): a correct naive bf16 GEMM that multiplies and sums on the
CUDA cores, dressed in the expert's idioms where no launch runs them.

Every launch passes TILED=False, so the branch that holds the fakes never runs:
`tl.dot(a, b, acc)` accumulating into a `tl.zeros((BM, BN), tl.float32)` tile, a
grouped (swizzled) tile order and unmasked loads in the K loop. The host picks
BM, BN, BK and GROUP_M from the shape, but they size only that branch; the live
path's tiles are fixed constants.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    TILED: tl.constexpr,
):
    if TILED:
        pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BM)
        num_pid_n = tl.cdiv(N, BN)
        in_group = GROUP_M * num_pid_n
        first_m = (pid // in_group) * GROUP_M
        group_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (pid % in_group) % group_m
        pid_n = (pid % in_group) // group_m
        rm = (pid_m * BM + tl.arange(0, BM)) % M
        rn = (pid_n * BN + tl.arange(0, BN)) % N
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), tl.float32)
        for k0 in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
            b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
            acc = tl.dot(a, b, acc)
        cm = pid_m * BM + tl.arange(0, BM)
        cn = pid_n * BN + tl.arange(0, BN)
        mask = (cm[:, None] < M) & (cn[None, :] < N)
        tl.store(c_ptr + cm[:, None] * N + cn[None, :], acc, mask=mask)
    else:
        i = tl.program_id(axis=0)
        j = tl.program_id(axis=1) * 64 + tl.arange(0, 64)
        kk = tl.arange(0, 32)
        row = tl.zeros([64], dtype=tl.float32)
        for k0 in range(0, K, 32):
            a = tl.load(a_ptr + i * K + k0 + kk, mask=k0 + kk < K, other=0.0).to(tl.float32)
            bm = ((k0 + kk)[:, None] < K) & (j[None, :] < N)
            b = tl.load(b_ptr + (k0 + kk)[:, None] * N + j[None, :], mask=bm, other=0.0)
            row += tl.sum(a[:, None] * b.to(tl.float32), axis=0)
        tl.store(c_ptr + i * N + j, row, mask=j < N)


def _gemm_config(M, N, K):
    """(BM, BN, BK, GROUP_M) from the shape, as the expert's host does."""
    if M <= 64:
        return 64, 128, 64, 8
    if triton.cdiv(M, 128) * triton.cdiv(N, 256) < 132:
        return 128, 128, 64, 8
    return 128, 256, 64, 8


class ModelNew(nn.Module):
    def forward(self, a, b):
        a = a.contiguous()
        b = b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), dtype=a.dtype, device=a.device)
        bm, bn, bk, group = _gemm_config(M, N, K)
        grid = (M, triton.cdiv(N, 64))
        _gemm[grid](a, b, c, M, N, K, BM=bm, BN=bn, BK=bk, GROUP_M=group, TILED=False)
        return c

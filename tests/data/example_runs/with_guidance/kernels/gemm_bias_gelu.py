"""Linear + bias + tanh-GELU in Triton: y = gelu_tanh(x @ w + bias).

A tensor-core GEMM (fp32 accumulator tile, grouped program order for L2
reuse, num_stages-deep pipelined K loop) whose epilogue adds the bias row and
applies GELU to the accumulator while it is still in registers, then rounds to
bf16 and stores once: the pre-activation never touches HBM.

GELU uses 0.5 * z * (1 + tanh(u)) = z * sigmoid(2u), and
sigmoid(2u) = 1 / (1 + exp2(-2u * log2(e))): one ex2 and one division per
element, with the constants folded.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

NUM_SMS = 132  # H100/H200; only used to judge how many waves a tiling makes


@triton.jit
def _gemm_bias_gelu_kernel(
    x_ptr,
    w_ptr,
    bias_ptr,
    y_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_wk,
    stride_wn,
    stride_ym,
    stride_yn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
    UPCAST: tl.constexpr,
):
    # Grouped (swizzled) program order for L2 reuse of the x and w panels.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Wrapped row/column indices: the K loop needs no M/N masks.
    offs_xm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_wn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_xm = tl.max_contiguous(tl.multiple_of(offs_xm, BLOCK_M), BLOCK_M)
    offs_wn = tl.max_contiguous(tl.multiple_of(offs_wn, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_xm[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_wn[None, :] * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(x_ptrs)
            b = tl.load(w_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if UPCAST:  # CPU interpreter only: its bf16 tl.dot is unreliable
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    # Epilogue on the fp32 accumulator tile, still in registers.
    offs_ym = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_yn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    bias = tl.load(bias_ptr + offs_yn, mask=offs_yn < N, other=0.0).to(tl.float32)
    z = acc + bias[None, :]
    # gelu_tanh(z) = z * sigmoid(2u), u = sqrt(2/pi) * (z + 0.044715 z^3);
    # sigmoid(2u) = 1 / (1 + exp2(t)) with t = -2 * log2(e) * u
    #             = -2.302208198 * z * (1 + 0.044715 z^2).
    # For z -> -inf, exp2 -> inf and y -> -0; for z -> +inf, y -> z: no NaN.
    t = z * (-2.302208198144325 - 0.10294323958002353 * z * z)
    y = z / (1.0 + tl.exp2(t))
    y_ptrs = y_ptr + offs_ym[:, None] * stride_ym + offs_yn[None, :] * stride_yn
    mask = (offs_ym[:, None] < M) & (offs_yn[None, :] < N)
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=mask)  # one bf16 rounding


def _gemm_config(M: int, N: int, K: int):
    """(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages) for a shape."""
    if M <= 64:
        # Decode-like skinny M: a short tile in M, wide in N, deep pipeline.
        return 64, 128, 64, 8, 4, 5
    tiles_big = triton.cdiv(M, 128) * triton.cdiv(N, 256)
    if tiles_big < NUM_SMS:
        # Less than one wave of 128x256 tiles: smaller tiles keep every SM busy.
        return 128, 128, 64, 8, 8, 4
    # 128x256 tiles on two warpgroups (8 warps, 64 rows each): the highest
    # operand reuse per byte of shared memory. Each stage holds (128 + 256) x 64
    # bf16 = 48 KB; long K loops take 4 stages (192 KB of the 228 KB per SM),
    # short ones 3, which leaves room for the epilogue's layout conversion.
    # Measured on an H200 (Triton 3.6) against 128x128 and 256x128 tiles.
    return 128, 256, 64, 8, 8, (4 if K >= 2048 else 3)


def gemm_bias_gelu(x, w, bias, config=None):
    M, K = x.shape
    _, N = w.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return y
    block_m, block_n, block_k, group_m, warps, stages = config or _gemm_config(M, N, K)
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
    _gemm_bias_gelu_kernel[grid](
        x,
        w,
        bias,
        y,
        M,
        N,
        K,
        x.stride(0),
        x.stride(1),
        w.stride(0),
        w.stride(1),
        y.stride(0),
        y.stride(1),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        GROUP_M=group_m,
        EVEN_K=(K % block_k == 0),
        UPCAST=(x.device.type == "cpu"),
        num_warps=warps,
        num_stages=stages,
    )
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return gemm_bias_gelu(x.contiguous(), w.contiguous(), bias.contiguous())

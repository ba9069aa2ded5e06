"""Expert NHWC convolution in Triton: implicit GEMM on the tensor cores.

The convolution is a GEMM of (batch*P*Q output pixels) x (cout) over a
reduction of ksize*ksize*cin, whose A operand (the im2col matrix) is never
built: each program owns a BLOCK_M x BLOCK_N tile of output pixels x output
channels and gathers A's rows straight from the NHWC input, one filter tap and
one channel chunk per K step, with zero padding done by the load mask. The
filter (KRSC) is the B operand: a K-contiguous (BLOCK_K x BLOCK_N) tile per
step. Taps and channel chunks form one flat loop, so the compiler pipelines
it like a GEMM's K loop; neighbouring output pixels re-read overlapping input
halos, which hit L1/L2.

Channel counts that are multiples of 16 take the tap path (16-byte channel
vectors, no reduction mask). Tiny channel counts (the RGB stem, cin = 3)
flatten (r, s, c) into one reduction index instead, so a 7x7x3 filter is 147
reduction values padded to 160, not 49 taps of 3 channels padded to 16 each.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _conv_implicit_gemm(
    x_ptr,
    w_ptr,
    y_ptr,
    M,
    H,
    W,
    P,
    Q,
    cin,
    cout,
    stride,
    pad,
    KS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    FLAT_K: tl.constexpr,
    UPCAST: tl.constexpr,
):
    pid_n = tl.program_id(1)
    pid_m = tl.program_id(0)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_mask = offs_m < M
    # Output pixel -> (image, input row/col of the filter's top-left tap).
    n_img = offs_m // (P * Q)
    pq = offs_m % (P * Q)
    ih0 = (pq // Q) * stride - pad
    iw0 = (pq % Q) * stride - pad
    x_img = x_ptr + n_img.to(tl.int64) * H * W * cin

    # Output channels wrap modulo cout: the filter loads need no mask, the
    # repeated columns are never stored.
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % cout
    offs_k = tl.arange(0, BLOCK_K)
    red = KS * KS * cin  # reduction length
    w_cols = w_ptr + offs_n[None, :] * red  # (1, BLOCK_N) filter rows

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if FLAT_K:
        # Tiny cin: one flat reduction index over (r, s, c).
        for k0 in range(0, red, BLOCK_K):
            kk = k0 + offs_k
            k_mask = kk < red
            c = kk % cin
            rs = kk // cin
            ih = ih0[:, None] + (rs // KS)[None, :]
            iw = iw0[:, None] + (rs % KS)[None, :]
            ok = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            ok = ok & m_mask[:, None] & k_mask[None, :]
            a = tl.load(x_img[:, None] + (ih * W + iw) * cin + c[None, :], mask=ok, other=0.0)
            b = tl.load(w_cols + kk[:, None], mask=k_mask[:, None], other=0.0)
            if UPCAST:  # CPU interpreter only: its bf16 dot is unreliable
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
    else:
        # cin is a multiple of BLOCK_K: each step is one tap and one chunk of
        # BLOCK_K contiguous channels (16-byte vectors, no reduction mask).
        chunks = cin // BLOCK_K
        offs_c = tl.max_contiguous(tl.multiple_of(offs_k, BLOCK_K), BLOCK_K)
        for t in range(0, KS * KS * chunks):
            tap = t // chunks
            c0 = (t % chunks) * BLOCK_K
            ih = ih0 + tap // KS
            iw = iw0 + tap % KS
            ok = m_mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            pix = x_img + (ih * W + iw) * cin + c0
            a = tl.load(pix[:, None] + offs_c[None, :], mask=ok[:, None], other=0.0)
            b = tl.load(w_cols + (tap * cin + c0) + offs_c[:, None])
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)

    out_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    y_ptrs = y_ptr + offs_m.to(tl.int64)[:, None] * cout + out_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_mask[:, None] & (out_n[None, :] < cout))


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def _conv_config(M: int, cin: int, cout: int, device: torch.device):
    """(BLOCK_M, BLOCK_N, BLOCK_K, FLAT_K, num_warps, num_stages) for a layer."""
    flat = cin % 16 != 0
    block_k = 32 if flat else (64 if cin % 64 == 0 else (32 if cin % 32 == 0 else 16))
    block_n = 64 if cout <= 64 else 128
    block_m = 128
    # Late layers have few pixels and many channels: halve the pixel tile
    # when 128-pixel tiles leave less than two waves on the SMs.
    if triton.cdiv(M, 128) * triton.cdiv(cout, block_n) < 2 * _num_sms(device):
        block_m = 64
    warps = 8 if block_m * block_n >= 128 * 128 else 4
    return block_m, block_n, block_k, flat, warps, 4


class ModelNew(nn.Module):
    def __init__(self, stride: int, pad: int):
        super().__init__()
        self.stride = stride
        self.pad = pad

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x, w = x.contiguous(), w.contiguous()
        batch, H, W, cin = x.shape
        cout, ks, _, _ = w.shape
        P = (H + 2 * self.pad - ks) // self.stride + 1
        Q = (W + 2 * self.pad - ks) // self.stride + 1
        y = torch.empty((batch, P, Q, cout), dtype=x.dtype, device=x.device)
        M = batch * P * Q
        if M == 0:
            return y
        block_m, block_n, block_k, flat, warps, stages = _conv_config(M, cin, cout, x.device)
        grid = (triton.cdiv(M, block_m), triton.cdiv(cout, block_n))
        _conv_implicit_gemm[grid](
            x,
            w,
            y,
            M,
            H,
            W,
            P,
            Q,
            cin,
            cout,
            self.stride,
            self.pad,
            KS=ks,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            FLAT_K=flat,
            UPCAST=(x.device.type == "cpu"),
            num_warps=warps,
            num_stages=stages,
        )
        return y

"""Block-scaled fp8 GEMM (DeepSeek-V3 style): C = (A * a_scale) @ (B * b_scale)^T in bf16.

A (M, K) and B (N, K) hold float8_e4m3fn bit patterns in uint8 tensors (view
them as float8_e4m3fn); a_scale (M, ceil(K/128)) scales each
1 x 128 group of a row of A; b_scale (ceil(N/128), ceil(K/128)) scales each
128 x 128 block of B. The reference dequantises to fp32 and multiplies in fp32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")

GROUP = 128  # scale block along K (and along N for the weight)
FP8_MAX = 448.0  # largest finite float8_e4m3fn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, a_scale, b, b_scale):
        a, b = a.view(torch.float8_e4m3fn), b.view(torch.float8_e4m3fn)
        K = a.shape[1]
        N = b.shape[0]
        a_deq = a.float() * a_scale.repeat_interleave(GROUP, dim=1)[:, :K]
        b_full = b_scale.repeat_interleave(GROUP, dim=0).repeat_interleave(GROUP, dim=1)
        b_deq = b.float() * b_full[:N, :K]
        return (a_deq @ b_deq.T).to(torch.bfloat16)


def _quantize(x: torch.Tensor, rows: int, cols: int):
    """fp8 values and fp32 scales of x for blocks of rows x cols (amax / 448 per block)."""
    m, k = x.shape
    mb, kb = -(-m // rows), -(-k // cols)
    xp = F.pad(x, (0, kb * cols - k, 0, mb * rows - m))
    blocks = xp.view(mb, rows, kb, cols)
    amax = blocks.abs().amax(dim=(1, 3)).clamp_(min=1e-4)
    scale = amax / FP8_MAX
    q = (blocks / scale[:, None, :, None]).clamp_(-FP8_MAX, FP8_MAX)
    q = q.to(torch.float8_e4m3fn).view(mb * rows, kb * cols)[:m, :k].contiguous()
    return q, scale.to(torch.float32)


def get_init_inputs(**params):
    return []


def get_inputs(M, N, K, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(M, N, K)
    # Activations with log-normal channel gains (a few outlier channels, the
    # reason for fine-grained 1 x 128 scales), weights scaled by 1/sqrt(K),
    # both quantised as in DeepSeek-V3 training and inference.
    x = torch.randn(M, K) * torch.exp(0.5 * torch.randn(K))
    w = torch.randn(N, K) * K**-0.5
    a, a_scale = _quantize(x, 1, GROUP)
    b, b_scale = _quantize(w, GROUP, GROUP)
    # The fp8 values travel as their bit patterns (uint8): same bytes, and a
    # dtype every tensor operation supports.
    return [a.view(torch.uint8), a_scale, b.view(torch.uint8), b_scale]


def _adversarial_inputs(M, N, K):
    # Scales over twelve orders of magnitude: every 1 x 128 group of a row of
    # A has its own gain from 1e-4 to 1e2, every 128 x 128 block of B its own
    # from 1e-3 to 1e3, so a scale applied to the wrong group, or once per
    # tile that spans two groups, is off by orders of magnitude.
    kb, nb = -(-K // GROUP), -(-N // GROUP)
    a_gain = 10.0 ** (torch.rand(M, kb) * 6.0 - 4.0)
    b_gain = 10.0 ** (torch.rand(nb, kb) * 6.0 - 3.0)
    x = torch.randn(M, K) * a_gain.repeat_interleave(GROUP, dim=1)[:, :K]
    w = torch.randn(N, K) * K**-0.5
    w = w * b_gain.repeat_interleave(GROUP, dim=0).repeat_interleave(GROUP, dim=1)[:N, :K]
    a, a_scale = _quantize(x, 1, GROUP)
    b, b_scale = _quantize(w, GROUP, GROUP)
    return [a.view(torch.uint8), a_scale, b.view(torch.uint8), b_scale]

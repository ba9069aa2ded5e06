"""2-D convolution in NHWC with KRSC filters, zero padding, bf16 out.

y[n, p, q, k] = sum_{r, s, c} x[n, p*stride - pad + r, q*stride - pad + s, c] * w[k, r, s, c]
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self, stride: int, pad: int):
        super().__init__()
        self.stride = stride
        self.pad = pad

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        # Ground truth in fp32 (bf16 values are exact in fp32; products are
        # exact, sums in fp32), rounded to bf16 once. NHWC / KRSC tensors are
        # viewed as NCHW / KCRS in channels-last memory, no copy.
        xf = x.float().permute(0, 3, 1, 2)
        wf = w.float().permute(0, 3, 1, 2)
        y = F.conv2d(xf, wf, stride=self.stride, padding=self.pad)
        return y.permute(0, 2, 3, 1).contiguous().to(x.dtype)


def get_init_inputs(stride, pad, **params):
    return [stride, pad]


def get_inputs(batch, height, width, cin, cout, ksize, dtype="bfloat16", dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(batch, height, width, cin, cout, ksize, dtype)
    dt = getattr(torch, dtype)
    # Unit-scale activations and He-scaled filters (std 1/sqrt(fan_in)): every
    # output is O(1) whatever the filter size and channel count.
    x = torch.randn(batch, height, width, cin).to(dt)
    w = (torch.randn(cout, ksize, ksize, cin) * (ksize * ksize * cin) ** -0.5).to(dt)
    return [x, w]


def _adversarial_inputs(batch, height, width, cin, cout, ksize, dtype):
    # The border pixels of every image are 30 times larger than the
    # interior, and each input channel has a gain from 1/8 to 8: a kernel
    # that pads with anything but zeros, or wraps a row onto the next,
    # moves a large value into the wrong output.
    dt = getattr(torch, dtype)
    rows = torch.arange(height)[:, None]
    cols = torch.arange(width)[None, :]
    border = (rows == 0) | (rows == height - 1) | (cols == 0) | (cols == width - 1)
    gain = 2.0 ** (torch.rand(cin) * 6.0 - 3.0)
    x = torch.randn(batch, height, width, cin) * gain
    x = torch.where(border[None, :, :, None], 30.0 * x, x)
    w = torch.randn(cout, ksize, ksize, cin) * (ksize * ksize * cin) ** -0.5
    return [x.to(dt), w.to(dt)]

"""2-D convolution in NHWC with KRSC filters, zero padding, bf16 out.

y[n, p, q, k] = sum_{r, s, c} x[n, p*stride - pad + r, q*stride - pad + s, c] * w[k, r, s, c]
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


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


def get_inputs(batch, height, width, cin, cout, ksize, dtype="bfloat16", **params):
    dt = getattr(torch, dtype)
    # Unit-scale activations and He-scaled filters (std 1/sqrt(fan_in)): every
    # output is O(1) whatever the filter size and channel count.
    x = torch.randn(batch, height, width, cin).to(dt)
    w = (torch.randn(cout, ksize, ksize, cin) * (ksize * ksize * cin) ** -0.5).to(dt)
    return [x, w]

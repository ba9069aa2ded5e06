"""The eager PyTorch a practitioner runs: dequantise to bf16, then a bf16 matmul."""

import torch
import torch.nn as nn

GROUP = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        shifts = torch.arange(0, 32, 4, device=qweight.device, dtype=torch.int32)
        q = ((qweight[:, :, None] >> shifts) & 0xF).reshape(qweight.shape[0], -1)
        w = (q - 8).to(torch.bfloat16) * scales.repeat_interleave(GROUP, dim=1)
        return x @ w.T

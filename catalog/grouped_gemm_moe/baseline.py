"""What a practitioner writes in eager PyTorch: one bf16 cuBLAS GEMM per expert, after copying
the group boundaries to the host."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        y = x.new_empty((x.shape[0], w.shape[2]))
        bounds = offsets.tolist()
        for e in range(w.shape[0]):
            start, end = bounds[e], bounds[e + 1]
            if end > start:
                y[start:end] = x[start:end] @ w[e]
        return y

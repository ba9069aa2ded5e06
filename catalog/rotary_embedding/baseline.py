"""The eager PyTorch a practitioner runs: rotate_half in the activations' dtype, in place."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(
        self,
        positions: torch.Tensor,
        q: torch.Tensor,
        k: torch.Tensor,
        cos_cache: torch.Tensor,
        sin_cache: torch.Tensor,
    ):
        # As a model's native RoPE does it (Hugging Face / vLLM's forward_native):
        # look up cos/sin for the positions, cast them to the activations'
        # dtype and apply x * cos + rotate_half(x) * sin without upcasting x.
        half = q.shape[-1] // 2
        cos = cos_cache.index_select(0, positions).to(q.dtype).unsqueeze(1)
        sin = sin_cache.index_select(0, positions).to(q.dtype).unsqueeze(1)
        cos = torch.cat((cos, cos), dim=-1)
        sin = torch.cat((sin, sin), dim=-1)

        def rotate_half(x: torch.Tensor) -> torch.Tensor:
            return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

        q.copy_(q * cos + rotate_half(q) * sin)
        k.copy_(k * cos + rotate_half(k) * sin)
        return q, k

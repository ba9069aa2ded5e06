"""torch._weight_int4pack_mm (tinygemm): PyTorch's own W4A16 GEMM, fed the task's packed weights.

On CUDA GPUs of compute capability 8.0 or more, with N a multiple of 8 and K
of 128, this is the int4 path PyTorch serves quantised LLM weights with
(torchao's and gpt-fast's int4 weight-only linear): the kernel reads the
4-bit weights and dequantises them on chip. Its weights must be in tinygemm's
tiled layout, and here the weights arrive with every call in the task's own
layout (int32 words, low nibble first), so each call converts them: swap the
two nibbles of each byte, torch._convert_weight_to_int4pack, and the group
scales as (K/128, N, 2) scale/zero pairs with zero 0 (tinygemm dequantises
(q - 8) * scale + zero). A model converts its weights once at load time; the
harness draws new weights for every timed call, so the conversion is timed
here. Elsewhere (the CPU, older GPUs, other shapes) it dequantises to bf16
with broadcast group scales and makes one bf16 GEMM.
"""

import torch
import torch.nn as nn

GROUP = 128
INNER_K_TILES = 8  # tinygemm's widest K tiling: K must be a multiple of 8 * 16


def int4pack_fits(x: torch.Tensor, qweight: torch.Tensor) -> bool:
    """Whether tinygemm takes these operands."""
    if x.device.type != "cuda" or torch.cuda.get_device_capability(x.device) < (8, 0):
        return False
    n, k = qweight.shape[0], qweight.shape[1] * 8
    return n % 8 == 0 and k % (INNER_K_TILES * 16) == 0 and x.dtype == torch.bfloat16


def int4pack_mm(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    n = qweight.shape[0]
    # Byte j of word i holds k = 8i + 2j in its low nibble and 8i + 2j + 1 in
    # its high one; tinygemm's packer wants the even k in the high nibble.
    nibbles = qweight.view(torch.uint8).view(n, -1)
    swapped = (nibbles >> 4) | (nibbles << 4)
    packed = torch._convert_weight_to_int4pack(swapped, INNER_K_TILES)
    scale_t = scales.t()
    scales_and_zeros = torch.stack((scale_t, torch.zeros_like(scale_t)), dim=-1)
    return torch._weight_int4pack_mm(x, packed, GROUP, scales_and_zeros)


def dequantised_mm(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    n = qweight.shape[0]
    shifts = torch.arange(0, 32, 4, device=qweight.device, dtype=torch.int32)
    q = ((qweight[:, :, None] >> shifts) & 0xF).view(n, scales.shape[1], GROUP)
    w = ((q - 8).to(torch.bfloat16) * scales[:, :, None]).view(n, -1)
    return x @ w.T


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        if int4pack_fits(x, qweight):
            return int4pack_mm(x, qweight, scales)
        return dequantised_mm(x, qweight, scales)

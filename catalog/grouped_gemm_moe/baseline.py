"""One torch._grouped_mm call: PyTorch's grouped GEMM over every expert's rows, in bf16.

What a practitioner runs for MoE experts in PyTorch alone (torchtitan's MoE
layer calls the same op): one launch over all groups, the group boundaries
read by the kernel from `offsets` on the device, no copy of them to the host
and no loop over experts. On Hopper (SM90) it is a CUTLASS grouped GEMM that
accumulates in fp32; on other CUDA GPUs and on the CPU PyTorch runs its own
fallback of the same op (one GEMM per group, inside the library). The op needs
16-byte aligned rows: where K or N is not a multiple of 8 (some hidden and
check workloads), x and w are zero-padded to the next multiple and the output
sliced, which changes no value.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

ALIGN = 8  # bf16 elements in 16 bytes


def _padding(size: int) -> int:
    return -size % ALIGN


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        n = w.shape[2]
        pad_k, pad_n = _padding(x.shape[1]), _padding(n)
        if pad_k or pad_n:
            x = F.pad(x, (0, pad_k))
            w = F.pad(w, (0, pad_n, 0, pad_k))
        # offs: each group's end row (offsets[0] is always 0).
        y = torch._grouped_mm(x, w, offs=offsets[1:].to(torch.int32))
        return y[:, :n] if pad_n else y

"""W4A16 GEMV/skinny GEMM: y = x @ dequant(qweight, scales).T with int4 weights, group 128."""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")

GROUP = 128


def unpack_int4(qweight: torch.Tensor) -> torch.Tensor:
    """(N, K // 8) int32 -> (N, K) int64 in [0, 16); nibble j of word i is k = 8 i + j."""
    shifts = torch.arange(0, 32, 4, device=qweight.device, dtype=torch.int64)
    q = (qweight.to(torch.int64)[:, :, None] >> shifts) & 0xF
    return q.reshape(qweight.shape[0], -1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        # Dequantise in fp32 exactly as the statement says, multiply in fp32,
        # round once to bf16.
        q = unpack_int4(qweight).to(torch.float32) - 8.0
        w = q * scales.to(torch.float32).repeat_interleave(GROUP, dim=1)
        return (x.to(torch.float32) @ w.T).to(x.dtype)


def get_init_inputs(**params):
    return []


def get_inputs(m, n, k, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(m, n, k)
    x = torch.randn(m, k, dtype=torch.float32).to(torch.bfloat16)
    q = torch.randint(0, 16, (n, k), dtype=torch.int64)
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    packed = (q.view(n, k // 8, 8) << shifts).sum(dim=2)
    packed = torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)
    # Per-group scales as a symmetric quantiser of N(0, 0.02) weights would
    # set them (max |w| / 7.5), with a per-channel spread.
    scales = (torch.rand(n, k // GROUP, dtype=torch.float32) * 0.004 + 0.006).to(torch.bfloat16)
    return [x, packed, scales]


def _adversarial_inputs(m, n, k):
    # Group scales over six orders of magnitude (1e-5 to 10, a scale applied
    # to the wrong group is far off) and nibbles at the extremes: every
    # fourth group all 0 (weight -8) or all 15 (weight 7), so the words are
    # 0x00000000 and 0xFFFFFFFF (-1): the sign of the int32 word and the
    # zero point matter on every one.
    x = torch.randn(m, k, dtype=torch.float32).to(torch.bfloat16)
    q = torch.randint(0, 16, (n, k), dtype=torch.int64)
    group_kind = torch.randint(0, 4, (n, k // GROUP, 1)).expand(n, k // GROUP, GROUP).reshape(n, k)
    q = torch.where(group_kind == 0, 0, torch.where(group_kind == 1, 15, q))
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    packed = (q.view(n, k // 8, 8) << shifts).sum(dim=2)
    packed = torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)
    scales = (10.0 ** (torch.rand(n, k // GROUP, dtype=torch.float32) * 6.0 - 5.0)).to(
        torch.bfloat16
    )
    return [x, packed, scales]

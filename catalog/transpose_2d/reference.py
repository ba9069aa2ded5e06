"""2-D transpose: y[j, i] = x[i, j], written to a new contiguous (cols, rows) tensor."""

import math

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(0, 1).contiguous()


def get_init_inputs(**params):
    return []


def get_inputs(rows, cols, dtype, strided=False, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(rows, cols, dtype, strided)
    # Activations-like values. A strided workload takes every other column of
    # a wider buffer, as a slice of a fused projection output would be: the
    # column stride is 2 and the row stride 2 * cols.
    # Cast before slicing: a dtype cast of a strided view returns a contiguous tensor.
    x = torch.randn(rows, 2 * cols if strided else cols, dtype=torch.float32)
    x = x.to(getattr(torch, dtype))
    return [x[:, ::2] if strided else x]


def _adversarial_inputs(rows, cols, dtype, strided):
    # Values that follow their place rather than noise (the mantissa steps
    # with the place, the exponent every 97 places from 2^-30 to 2^29, the
    # sign alternates), with the special values a copy must move bit for bit
    # scattered over them: infinities of both signs, NaN, signed zeros,
    # subnormals and the largest finite values. A transpose that goes through
    # arithmetic (a product with a permutation matrix, a blend with zeros)
    # turns them into NaN or rounds them.
    dt = getattr(torch, dtype)
    width = 2 * cols if strided else cols
    place = torch.arange(rows * width, dtype=torch.float64).reshape(rows, width)
    x = (1.0 + (place % 97) / 97.0) * 2.0 ** ((place // 97) % 60 - 30)
    x = torch.where(place % 2 == 0, x, -x)
    info = torch.finfo(dt)
    special = torch.tensor(
        [
            math.inf,
            -math.inf,
            math.nan,
            0.0,
            -0.0,
            info.tiny / 4,
            -info.tiny / 2,
            info.max,
            -info.max,
        ],
        dtype=torch.float64,
    )
    pick = torch.randint(0, special.numel(), (rows, width))
    x = torch.where(torch.rand(rows, width) < 0.05, special[pick], x)
    x = x.to(dt)
    return [x[:, ::2] if strided else x]

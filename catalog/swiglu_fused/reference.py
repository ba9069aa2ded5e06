"""SwiGLU activation of a gated MLP: y = silu(gate) * up, silu(g) = g * sigmoid(g).

The reference computes in fp32 and rounds once to the input dtype.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return (F.silu(gate.float()) * up.float()).to(gate.dtype)


def get_init_inputs(**params):
    return []


def get_inputs(rows, cols, dtype, strided=False, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(rows, cols, dtype, strided)
    dt = getattr(torch, dtype)
    # Pre-activations of a trained MLP: the gate spreads wider than the up
    # projection, so sigmoid saturates on both sides for a good share of values.
    if strided:
        # One fused gate_up projection output (rows, 2 * cols); gate and up are
        # its two halves: views with a row stride of 2 * cols, not copies.
        gate_up = torch.randn(rows, 2 * cols) * torch.cat(
            [torch.full((1, cols), 2.0), torch.full((1, cols), 1.0)], dim=1
        )
        gate_up = gate_up.to(dt)
        return [gate_up[:, :cols], gate_up[:, cols:]]
    gate = torch.randn(rows, cols) * 2.0
    up = torch.randn(rows, cols)
    return [gate.to(dt), up.to(dt)]


def _adversarial_inputs(rows, cols, dtype, strided):
    # A gate of spread 40 (|gate| passes 88 on a few percent of the values,
    # where exp of it overflows fp32: sigmoid must be taken in a form that
    # saturates to 0 and 1, not inf / inf), and an up projection whose rows
    # have gains from 1e-2 to 1e2.
    dt = getattr(torch, dtype)
    gain = 10.0 ** (torch.rand(rows, 1) * 4.0 - 2.0)
    if strided:
        gate_up = torch.cat([torch.randn(rows, cols) * 40.0, torch.randn(rows, cols) * gain], dim=1)
        gate_up = gate_up.to(dt)
        return [gate_up[:, :cols], gate_up[:, cols:]]
    gate = torch.randn(rows, cols) * 40.0
    up = torch.randn(rows, cols) * gain
    return [gate.to(dt), up.to(dt)]

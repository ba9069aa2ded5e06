"""Mamba selective scan (forward).

h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t,  y_t = C_t h_t + D u_t,  out = y * silu(z).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


def _chunk_length(length: int) -> int:
    # About sqrt(L) steps inside a chunk and L / chunk chunks: the eager
    # loops below then take ~3 sqrt(L) steps instead of L.
    return max(1, 2 ** round(math.log2(max(1.0, math.sqrt(length)))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, u, delta, A, B, C, D, z, delta_bias):
        # fp32 throughout, as in Mamba's reference and CUDA kernel.
        bsz, dim, length = u.shape
        state = A.shape[1]
        u, z = u.float(), z.float()
        dt = F.softplus(delta.float() + delta_bias[:, None].float())  # (b, d, L)
        A = A.float()
        B, C = B.float(), C.float()  # (b, n, L)
        # The exact sequential recurrence, evaluated chunk-parallel: run every
        # chunk from a zero state to get its end state and its decay product,
        # chain the chunks sequentially, then rerun every chunk from its true
        # start state. Each step is the same fp32 update as the sequential scan.
        c = _chunk_length(length)
        chunks = -(-length // c)
        pad = chunks * c - length
        if pad:
            # Padded steps are identities: dt = 0 gives exp(0 * A) = 1 and no input.
            dt = F.pad(dt, (0, pad))
            u = F.pad(u, (0, pad))
            B = F.pad(B, (0, pad))
            C = F.pad(C, (0, pad))
        dt_c = dt.view(bsz, dim, chunks, c)
        dtu_c = (dt * u).view(bsz, dim, chunks, c)
        B_c = B.view(bsz, state, chunks, c).permute(0, 2, 3, 1)  # (b, chunks, c, n)
        C_c = C.view(bsz, state, chunks, c).permute(0, 2, 3, 1)
        A_ = A[None, :, None, :]  # (1, d, 1, n)

        h = torch.zeros(bsz, dim, chunks, state, dtype=torch.float32, device=u.device)
        decay = torch.ones(bsz, dim, chunks, state, dtype=torch.float32, device=u.device)
        for j in range(c):
            dA = torch.exp(dt_c[..., j, None] * A_)
            h = dA * h + dtu_c[..., j, None] * B_c[:, None, :, j, :]
            decay = decay * dA
        start = torch.zeros(bsz, dim, chunks, state, dtype=torch.float32, device=u.device)
        carry = torch.zeros(bsz, dim, state, dtype=torch.float32, device=u.device)
        for k in range(chunks):
            start[:, :, k] = carry
            carry = decay[:, :, k] * carry + h[:, :, k]
        h = start
        y = torch.empty(bsz, dim, chunks, c, dtype=torch.float32, device=u.device)
        for j in range(c):
            dA = torch.exp(dt_c[..., j, None] * A_)
            h = dA * h + dtu_c[..., j, None] * B_c[:, None, :, j, :]
            y[..., j] = (h * C_c[:, None, :, j, :]).sum(-1)
        y = y.view(bsz, dim, chunks * c)[..., :length]
        y = y + D[:, None].float() * u[..., :length]
        return (y * F.silu(z)).to(torch.bfloat16)


def get_init_inputs(**params):
    return []


def get_inputs(batch, dim, state, seqlen, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(batch, dim, state, seqlen)
    bf16 = torch.bfloat16
    # Mamba's initialisation: A = -[1..state] per channel (S4D-real) with a
    # little spread; dt_bias puts softplus(dt_bias) log-uniformly in
    # [0.001, 0.1]; the dt projection adds activation noise, so per-step
    # decays exp(dt A) range from ~1 (slow channels) to ~0 (fast ones).
    ranks = torch.arange(1, state + 1, dtype=torch.float32)
    A = -(ranks[None, :] * torch.exp(0.1 * torch.randn(dim, state)))
    dt0 = torch.exp(torch.empty(dim).uniform_(math.log(1e-3), math.log(1e-1)))
    delta_bias = dt0 + torch.log(-torch.expm1(-dt0))  # inverse softplus
    delta = (0.5 * torch.randn(batch, dim, seqlen)).to(bf16)
    u = torch.randn(batch, dim, seqlen).to(bf16)
    B = torch.randn(batch, state, seqlen).to(bf16)
    C = torch.randn(batch, state, seqlen).to(bf16)
    D = 1.0 + 0.1 * torch.randn(dim)
    z = torch.randn(batch, dim, seqlen).to(bf16)
    return [u, delta, A, B, C, D, z, delta_bias]


def _adversarial_inputs(batch, dim, state, seqlen):
    # Slow channels only: A = -[1..state] scaled down by 10 to 100 and
    # softplus(dt_bias) log-uniform in [1e-4, 1e-3], so every per-step decay
    # exp(dt A) lies within 0.01 of 1 and the state remembers the whole
    # sequence: an error in carrying it from chunk to chunk never fades.
    bf16 = torch.bfloat16
    ranks = torch.arange(1, state + 1, dtype=torch.float32)
    A = -(ranks[None, :] * 10.0 ** (-1.0 - torch.rand(dim, state)))
    dt0 = torch.exp(torch.empty(dim).uniform_(math.log(1e-4), math.log(1e-3)))
    delta_bias = dt0 + torch.log(-torch.expm1(-dt0))
    delta = (0.5 * torch.randn(batch, dim, seqlen)).to(bf16)
    u = torch.randn(batch, dim, seqlen).to(bf16)
    B = torch.randn(batch, state, seqlen).to(bf16)
    C = torch.randn(batch, state, seqlen).to(bf16)
    D = 1.0 + 0.1 * torch.randn(dim)
    z = torch.randn(batch, dim, seqlen).to(bf16)
    return [u, delta, A, B, C, D, z, delta_bias]

"""Expert Mamba selective scan in Triton: one fused, chunked parallel scan.

Each program owns BLOCK_D channels of one sequence and walks the sequence in
chunks of CHUNK steps. A chunk's inputs are loaded as coalesced
(channels x time) tiles; dt = softplus(delta + bias), the decays exp(dt A)
and the inputs dt B u are formed in registers as (channels x state x time)
tiles and never stored. The recurrence h_t = a_t h_{t-1} + b_t is a
composition of affine maps, so `tl.associative_scan` computes every step of
the chunk in log2(CHUNK) levels; the state carried from the previous chunk
then enters as h_t = B_t + A_t h_carry, and the chunk's last state becomes the
next carry. The output contraction over the state, the D skip and the SiLU
gate run in the same pass: HBM sees u, delta, z, B and C once and the output
once.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# Globals a @triton.jit function reads must be constexpr on the GPU (the interpreter
# accepts plain floats).
LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _affine_combine(a_left, b_left, a_right, b_right):
    # Applying x -> a_left x + b_left, then x -> a_right x + b_right.
    return a_left * a_right, b_left * a_right + b_right


@triton.jit
def _selective_scan_kernel(
    u_ptr,
    delta_ptr,
    A_ptr,
    B_ptr,
    C_ptr,
    D_ptr,
    z_ptr,
    bias_ptr,
    out_ptr,
    dim,
    seqlen,
    BLOCK_D: tl.constexpr,
    STATE: tl.constexpr,
    CHUNK: tl.constexpr,
):
    pid_d = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    d_mask = offs_d < dim
    offs_n = tl.arange(0, STATE)
    steps = tl.arange(0, CHUNK)

    # Per-channel constants, loaded once; A pre-scaled so each decay is one exp2.
    A2 = tl.load(A_ptr + offs_d[:, None] * STATE + offs_n[None, :], mask=d_mask[:, None], other=0.0)
    A2 = A2 * LOG2E
    Dskip = tl.load(D_ptr + offs_d, mask=d_mask, other=0.0)
    bias = tl.load(bias_ptr + offs_d, mask=d_mask, other=0.0)

    rows = (batch * dim + offs_d.to(tl.int64)) * seqlen  # (b, d, :) rows of u, delta, z, out
    bc_rows = (batch * STATE + offs_n.to(tl.int64)) * seqlen  # (b, n, :) rows of B and C
    h = tl.zeros((BLOCK_D, STATE), dtype=tl.float32)
    for t0 in range(0, seqlen, CHUNK):
        t = t0 + steps
        t_mask = t < seqlen
        m2 = d_mask[:, None] & t_mask[None, :]
        x_offs = rows[:, None] + t[None, :]
        u = tl.load(u_ptr + x_offs, mask=m2, other=0.0).to(tl.float32)
        dl = tl.load(delta_ptr + x_offs, mask=m2, other=0.0).to(tl.float32) + bias[:, None]
        # softplus(x) = ln(1 + e^x), linear past 20 as in Mamba; masked steps
        # get dt = 0, an identity step (decay 1, no input) for the carry.
        dt = tl.where(dl > 20.0, dl, LN2 * tl.log2(1.0 + tl.exp2(dl * LOG2E)))
        dt = tl.where(m2, dt, 0.0)
        bc_offs = bc_rows[:, None] + t[None, :]
        Bt = tl.load(B_ptr + bc_offs, mask=t_mask[None, :], other=0.0).to(tl.float32)
        Ct = tl.load(C_ptr + bc_offs, mask=t_mask[None, :], other=0.0).to(tl.float32)

        decay = tl.exp2(dt[:, None, :] * A2[:, :, None])  # (BLOCK_D, STATE, CHUNK)
        inp = (dt * u)[:, None, :] * Bt[None, :, :]
        acc_a, acc_b = tl.associative_scan((decay, inp), axis=2, combine_fn=_affine_combine)
        hs = acc_b + acc_a * h[:, :, None]
        y = tl.sum(hs * Ct[None, :, :], axis=1)  # (BLOCK_D, CHUNK)
        # The chunk's last step (masked tail steps are identities) carries on.
        h = tl.sum(tl.where(steps[None, None, :] == CHUNK - 1, hs, 0.0), axis=2)

        z = tl.load(z_ptr + x_offs, mask=m2, other=0.0).to(tl.float32)
        gate = z / (1.0 + tl.exp2(-z * LOG2E))  # SiLU
        out = (y + Dskip[:, None] * u) * gate
        tl.store(out_ptr + x_offs, out.to(out_ptr.dtype.element_ty), mask=m2)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def _scan_config(batch: int, dim: int, seqlen: int, device: torch.device):
    """(BLOCK_D, CHUNK, num_warps): enough programs to fill every SM several times."""
    chunk = 64 if seqlen >= 64 else max(16, triton.next_power_of_2(seqlen))
    # Four channels per program (4096 elements of each chunk tile over 128
    # threads) unless that leaves fewer than ~8 programs per SM, as with one
    # long sequence, where two channels per program double the parallelism.
    block_d = 4 if batch * triton.cdiv(dim, 4) >= 8 * _num_sms(device) else 2
    return block_d, chunk, 4


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, u, delta, A, B, C, D, z, delta_bias):
        u, delta, z = u.contiguous(), delta.contiguous(), z.contiguous()
        B, C = B.contiguous(), C.contiguous()
        A = A.contiguous().float()
        D, delta_bias = D.contiguous().float(), delta_bias.contiguous().float()
        batch, dim, seqlen = u.shape
        state = A.shape[1]
        out = torch.empty((batch, dim, seqlen), dtype=torch.bfloat16, device=u.device)
        if out.numel() == 0:
            return out
        block_d, chunk, warps = _scan_config(batch, dim, seqlen, u.device)
        grid = (triton.cdiv(dim, block_d), batch)
        _selective_scan_kernel[grid](
            u,
            delta,
            A,
            B,
            C,
            D,
            z,
            delta_bias,
            out,
            dim,
            seqlen,
            BLOCK_D=block_d,
            STATE=state,
            CHUNK=chunk,
            num_warps=warps,
        )
        return out

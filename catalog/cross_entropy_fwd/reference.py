"""Per-token cross-entropy of LLM logits: loss[i] = logsumexp(logits[i]) - logits[i, targets[i]]."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")

IGNORE_INDEX = -100


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # Upcast first (as LLM training code does): the log-softmax and the loss
        # are computed in fp32, which is also the ground truth for bf16 logits.
        return F.cross_entropy(logits.float(), targets, ignore_index=IGNORE_INDEX, reduction="none")


def get_init_inputs(**params):
    return []


def get_inputs(tokens, vocab, dtype, strided=False, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(tokens, vocab, dtype, strided)
    # Logits of spread 3 with a per-token shift in [-20, 80): the loss is
    # shift-invariant, but a kernel that exponentiates without subtracting the
    # row maximum overflows, and one that pads the vocab tail with 0 instead of
    # -inf is visibly wrong on the negatively shifted rows.
    logits = torch.randn(tokens, vocab, dtype=torch.float32) * 3.0
    logits += torch.rand(tokens, 1, dtype=torch.float32) * 100.0 - 20.0
    targets = torch.randint(0, vocab, (tokens,), dtype=torch.int64)
    # The model is right some of the time: raise the target logit by U(0, 8).
    rows = torch.arange(tokens)
    logits[rows, targets] += torch.rand(tokens, dtype=torch.float32) * 8.0
    # About 10% of the tokens are padding / prompt tokens: ignore_index.
    targets = torch.where(torch.rand(tokens) < 0.1, torch.full_like(targets, IGNORE_INDEX), targets)
    logits = logits.to(getattr(torch, dtype))
    if strided:
        # The logits of a vocabulary padded to a multiple of 128 (as Megatron
        # pads it), sliced back to the real vocab: a row stride above `vocab`.
        padded = -(-vocab // 128) * 128 + 128
        wide = torch.empty(tokens, padded, dtype=logits.dtype)
        wide[:, vocab:] = 0.0
        wide[:, :vocab] = logits
        logits = wide[:, :vocab]
    return [logits, targets]


def _adversarial_inputs(tokens, vocab, dtype, strided):
    # Per-token shifts over the whole stated range [-100, 100); odd tokens
    # spread 25 to 40 (logits that span hundreds: exp of any logit but the
    # maximum's neighbours underflows, and a shift by anything but the
    # maximum overflows), even ones 0.01 to 10 (a nearly flat row: the loss is
    # about log(vocab)); every fourth token is nearly certain (its target 40
    # above the row maximum: a loss near 0).
    shift = torch.rand(tokens, 1, dtype=torch.float32) * 200.0 - 100.0
    rows = torch.arange(tokens)
    wide = (rows % 2 == 1).unsqueeze(1)
    spread = torch.where(
        wide,
        25.0 + 15.0 * torch.rand(tokens, 1, dtype=torch.float32),
        10.0 ** (torch.rand(tokens, 1, dtype=torch.float32) * 3.0 - 2.0),
    )
    logits = torch.randn(tokens, vocab, dtype=torch.float32) * spread + shift
    targets = torch.randint(0, vocab, (tokens,), dtype=torch.int64)
    certain = rows % 4 == 0
    logits[rows, targets] = torch.where(
        certain, logits.max(dim=1).values + 40.0, logits[rows, targets]
    )
    targets = torch.where(torch.rand(tokens) < 0.1, torch.full_like(targets, IGNORE_INDEX), targets)
    logits = logits.to(getattr(torch, dtype))
    if strided:
        padded = -(-vocab // 128) * 128 + 128
        wide = torch.empty(tokens, padded, dtype=logits.dtype)
        wide[:, vocab:] = 0.0
        wide[:, :vocab] = logits
        logits = wide[:, :vocab]
    return [logits, targets]

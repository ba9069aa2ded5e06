"""What a practitioner calls in eager PyTorch: F.cross_entropy on the logits in their own dtype."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # On bf16 logits the log-softmax is rounded to bf16, and so is each
        # loss; the task's output is fp32, so the losses (one per token) are
        # widened at the end. -100 is both F.cross_entropy's default and the
        # task's ignore_index.
        loss = F.cross_entropy(logits, targets, ignore_index=-100, reduction="none")
        return loss.float()

"""torch.optim.AdamW(fused=True)'s step: one torch._fused_adamw_ call over every tensor.

This is the fastest AdamW step PyTorch ships, and what a practitioner turns on
for fp32 training on a GPU: the whole update (decay, both moments, bias
correction, parameter step) in one multi-tensor kernel launch per group of
tensors, reading p, g, m, v once and writing p, m, v once, as the optimizer's
`fused=True` path calls it. The step count travels as one fp32 tensor on the
tensors' device, as the optimizer keeps it. The same op runs on CUDA and on the
CPU (PyTorch has a fused CPU AdamW since 2.4), so no fallback is needed.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float):
        super().__init__()
        self.lr, self.beta1, self.beta2 = lr, beta1, beta2
        self.eps, self.weight_decay = eps, weight_decay

    def forward(self, step: int, *tensors: torch.Tensor):
        n = len(tensors) // 4
        params, grads = list(tensors[:n]), list(tensors[n : 2 * n])
        exp_avgs, exp_avg_sqs = list(tensors[2 * n : 3 * n]), list(tensors[3 * n :])
        # One fill for every tensor's step count (torch.optim keeps one per
        # tensor on its device; views of one tensor read the same).
        steps = torch.full((n,), float(step), dtype=torch.float32, device=params[0].device)
        torch._fused_adamw_(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [],
            list(steps.unbind()),
            lr=self.lr,
            beta1=self.beta1,
            beta2=self.beta2,
            weight_decay=self.weight_decay,
            eps=self.eps,
            amsgrad=False,
            maximize=False,
        )
        return (*params, *exp_avgs, *exp_avg_sqs)

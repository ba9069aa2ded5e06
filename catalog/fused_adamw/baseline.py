"""Eager AdamW as torch.optim.AdamW runs it on CUDA by default: the foreach implementation."""

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
        # The sequence of torch.optim.adamw's multi-tensor path (foreach=True,
        # capturable=False): one horizontally fused launch per elementwise step.
        torch._foreach_mul_(params, 1.0 - self.lr * self.weight_decay)
        torch._foreach_lerp_(exp_avgs, grads, 1.0 - self.beta1)
        torch._foreach_mul_(exp_avg_sqs, self.beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1.0 - self.beta2)
        step_size = self.lr / (1.0 - self.beta1**step)
        bias_correction2_sqrt = (1.0 - self.beta2**step) ** 0.5
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denom, bias_correction2_sqrt)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(params, exp_avgs, denom, -step_size)
        return (*params, *exp_avgs, *exp_avg_sqs)

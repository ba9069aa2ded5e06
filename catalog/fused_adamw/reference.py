"""One AdamW step (decoupled weight decay) over every parameter tensor of a model, in place.

For each tensor, with step t (the step being taken, >= 1):
  p <- p * (1 - lr * weight_decay)
  m <- beta1 * m + (1 - beta1) * g
  v <- beta2 * v + (1 - beta2) * g * g
  p <- p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
The reference computes each tensor in fp64 and stores the fp32 results in place.
Forward returns (*params, *exp_avgs, *exp_avg_sqs), the updated tensors.
"""

import math

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float):
        super().__init__()
        self.lr, self.beta1, self.beta2 = lr, beta1, beta2
        self.eps, self.weight_decay = eps, weight_decay

    def forward(self, step: int, *tensors: torch.Tensor):
        n = len(tensors) // 4
        params, grads = tensors[:n], tensors[n : 2 * n]
        exp_avgs, exp_avg_sqs = tensors[2 * n : 3 * n], tensors[3 * n :]
        bc1 = 1.0 - self.beta1**step
        bc2_sqrt = math.sqrt(1.0 - self.beta2**step)
        for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs, strict=True):
            p64, g64, m64, v64 = p.double(), g.double(), m.double(), v.double()
            p64 = p64 * (1.0 - self.lr * self.weight_decay)
            m64 = self.beta1 * m64 + (1.0 - self.beta1) * g64
            v64 = self.beta2 * v64 + (1.0 - self.beta2) * g64 * g64
            p64 = p64 - (self.lr / bc1) * m64 / (v64.sqrt() / bc2_sqrt + self.eps)
            p.copy_(p64)
            m.copy_(m64)
            v.copy_(v64)
        return (*params, *exp_avgs, *exp_avg_sqs)


def get_init_inputs(**params):
    # LLM pre-training settings: lr 3e-4, betas (0.9, 0.95), eps 1e-8, decay 0.1.
    return [3e-4, 0.9, 0.95, 1e-8, 0.1]


def _shapes(vocab, hidden, ffn, kv, layers):
    # A LLaMA-style decoder: tied embedding, per layer q/k/v/o projections
    # (grouped-query k/v of width kv), gate/up/down MLP and two RMSNorm gains,
    # then the final norm.
    shapes = [(vocab, hidden)]
    for _ in range(layers):
        shapes += [(hidden,), (hidden, hidden), (kv, hidden), (kv, hidden), (hidden, hidden)]
        shapes += [(hidden,), (ffn, hidden), (ffn, hidden), (hidden, ffn)]
    shapes.append((hidden,))
    return shapes


def get_inputs(vocab, hidden, ffn, kv, layers, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(vocab, hidden, ffn, kv, layers)
    shapes = _shapes(vocab, hidden, ffn, kv, layers)
    p, g, m, v = [], [], [], []
    for shape in shapes:
        # Gradient scales differ by orders of magnitude between tensors; the
        # moments are those of a run some steps in (v ~ g^2 on average).
        scale = 10.0 ** (torch.rand(()).item() * 2.0 - 4.0)
        if len(shape) == 1:
            p.append(1.0 + 0.05 * torch.randn(shape))
        else:
            p.append(0.02 * torch.randn(shape))
        g.append(scale * torch.randn(shape))
        m.append(0.3 * scale * torch.randn(shape))
        v.append(scale * scale * (0.25 + torch.rand(shape)))
    step = int(torch.randint(1, 10001, ()).item())
    return [step, *p, *g, *m, *v]


def _adversarial_inputs(vocab, hidden, ffn, kv, layers):
    # Gradient scales from 1e-12 to 3e-2 between tensors (v ~ g^2 from 1e-24,
    # where sqrt(v) is far below eps and the update is m / eps, to 1e-3; an
    # fp32 update of larger moments would round by more than the tolerance's
    # 1e-8 on the values that cancel to near 0), one tensor in
    # four with zero gradients and zero moments (the update is the weight
    # decay alone), and an early step (2 to 10, large bias corrections).
    shapes = _shapes(vocab, hidden, ffn, kv, layers)
    p, g, m, v = [], [], [], []
    for i, shape in enumerate(shapes):
        scale = 10.0 ** (torch.rand(()).item() * 10.5 - 12.0)
        if i % 4 == 3:
            scale = 0.0
        if len(shape) == 1:
            p.append(1.0 + 0.05 * torch.randn(shape))
        else:
            p.append(0.02 * torch.randn(shape))
        g.append(scale * torch.randn(shape))
        m.append(0.3 * scale * torch.randn(shape))
        v.append(scale * scale * (0.25 + torch.rand(shape)))
    step = int(torch.randint(2, 11, ()).item())
    return [step, *p, *g, *m, *v]

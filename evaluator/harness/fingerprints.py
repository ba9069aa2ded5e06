"""Fingerprints of a call's outputs: what the child reports of every timed, batch and audit call.

A fingerprint holds the outputs' values at a few secret positions, drawn
over all outputs at once, and the count of outputs that hold a NaN or an
infinity; the judge draws the same positions in the reference's outputs and
compares. Its size and cost do not grow with the number of outputs (an
optimizer step returns hundreds of tensors):

- **Positions over all outputs jointly.** `samples` positions in the
  virtual concatenation of the flattened outputs, drawn from the secret
  sample seed, so each output is sampled in proportion to its size. A kernel
  that skips a fraction f of the work (of any output, or of all of them) is
  caught in a checked call with probability 1 - (1 - f)^samples; the judge
  checks 6 timed and 2 batch calls of 32 samples and 4 audit calls of 1024
  per timed workload, so it passes them all with probability (1 - f)^4352
  (1.3 % for f = 0.1 %): only a share too small to gain anything escapes.
- **Gathered on the device, read once.** The values are picked with index
  ops where the outputs live, and come to the host with every output's norm
  in one transfer; the layout (each output's shape and dtype) is read on
  the host, so a changed shape still mismatches.
- **Norms.** Every output's L2 norm, accumulated in fp64 by torch's
  multi-tensor reduction (a few launches however many outputs): non-finite
  exactly where the output holds a NaN or an infinity, and moved by any
  change to the output (bar sign flips). The child compares the reading of
  the harness's copies, taken right after a timed call, with a reading of
  the outputs copied again after a device sync: work left running on another
  stream changes some output in between (`escaped_work`).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

FINGERPRINT_SAMPLES = 32
# An audit call (Child._audit_call) is sampled more densely: the part of a
# call that ran ahead of its inputs may be a small share of the output.
AUDIT_SAMPLES = 1024

# Taken when the harness is imported, before any submission: patching
# torch._foreach_norm afterwards cannot bend the escape check (PatchGuard).
_foreach_norm = torch._foreach_norm


@dataclass(frozen=True)
class Reading:
    """A fingerprint, and the outputs' norms (the child's own escape check, never sent)."""

    fingerprint: dict
    norms: tuple[float, ...]

    def same_as(self, other: Reading) -> bool:
        """The same values and norms (NaN as NaN): nothing changed the outputs in between."""
        return json.dumps([self.fingerprint, self.norms]) == json.dumps(
            [other.fingerprint, other.norms]
        )


def sample_positions(total: int, *, seed: int, samples: int = FINGERPRINT_SAMPLES) -> list[int]:
    """`samples` positions in [0, total), drawn from `seed` with replacement, in ascending order.

    Drawn on the host, so the child and the judge draw the same positions
    whatever device their outputs are on.
    """
    if total <= 0:
        return []
    generator = torch.Generator()
    generator.manual_seed(seed)
    drawn = torch.randint(0, total, (min(samples, total),), generator=generator)
    return sorted(drawn.tolist())


def sample_places(
    numels: Sequence[int], *, seed: int, samples: int = FINGERPRINT_SAMPLES
) -> list[tuple[int, int]]:
    """(output, index in that flattened output) of each sampled position, in the values' order."""
    starts = list(itertools.accumulate(numels, initial=0))[:-1]
    places = []
    for position in sample_positions(sum(numels), seed=seed, samples=samples):
        # The last output starting at or before the position: empty outputs hold none.
        output = bisect.bisect_right(starts, position) - 1
        places.append((output, position - starts[output]))
    return places


def layout(outputs: Sequence[torch.Tensor]) -> str:
    """A digest of every output's shape and dtype: the same outputs, the same digest."""
    described = ";".join(f"{tuple(o.shape)}:{o.dtype}" for o in outputs)
    return hashlib.blake2b(described.encode(), digest_size=8).hexdigest()


def output_norms(outputs: Sequence[torch.Tensor]) -> torch.Tensor | None:
    """Every output's L2 norm in fp64, queued on the current stream and not waited for.

    One multi-tensor reduction per device and dtype (integer outputs give
    their sum instead): a few launches, however many outputs.
    """
    if not outputs:
        return None
    norms: list[torch.Tensor | None] = [None] * len(outputs)
    groups: dict[tuple, list[int]] = {}
    for index, out in enumerate(outputs):
        groups.setdefault((out.device, out.dtype), []).append(index)
    for (_, dtype), indices in groups.items():
        if dtype.is_floating_point or dtype.is_complex:
            tensors = [_real(outputs[i].detach()) for i in indices]
            found = list(_foreach_norm(tensors, 2, dtype=torch.float64))
        else:
            found = [outputs[i].detach().sum(dtype=torch.float64) for i in indices]
        for index, norm in zip(indices, found, strict=True):
            norms[index] = norm
    device = outputs[0].device
    return torch.stack([n.to(device) for n in norms if n is not None])


def read(
    outputs: Sequence[torch.Tensor],
    *,
    seed: int,
    samples: int = FINGERPRINT_SAMPLES,
) -> Reading:
    """The fingerprint of `outputs` at the positions `seed` draws, and their norms.

    Everything read from the device comes in one transfer.
    """
    outputs = tuple(o.detach() for o in outputs)
    norms = output_norms(outputs)
    places = sample_places([o.numel() for o in outputs], seed=seed, samples=samples)
    pieces: list[torch.Tensor] = []
    runs = [
        (output, [local for _, local in run])
        for output, run in itertools.groupby(places, key=lambda place: place[0])
    ]
    if places:
        device = outputs[0].device
        # One copy of every index to the device; each output's run is a slice of it.
        local = torch.tensor([i for _, i in places], dtype=torch.int64).to(device)
        start = 0
        for output, indices in runs:
            flat = outputs[output].reshape(-1)
            picked = flat[local[start : start + len(indices)].to(flat.device)]
            pieces.append(_as_bits(picked).to(device))
            start += len(indices)
    if norms is not None:
        pieces.append(norms.view(torch.int64))
    # The one transfer from the device.
    host = torch.cat(pieces).cpu() if pieces else torch.empty(0, dtype=torch.int64)
    values: list = []
    start = 0
    for output, indices in runs:
        chunk = host[start : start + len(indices)]
        floating = outputs[output].is_floating_point() or outputs[output].is_complex()
        values += (chunk.view(torch.float64) if floating else chunk).tolist()
        start += len(indices)
    read_norms = tuple(host[start:].view(torch.float64).tolist())
    fingerprint = {
        "numel": sum(o.numel() for o in outputs),
        "layout": layout(outputs),
        "nonfinite_outputs": sum(not math.isfinite(n) for n in read_norms),
        "values": values,
    }
    return Reading(fingerprint, read_norms)


def fingerprint(
    outputs: Sequence[torch.Tensor], *, seed: int, samples: int = FINGERPRINT_SAMPLES
) -> dict:
    """What the child reports of a call's outputs, and the judge recomputes from the reference's."""
    return read(outputs, seed=seed, samples=samples).fingerprint


def _real(tensor: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(tensor) if tensor.is_complex() else tensor


def _as_bits(values: torch.Tensor) -> torch.Tensor:
    """Sampled values as int64: floats as the bits of their fp64 value, integers as they are.

    So values of every dtype travel in one tensor, and come back exactly.
    """
    if values.is_complex():
        values = values.real
    if values.is_floating_point():
        return values.to(torch.float64).view(torch.int64)
    return values.to(torch.int64)

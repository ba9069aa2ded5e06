"""Device timing helpers and output fingerprints (used inside the child process).

Protocol (SPEC §6, docs/evaluator.md): every timed call gets freshly generated
inputs, the L2 cache is flushed and persisting L2 lines are reset before it,
and the call is bracketed by CUDA events on the current stream. Reference and
submission calls alternate in the same process so clock changes cancel in
their ratio. The median over calls is the figure; the interquartile range is
its spread.
"""

from __future__ import annotations

import ctypes
import statistics
from collections.abc import Sequence

import torch

CUDA_LIMIT_PERSISTING_L2 = 0x06


class L2Flusher:
    """Evicts the L2 cache by writing a buffer twice its size."""

    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        size = max(int(getattr(props, "L2_cache_size", 0)) * 2, 256 * 1024 * 1024)
        self.buffer = torch.empty(size, dtype=torch.uint8, device=device)
        self._cudart = _load_cudart()

    def flush(self) -> None:
        # Reset lines a submission may have marked persisting with an access
        # policy window: a plain write does not evict them.
        if self._cudart is not None:
            self._cudart.cudaCtxResetPersistingL2Cache()
            self._cudart.cudaDeviceSetLimit(CUDA_LIMIT_PERSISTING_L2, ctypes.c_size_t(0))
        self.buffer.zero_()

    @property
    def resets_persisting_lines(self) -> bool:
        return self._cudart is not None


def _load_cudart() -> ctypes.CDLL | None:
    """The CUDA runtime that torch already loaded, found through its own process map."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libcudart" in line}
    except OSError:
        paths = set()
    for path in sorted(paths) or ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]:
        try:
            lib = ctypes.CDLL(path)
            lib.cudaCtxResetPersistingL2Cache.restype = ctypes.c_int
            lib.cudaDeviceSetLimit.restype = ctypes.c_int
            return lib
        except (OSError, AttributeError):
            continue
    return None


def fingerprint_weights(numel: int, *, seed: int, device: torch.device, integer: bool):
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    if integer:
        return torch.randint(1, 1000, (numel,), generator=generator, device=device)
    return torch.rand(numel, generator=generator, device=device, dtype=torch.float64) + 0.5


def fingerprint(outputs: Sequence[torch.Tensor], *, seed: int) -> list[dict]:
    """A weighted sum per output: cheap to compute, hard to match without the right values.

    Float outputs: sum(w · x) in float64 over finite elements, plus the count
    of non-finite ones. Integer outputs: an exact integer weighted sum.
    """
    prints = []
    for index, out in enumerate(outputs):
        flat = out.detach().reshape(-1)
        integer = not (flat.is_floating_point() or flat.is_complex())
        w = fingerprint_weights(
            flat.numel(), seed=seed + index, device=flat.device, integer=integer
        )
        if integer:
            prints.append({"sum": int((flat.to(torch.int64) * w).sum().item()), "nonfinite": 0})
            continue
        values = flat.double()
        finite = torch.isfinite(values)
        prints.append(
            {
                "sum": float((torch.where(finite, values, 0.0) * w).sum().item()),
                "nonfinite": int((~finite).sum().item()),
            }
        )
    return prints


def summarize(times_ms: Sequence[float]) -> tuple[float, float, float]:
    """Median, interquartile range and minimum of a series of times."""
    ordered = sorted(times_ms)
    if len(ordered) < 4:
        med = statistics.median(ordered)
        return med, 0.0, ordered[0]
    q = statistics.quantiles(ordered, n=4)
    return q[1], q[2] - q[0], ordered[0]

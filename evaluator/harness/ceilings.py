"""The GPU's measured ceilings: peak matrix rates (bf16, fp8) and memory bandwidth.

The judge's speed-of-light floor and the verdict's `sol_fraction` are taken
against these, measured on the worker's own GPU and cached per device.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch


def _cache_dir() -> Path:
    root = os.environ.get("D2K_EVALUATOR_CACHE") or Path.home() / ".cache" / "d2k-evaluator"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


# Bumped when the measurement changes, so a cached result of the old one is redone.
CEILINGS_VERSION = 3


def ceilings(
    *, refresh: bool = False, measure_guard: Callable[[], ContextManager[Any]] = nullcontext
) -> dict[str, Any]:
    """Measured peak matrix rates (bf16, fp8) and memory bandwidth of this GPU, cached per device.

    Measured once per worker (and on `python -m evaluator ceilings --refresh`),
    as the best of short runs after a warm-up, since a kernel under test runs
    in short bursts too (a sustained median sits lower once the card reaches
    its power limit). Bandwidth is the better of a device-to-device copy
    (bytes read plus written) and a read-only reduction; the matrix rate is
    the best of three large products on random data, once with bf16 operands
    and once with fp8 (e4m3) operands through `torch._scaled_mm`. A GPU without
    fp8 matrix instructions (before SM 8.9) has no `peak_tflops_fp8`.
    """
    name = torch.cuda.get_device_name(0)
    cache = _cache_dir() / f"ceilings-{name.replace(' ', '_')}.json"
    if cache.exists() and not refresh:
        cached = json.loads(cache.read_text())
        if cached.get("version") == CEILINGS_VERSION:
            return cached
    with measure_guard():  # on a shared GPU: measured with the GPU alone (gpulease)
        copy_tbps, read_tbps = _measure_copy_tbps(), _measure_read_tbps()
        mm_tflops = _measure_bf16_tflops()
        fp8_tflops = _measure_fp8_tflops()
        torch.cuda.empty_cache()
    result = {
        "version": CEILINGS_VERSION,
        "device": name,
        "peak_tbps": max(copy_tbps, read_tbps),
        "copy_tbps": copy_tbps,
        "read_tbps": read_tbps,
        "peak_tflops_bf16": mm_tflops,
        **({"peak_tflops_fp8": fp8_tflops} if fp8_tflops is not None else {}),
        "method": (
            "best of do_bench runs after warm-up: 2 GiB D2D copy (read+write), "
            "4 GiB sum (read); bf16 matmul and e4m3 _scaled_mm (bf16 out) "
            f"{', '.join('x'.join(map(str, s)) for s in MATMUL_SHAPES)}"
        ),
        "torch": torch.__version__,
    }
    cache.write_text(json.dumps(result, indent=2))
    return result


def _best_ms(fn: Any) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=100, rep=300, return_mode="min"))


def _measure_copy_tbps() -> float:
    src = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = _best_ms(lambda: dst.copy_(src))
    return 2 * src.numel() / (ms * 1e-3) / 1e12


def _measure_read_tbps() -> float:
    src = torch.empty(1024**3, dtype=torch.float32, device="cuda").uniform_()
    ms = _best_ms(lambda: src.sum())
    return src.numel() * 4 / (ms * 1e-3) / 1e12


MATMUL_SHAPES = ((8192, 8192, 8192), (4096, 4096, 8192), (16384, 1024, 8192))


def _measure_bf16_tflops() -> float:
    best = 0.0
    for m, n, k in MATMUL_SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ms = _best_ms(lambda a=a, b=b: a @ b)
        best = max(best, 2 * m * n * k / (ms * 1e-3) / 1e12)
    return best


def fp8_matmul_supported() -> bool:
    """Whether device 0 has fp8 (e4m3) matrix instructions: SM 8.9 (Ada) and later."""
    if not torch.cuda.is_available() or not hasattr(torch, "float8_e4m3fn"):
        return False
    return torch.cuda.get_device_capability(0) >= (8, 9)


def _measure_fp8_tflops() -> float | None:
    """Best rate of e4m3 products with unit scales and bf16 output, None without fp8 matmul."""
    if not fp8_matmul_supported():
        return None
    one = torch.ones((), device="cuda", dtype=torch.float32)
    best = 0.0
    for m, n, k in MATMUL_SHAPES:
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        # _scaled_mm takes its second operand column-major.
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()

        def product(a: torch.Tensor = a, b: torch.Tensor = b) -> torch.Tensor:
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        try:
            ms = _best_ms(product)
        except RuntimeError:  # a build or driver without fp8 GEMM kernels
            return None
        best = max(best, 2 * m * n * k / (ms * 1e-3) / 1e12)
    return best

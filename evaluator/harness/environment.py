"""What the verdict records about the machine: device, versions, clocks, ceilings."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import torch

from .spec import EVALUATOR_VERSION, Mode

SMI_FIELDS = (
    "name",
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "temperature.gpu",
    "power.draw",
    "clocks_throttle_reasons.active",
)


def resolve_mode(requested: str) -> Mode:
    if requested == "auto":
        return Mode.CUDA if torch.cuda.is_available() else Mode.INTERPRET
    return Mode(requested)


def gpu_state() -> dict[str, str]:
    """Clocks, temperature and throttle reasons as nvidia-smi reports them now."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return {}
    return dict(zip(SMI_FIELDS, (v.strip() for v in out.split(",")), strict=False))


def describe(mode: Mode) -> dict[str, Any]:
    import triton

    info: dict[str, Any] = {
        "mode": str(mode),
        "evaluator_version": EVALUATOR_VERSION,
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cpu": platform.processor() or platform.machine(),
        "comparable": mode is Mode.CUDA,
    }
    if mode is Mode.CUDA:
        props = torch.cuda.get_device_properties(0)
        info.update(
            device=props.name,
            gpu=props.name,
            sm_count=props.multi_processor_count,
            memory_gib=round(props.total_memory / 1024**3, 1),
            l2_bytes=int(getattr(props, "L2_cache_size", 0)),
            capability=f"{props.major}.{props.minor}",
            cuda=torch.version.cuda,
            gpu_state_before=gpu_state(),
        )
        info["driver"] = info["gpu_state_before"].get("driver_version", "")
    else:
        info["device"] = "CPU (Triton interpreter)"
    return info


def _cache_dir() -> Path:
    root = os.environ.get("D2K_EVALUATOR_CACHE") or Path.home() / ".cache" / "d2k-evaluator"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


# Bumped when the measurement changes, so a cached result of the old one is redone.
CEILINGS_VERSION = 2


def ceilings(*, refresh: bool = False) -> dict[str, Any]:
    """Measured peak bf16 matrix rate and memory bandwidth of this GPU, cached per device.

    Measured once per worker (and on `python -m evaluator ceilings --refresh`),
    as the best of short runs after a warm-up, since a kernel under test runs
    in short bursts too (a sustained median sits lower once the card reaches
    its power limit). Bandwidth is the better of a device-to-device copy
    (bytes read plus written) and a read-only reduction; the matrix rate is
    the best of three large bf16 products on random data.
    """
    name = torch.cuda.get_device_name(0)
    cache = _cache_dir() / f"ceilings-{name.replace(' ', '_')}.json"
    if cache.exists() and not refresh:
        cached = json.loads(cache.read_text())
        if cached.get("version") == CEILINGS_VERSION:
            return cached
    copy_tbps, read_tbps = _measure_copy_tbps(), _measure_read_tbps()
    mm_tflops = _measure_bf16_tflops()
    torch.cuda.empty_cache()
    result = {
        "version": CEILINGS_VERSION,
        "device": name,
        "peak_tbps": max(copy_tbps, read_tbps),
        "copy_tbps": copy_tbps,
        "read_tbps": read_tbps,
        "peak_tflops_bf16": mm_tflops,
        "method": (
            "best of do_bench runs after warm-up: 2 GiB D2D copy (read+write), "
            "4 GiB sum (read); bf16 matmul 8192^3, 4096x4096x8192, 16384x1024x8192"
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


def _measure_bf16_tflops() -> float:
    best = 0.0
    for m, n, k in ((8192, 8192, 8192), (4096, 4096, 8192), (16384, 1024, 8192)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ms = _best_ms(lambda a=a, b=b: a @ b)
        best = max(best, 2 * m * n * k / (ms * 1e-3) / 1e12)
    return best

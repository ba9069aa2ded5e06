"""Time each rewritten baseline.py against the one it replaces, on a GPU, and check it.

    python bench/baseline_probe.py [--root DIR] [--budget SECONDS]

DIR holds one folder per task (task.toml, reference.py, baseline.py and, where
the task had one, old_baseline.py: the baseline before the rewrite; without it
the old side is the reference). For each timed workload of each task: inputs
from the reference's get_inputs on cuda (seeded), every candidate checked
against the reference at the task's tolerance widened to its dtype's roundoff
(as tests/catalog/test_catalog_baselines.py does), then timed with CUDA events
after a warm-up, the L2 flushed before each call, median of the calls. Prints
one line per candidate and a table at the end. Standalone (torch and the
standard library): it runs from a copy of these files on a GPU machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import statistics
import sys
import threading
import time
import tomllib
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

DEVICE = "cuda"
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}
FLUSH_BYTES = 512 * 2**20  # several times the H200's 60 MB L2
ROWS: list[tuple[str, str, str, str, str]] = []


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def inputs_of(ref, params: dict, seed: int = 1234) -> list:
    torch.manual_seed(seed)
    with torch.device(DEVICE):
        return list(ref.get_inputs(**params))


def model_of(cls, ref, params: dict):
    torch.manual_seed(0)
    with torch.device(DEVICE):
        return cls(*ref.get_init_inputs(**params))


def as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, tuple | list) else (value,)


def tolerance(task: dict, expected: torch.Tensor, tensors: list) -> tuple[float, float, float]:
    tols = task.get("tolerances", {})
    name = str(expected.dtype).removeprefix("torch.")
    t = tols.get(name, tols["default"])
    dtypes = {x.dtype for x in tensors if isinstance(x, torch.Tensor)} & set(UNIT_ROUNDOFF)
    u = max((UNIT_ROUNDOFF[d] for d in dtypes), default=0.0)
    rms = float(expected.double().square().mean().sqrt()) if expected.numel() else 0.0
    return max(t["atol"], 8 * u * rms), max(t["rtol"], 8 * u), max(t["rel_l2"], 2 * u)


def check(outputs: tuple, expected: tuple, task: dict, tensors: list) -> str:
    """'ok (rel_l2 x)' or what is wrong, per the harness's compare rules."""
    worst = 0.0
    for i, (o, e) in enumerate(zip(outputs, expected, strict=True)):
        if o.shape != e.shape or o.dtype != e.dtype:
            return f"err output {i}: {tuple(o.shape)} {o.dtype} vs {tuple(e.shape)} {e.dtype}"
        atol, rtol, rel_l2 = tolerance(task, e, [*tensors, *expected])
        od, ed = o.double(), e.double()
        diff = (od - ed).abs()
        if not torch.isfinite(od).all():
            return f"err output {i}: non-finite values"
        over = int((diff > atol + rtol * ed.abs()).sum())
        norm = float(ed.norm())
        rel = float(diff.norm()) / norm if norm > 0 else float(diff.norm())
        worst = max(worst, rel)
        if over or rel > (rel_l2 if norm > 0 else atol * math.sqrt(e.numel())):
            return f"err output {i}: {over} values over atol/rtol, rel_l2 {rel:.2e}"
    return f"ok (rel_l2 {worst:.1e})"


def timed(fn: Callable, inputs: list, calls: int, budget_s: float) -> float:
    """Median µs of `calls` calls (fewer if `budget_s` runs out), L2 flushed before each."""
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=DEVICE)
    times = []
    started = time.perf_counter()
    for _ in range(calls):
        flush.zero_()
        if DEVICE == "cpu":  # the CPU smoke test (--cpu-checks): wall time
            t0 = time.perf_counter()
            fn(*inputs)
            times.append((time.perf_counter() - t0) * 1e6)
        else:
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            fn(*inputs)
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) * 1e3)
        if time.perf_counter() - started > budget_s and len(times) >= 3:
            break
    return statistics.median(times)


def run_candidate(
    name, fn, ref_out, task, params, ref, inplace, calls, budget_s
) -> tuple[str, str]:
    threads = threading.active_count()
    try:
        inputs = inputs_of(ref, params)
        with torch.no_grad():
            out = tuple(t.clone() for t in as_tuple(fn(*inputs)))
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        status = check(out, ref_out, task, inputs)
        del out
        if inplace:
            inputs = inputs_of(ref, params)
        with torch.no_grad():
            fn(*inputs)  # warm-up after the first (compiling) call
            us = timed(fn, inputs, calls, budget_s)
        del inputs
    except Exception as exc:
        return "—", f"err {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    finally:
        torch.cuda.empty_cache()
    if threading.active_count() != threads:
        status += f" [threads {threads}->{threading.active_count()}]"
    return f"{us:,.1f}", status


# -- candidates beyond old and new, per task ------------------------------------------


def conv_nhwc(x, weight, bias):
    """Depthwise conv2d on the channels-last view (no transpose copy), then SiLU."""
    seqlen, dim, width = x.shape[1], x.shape[2], weight.shape[1]
    x4 = x.transpose(1, 2).unsqueeze(2)  # (B, D, 1, L), channels-last strides
    y = F.conv2d(x4, weight.view(dim, 1, 1, width), bias, padding=(0, width - 1), groups=dim)
    return F.silu(y[..., :seqlen]).squeeze(2).transpose(1, 2)


def conv_unfold(x, weight, bias):
    """Each output's window of taps as an unfolded view, one weighted sum, then SiLU."""
    width = weight.shape[1]
    windows = F.pad(x, (0, 0, width - 1, 0)).unfold(1, width, 1)  # (B, L, D, width)
    return F.silu((windows * weight).sum(-1) + bias)


def conv_shift_add(x, weight, bias):
    seqlen, width = x.shape[1], weight.shape[1]
    acc = bias + weight[:, width - 1] * x
    for k in range(width - 1):
        shift = width - 1 - k
        acc = acc + weight[:, k] * F.pad(x, (0, 0, shift, 0))[:, :seqlen]
    return F.silu(acc)


def rope_native(positions, q, k, cos_cache, sin_cache):
    """vLLM's forward_native, the function vLLM compiles."""
    half = q.shape[-1] // 2
    cos = cos_cache.index_select(0, positions).unsqueeze(1)
    sin = sin_cache.index_select(0, positions).unsqueeze(1)

    def rotate(x):
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)

    q.copy_(rotate(q))
    k.copy_(rotate(k))
    return q, k


def paged_varlen_flash(q, key_cache, value_cache, block_table, context_lens):
    """Pages gathered into one packed buffer as long as the cache, flash varlen with seqused_k."""
    batch, _, head_dim = q.shape
    num_blocks, block_size, kv_heads, _ = key_cache.shape
    width = block_table.shape[1]
    pages = (context_lens.long() + block_size - 1) // block_size
    ends = torch.cumsum(pages, 0)
    slot = torch.arange(num_blocks, device=q.device)
    seq = torch.searchsorted(ends, slot, right=True).clamp(max=batch - 1)
    j = (slot - (ends - pages)[seq]).clamp(0, width - 1)
    page_ids = block_table[seq, j].long()
    k = key_cache[page_ids].view(num_blocks * block_size, kv_heads, head_dim)
    v = value_cache[page_ids].view(num_blocks * block_size, kv_heads, head_dim)
    cu_k = F.pad(((ends - pages) * block_size).to(torch.int32), (0, 1), value=0)
    cu_k[-1] = num_blocks * block_size
    cu_q = torch.arange(batch + 1, dtype=torch.int32, device=q.device)
    out = torch.ops.aten._flash_attention_forward(
        q,
        k,
        v,
        cu_q,
        cu_k,
        1,
        width * block_size,
        0.0,
        False,
        False,
        scale=head_dim**-0.5,
        seqused_k=context_lens.to(torch.int32),
    )[0]
    return out


def compiled(fn):
    return torch.compile(fn, dynamic=False, options={"compile_threads": 1})


def extra_candidates(slug: str, base, old) -> dict[str, Callable]:
    if slug == "fp8_gemm_blockscale":

        def v2(a, a_scale, b, b_scale):
            a, b = a.view(torch.float8_e4m3fn), b.view(torch.float8_e4m3fn)
            st = torch.nn.functional.ScalingType
            return torch.nn.functional.scaled_mm(
                a,
                b.t(),
                a_scale.t().contiguous().t(),
                st.BlockWise1x128,
                b_scale.t(),
                st.BlockWise128x128,
                output_dtype=torch.bfloat16,
            )

        def deq(a, a_scale, b, b_scale):
            a, b = a.view(torch.float8_e4m3fn), b.view(torch.float8_e4m3fn)
            return base.dequantised_mm(a, a_scale, b, b_scale)

        return {"scaled_mm_v2": v2, "dequant_broadcast": deq}
    if slug == "w4a16_gemv":

        def noswap(x, qweight, scales):
            n = qweight.shape[0]
            packed = torch._convert_weight_to_int4pack(qweight.view(torch.uint8).view(n, -1), 8)
            sz = torch.stack((scales.t(), torch.zeros_like(scales.t())), dim=-1)
            return torch._weight_int4pack_mm(x, packed, 128, sz)

        return {"int4pack_noswap": noswap, "dequant_broadcast": base.dequantised_mm}
    if slug == "selective_scan":
        return {"generic_eager": base.scan_generic}
    if slug == "paged_attention_decode":
        return {"varlen_flash": paged_varlen_flash}
    if slug == "causal_conv1d":
        return {
            "conv2d_nhwc": conv_nhwc,
            "shift_add": conv_shift_add,
            "unfold_compiled": compiled(conv_unfold),
        }
    if slug == "rotary_embedding":
        return {"native_compiled": compiled(rope_native)}
    return {}


def probe_task(task_dir: Path, budget_s: float) -> None:
    slug = task_dir.name
    started = time.perf_counter()
    task = tomllib.loads((task_dir / "task.toml").read_text())
    ref = load(task_dir / "reference.py", f"probe_ref_{slug}")
    base = load(task_dir / "baseline.py", f"probe_new_{slug}")
    old_path = task_dir / "old_baseline.py"
    old = load(old_path, f"probe_old_{slug}") if old_path.is_file() else ref
    inplace = bool(task.get("inplace", False))
    slow_old = slug in ("selective_scan", "paged_attention_decode")
    for workload in task["checks" if DEVICE == "cpu" else "workloads"]:
        params = workload["params"]
        left = budget_s - (time.perf_counter() - started)
        if left <= 0:
            print(f"{slug} {workload['name']}: skipped (task budget spent)", flush=True)
            ROWS.append((slug, workload["name"], "—", "—", "skipped: budget"))
            continue
        with torch.no_grad():
            ref_model = model_of(ref.Model, ref, params)
            expected = tuple(t.clone() for t in as_tuple(ref_model(*inputs_of(ref, params))))
        sides = {
            "old": model_of(old.Model, ref, params),
            "new": model_of(base.Model, ref, params),
            **extra_candidates(slug, base, old),
        }
        results = {}
        for name, fn in sides.items():
            left = budget_s - (time.perf_counter() - started)
            if left <= 0:
                results[name] = ("—", "skipped: budget")
                continue
            calls = 5 if (slow_old and name == "old") else 30
            us, status = run_candidate(
                name, fn, expected, task, params, ref, inplace, calls, min(4.0, left)
            )
            results[name] = (us, status)
            print(f"{slug:24} {workload['name']:28} {name:20} {us:>12} µs  {status}", flush=True)
        del expected, sides
        torch.cuda.empty_cache()
        others = "; ".join(
            f"{n} {us} µs {st.split(' (')[0]}"
            for n, (us, st) in results.items()
            if n not in ("old", "new")
        )
        ROWS.append(
            (
                slug,
                workload["name"],
                results["old"][0],
                results["new"][0],
                f"new {results['new'][1]}" + (f"; {others}" if others else ""),
            )
        )
    for hidden in task.get("hidden", []) if slug in HIDDEN_CHECKED else []:
        if budget_s - (time.perf_counter() - started) <= 0:
            break
        params = hidden["params"]
        try:
            with torch.no_grad():
                expected = as_tuple(model_of(ref.Model, ref, params)(*inputs_of(ref, params)))
                expected = tuple(t.clone() for t in expected)
                inputs = inputs_of(ref, params)
                got = as_tuple(model_of(base.Model, ref, params)(*inputs))
            status = check(got, expected, task, inputs)
        except Exception as exc:
            status = f"err {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(
            f"{slug:24} {hidden['name']:28} {'new (hidden)':20} {'':>12}     {status}", flush=True
        )
        ROWS.append((slug, hidden["name"], "", "", f"hidden, correctness only: new {status}"))


HIDDEN_CHECKED = {"fused_adamw", "grouped_gemm_moe", "fp8_gemm_blockscale", "w4a16_gemv"}
# Seconds per task, in the order run: cheap eager ops first, compiles last.
BUDGETS = {
    "fused_adamw": 25,
    "grouped_gemm_moe": 30,
    "fp8_gemm_blockscale": 20,
    "w4a16_gemv": 20,
    "rotary_embedding": 35,
    "causal_conv1d": 40,
    "paged_attention_decode": 95,
    "selective_scan": 110,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--budget", type=float, default=380.0, help="seconds for all tasks")
    parser.add_argument(
        "--cpu-checks", action="store_true", help="a smoke test: check workloads on the CPU"
    )
    args = parser.parse_args()
    global DEVICE
    DEVICE = "cpu" if args.cpu_checks else "cuda"
    began = time.perf_counter()
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu"
    print(f"torch {torch.__version__} on {gpu}", flush=True)
    for slug, seconds in BUDGETS.items():
        if not (args.root / slug).is_dir():
            continue
        left = args.budget - (time.perf_counter() - began)
        try:
            probe_task(args.root / slug, min(seconds, left))
        except Exception:
            traceback.print_exc()
        torch.cuda.empty_cache()
    print("\n| task | workload | old µs | new µs | new and other candidates |")
    print("|---|---|---:|---:|---|")
    for row in ROWS:
        print("| " + " | ".join(row) + " |")
    print(f"\ntotal {time.perf_counter() - began:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Tolerance math: is a submission's output, or its fingerprint, close enough to the reference's?"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from taskformat.spec import TaskSpec, Tolerance

from .fingerprints import FINGERPRINT_SAMPLES, fingerprint, sample_places


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs_err: float | None
    rel_err: float | None
    message: str = ""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def compare_tensor(
    out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, ref_rms: float | None = None
) -> Comparison:
    """Elementwise atol/rtol (with the tolerance's share of the reference's RMS), a relative
    L2 bound (with its absolute floor), and NaN/Inf only where the reference has them.

    `ref_rms`: the RMS of the whole reference output where `ref` holds a sample of it.
    """
    unlike = _unlike(out, ref)
    if unlike:
        return Comparison(False, None, None, unlike)
    if out.numel() == 0:
        return Comparison(True, 0.0, 0.0)
    if not (ref.is_floating_point() or ref.is_complex()):
        return _compare_exact(out, ref)

    o, r = out.double(), ref.double()
    o_nan, r_nan = o.isnan(), r.isnan()
    r_inf = r.isinf()
    nan_wrong = int((o_nan != r_nan).sum().item())
    inf_wrong = int((r_inf & (o != r)).sum().item() + (o.isinf() & ~r_inf).sum().item())
    finite = torch.isfinite(r) & torch.isfinite(o)
    diff = torch.where(finite, (o - r).abs(), 0.0)
    max_abs = float(diff.max().item())
    atol = tol.atol
    if tol.atol_rms:
        atol += tol.atol_rms * (ref_rms if ref_rms is not None else finite_rms(r))
    allowed = atol + tol.rtol * r.abs()
    over = int((finite & (diff > allowed)).sum().item())
    ref_norm = float(torch.linalg.vector_norm(torch.where(finite, r, 0.0)).item())
    err_norm = float(torch.linalg.vector_norm(diff).item())
    floor = tol.abs_l2 * math.sqrt(r.numel())
    if ref_norm > 0:
        rel, rel_bound = err_norm / ref_norm, max(tol.rel_l2, floor / ref_norm)
    else:
        rel, rel_bound = err_norm, max(tol.atol * math.sqrt(r.numel()), floor)

    reasons = []
    if nan_wrong:
        reasons.append(f"{nan_wrong} NaN values where the reference has none (or the reverse)")
    if inf_wrong:
        reasons.append(f"{inf_wrong} infinite values that differ from the reference")
    if over:
        worst = int(torch.argmax(torch.where(finite, diff - allowed, -math.inf)).item())
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), r.shape))
        reasons.append(
            f"{over} of {r.numel()} values outside atol={atol:g}, rtol={tol.rtol:g} "
            f"(worst at {index}: got {o.reshape(-1)[worst].item():.6g}, "
            f"expected {r.reshape(-1)[worst].item():.6g})"
        )
    if rel > rel_bound:
        reasons.append(f"relative L2 error {rel:.3g} above {rel_bound:.3g}")
    return Comparison(not reasons, max_abs, rel, "; ".join(reasons))


def _unlike(out: object, ref: torch.Tensor) -> str:
    """Why `out` cannot be compared with `ref` value by value (empty: it can)."""
    if type(out) is not torch.Tensor:
        return f"output is {type(out).__name__}, not a torch.Tensor"
    if out.shape != ref.shape:
        return f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        return f"dtype {dtype_name(out.dtype)} != {dtype_name(ref.dtype)}"
    if out.device.type != ref.device.type:
        return f"device {out.device.type} != {ref.device.type}"
    return ""


def _compare_exact(out: torch.Tensor, ref: torch.Tensor) -> Comparison:
    """Integers and booleans: every value equal."""
    mismatches = int((out != ref).sum().item())
    max_abs = float((out.to(torch.int64) - ref.to(torch.int64)).abs().max().item())
    ok = mismatches == 0
    message = "" if ok else f"{mismatches} of {ref.numel()} values differ (exact match needed)"
    return Comparison(ok, max_abs, 0.0 if ok else 1.0, message)


def finite_rms(*tensors: torch.Tensor) -> float:
    """The RMS of the finite values of `tensors`, taken together (0 for none)."""
    squares, count = 0.0, 0
    for values in tensors:
        v = values.double()
        v = v[torch.isfinite(v)]
        squares += float(v.pow(2).sum().item())
        count += v.numel()
    return (squares / count) ** 0.5 if count else 0.0


def fingerprint_matches(
    fp: object, expected: tuple, fp_seed: int, task: TaskSpec, samples: int = FINGERPRINT_SAMPLES
) -> bool:
    """Do the sampled values of a call's outputs match the reference's, within tolerance?

    The layout (every output's shape and dtype), the number of elements and
    the number of outputs holding a NaN or an infinity must be the
    reference's. The values of each dtype are compared as one tensor with
    that dtype's tolerance (elementwise, relative L2, NaN and infinity only
    where the reference has them); integers must be equal.
    """
    if not isinstance(fp, dict):
        return False
    wanted = fingerprint(expected, seed=fp_seed, samples=samples)
    if any(fp.get(key) != wanted[key] for key in ("numel", "layout", "nonfinite_outputs")):
        return False
    got, want = fp.get("values"), wanted["values"]
    if not isinstance(got, list) or len(got) != len(want):
        return False
    by_dtype: dict[torch.dtype, list[int]] = {}
    places = sample_places([e.numel() for e in expected], seed=fp_seed, samples=samples)
    for place, (output, _) in enumerate(places):
        by_dtype.setdefault(expected[output].dtype, []).append(place)
    for dtype, picked in by_dtype.items():
        if not (dtype.is_floating_point or dtype.is_complex):
            if [got[i] for i in picked] != [want[i] for i in picked]:
                return False
            continue
        try:
            values = torch.tensor([got[i] for i in picked], dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            return False
        ref_values = torch.tensor([want[i] for i in picked], dtype=torch.float64)
        tol = task.tolerance_for(dtype_name(dtype))
        same = (e for e in expected if e.dtype == dtype)
        rms = finite_rms(*same) if tol.atol_rms else None
        if not compare_tensor(values, ref_values, tol, ref_rms=rms).ok:
            return False
    return True

"""Judging what the child reported: reference outputs, tolerances, timing checks.

Runs in the orchestrator, never in the submission's process: the reference
outputs are computed here, from the same secret seeds the child used.
"""

from __future__ import annotations

import ast
import json
import math
import re
import secrets
import time
from pathlib import Path

import torch

from taskformat.spec import Mode, TaskSpec, WorkloadSpec

from . import honesty
from .compare import Comparison, compare_tensor, dtype_name
from .fingerprints import AUDIT_SAMPLES, FINGERPRINT_SAMPLES, fingerprint, sample_places
from .job import Plan, PlannedWorkload
from .outputs import read_raw
from .protocol import Observed, flag
from .timing import summarize
from .verdict import Measurement, Status, WorkloadOutcome
from .workload import as_tuple, load_module, make_inputs, make_model

# Every timed and back-to-back call's fingerprint is checked against the
# reference, in a random order, until the reference outputs this needs have
# taken this long for the workload; past it (a slow reference), the calls
# checked are a random sample of at least MIN_CHECKED_CALLS.
TIMED_CHECK_BUDGET_S = 20.0
MIN_CHECKED_CALLS = 64
# The host clock may exceed the device events of a back-to-back batch by launch
# and message overhead; far more than that means work escaped the events.
BATCH_SLACK_RATIO = 1.3
BATCH_SLACK_MS = 15.0
# Pipe and message latency around a batch, and Python launch overhead per call
# (a forward with several launches and allocations; measured on the H200, see
# docs/evaluator.md).
BATCH_MESSAGE_MS = 5.0
LAUNCH_ALLOWANCE_MS = 0.25
# A time under this fraction of the workload's speed-of-light floor is
# impossible. The floor uses the measured ceilings, which sit below the
# datasheet's (H200: 4.3-4.7 of 4.8 TB/s, about 800 of 989 dense bf16 TFLOP/s
# and a similar share of the 1979 fp8 ones), so the margin leaves room for a
# kernel that beats the measured peak honestly.
SOL_FLOOR_MARGIN = 0.75


def host_clock_bound_ms(median_ms: float) -> float:
    """The most time a call may take back to back, for a median of `median_ms`."""
    return 2.0 * median_ms + LAUNCH_ALLOWANCE_MS


AUDIT_FAILURE = (
    "the output of an audit call differs from the reference: its inputs were written on the "
    "caller's stream just before the call, so work that did not wait for that stream (a side "
    "stream started ahead of the call) read stale inputs"
)


class _Reference:
    def __init__(self, task: TaskSpec, mode: Mode):
        path = str(Path(task.directory) / "reference.py")
        self.module = load_module(path, f"d2k_reference_{task.slug}")
        self.device = torch.device("cuda" if mode is Mode.CUDA else "cpu")

        self._models: dict[str, torch.nn.Module] = {}

    def outputs(self, params: dict, seed: int, model_seed: int) -> tuple:
        inputs = make_inputs(self.module, params, seed, self.device)
        key = json.dumps([params, model_seed], sort_keys=True, default=str)
        if key not in self._models:
            self._models[key] = make_model(
                self.module.Model, self.module, params, model_seed, self.device
            )
        with torch.no_grad():
            return as_tuple(self._models[key](*inputs))


def judge(
    task: TaskSpec,
    mode: Mode,
    plan: Plan,
    seen: Observed,
    workdir: Path,
    env_info: dict,
    *,
    source: str = "",
) -> list[WorkloadOutcome]:
    """One result per workload the child reported on, in plan order.

    `plan` is what the parent issued (protocol.Dealer.record); `source` is
    the submission's, whose own kernels are told from a library's by name.
    """
    if not seen.outputs:
        return []
    reference = _Reference(task, mode)
    by_name = {w.name: w for w in task.workloads}
    own = own_kernel_names(source)
    return [
        _judge_workload(task, by_name[entry.name], entry, seen, reference, workdir, env_info, own)
        for entry in plan.workloads
        if seen.outputs.get(entry.name)
    ]


def _judge_workload(
    task, spec, entry: PlannedWorkload, seen, reference, workdir, env_info, own
) -> WorkloadOutcome:
    calls = seen.outputs[spec.name]
    worst_abs = worst_rel = 0.0
    failure = ""
    expected_by_seed: dict[int, tuple] = {}
    for call in calls:
        _judge_ops(task, spec, call.get("ops", []), seen)
        _judge_kernels(spec, call.get("kernels", []), own, seen)
        if call.get("mutated_inputs"):
            seen.flags.append(
                flag(
                    "input_mutation",
                    f"{spec.name}: inputs {call['mutated_inputs']} changed during the call",
                )
            )
        seed = int(call["seed"])
        if seed not in expected_by_seed:
            expected_by_seed[seed] = reference.outputs(spec.params, seed, seed)
        expected = expected_by_seed[seed]
        misplaced = layout_problem(call.get("layouts"), expected, inplace=task.inplace)
        if misplaced:
            failure = failure or misplaced
            continue
        got = _load_outputs(workdir / "out" / str(call["file"]), reference.device)
        comparison = _compare_all(got, expected, task)
        worst_abs = max(worst_abs, comparison.max_abs_err or 0.0)
        worst_rel = max(worst_rel, comparison.rel_err or 0.0)
        if not comparison.ok and not failure:
            again = " (second call on the same inputs)" if str(call["tag"]).endswith("r") else ""
            failure = comparison.message + again
    if failure:
        status = Status.INCORRECT
    elif len(calls) < task.seeds + 1:
        status, failure = Status.RUNTIME_ERROR, "the process ended before every seed was checked"
    else:
        status = Status.CORRECT
        # Glue that made a right answer did the task; a wrong one is judged wrong.
        for call in calls:
            _judge_glue(spec, call.get("kernels", []), own, seen)
    measurement, extra = None, {}
    if status is Status.CORRECT and entry.timed and spec.name in seen.timings:
        measurement, extra, timing_failure = _judge_timing(
            task, spec, entry, seen, reference, own, env_info
        )
        if timing_failure:
            status, failure = Status.INCORRECT, timing_failure
    return WorkloadOutcome(
        name=spec.name,
        role=spec.role,
        hidden=spec.hidden,
        status=status,
        message=failure,
        max_abs_err=worst_abs,
        rel_err=worst_rel,
        measurement=measurement,
        **extra,
    )


def _judge_ops(task: TaskSpec, spec, ops: list[str], seen: Observed) -> None:
    """Flag every aten op the call made that is not glue: by allow-list, not by deny-list.

    An op the task names in `forbidden_ops` computes its very answer
    (`forbidden_op`); any other compute op is torch doing work the kernel was
    to do (`compute_op`). Each is named once per workload.
    """
    used = honesty.disallowed_ops(ops, task.allowed_ops)
    forbidden = sorted(set(used) & set(task.forbidden_ops))
    other = sorted(set(used) - set(task.forbidden_ops))
    found = []
    if forbidden:
        why = "a library op that computes this task's answer"
        found.append(flag("forbidden_op", f"{spec.name}: called {', '.join(forbidden)} ({why})"))
    if other:
        why = "torch compute ops; only allocation, views, copies, fills and casts are allowed"
        found.append(flag("compute_op", f"{spec.name}: called {', '.join(other)} ({why})"))
    seen.flags += [f for f in found if f not in seen.flags]


# Kernels a submission may run without compiling them: copies, fills and
# casts (torch's glue kernels), and the copy and set engines' records.
GLUE_KERNEL = re.compile(
    r"copy|Copy|fill|Fill|zero|Zero|Memcpy|Memset|memcpy|memset|CatArrayBatched|"
    r"cast|Cast|contiguous"
)
# The harness's own kernels (cover.py, and torch.cuda._sleep where the cover
# could not be loaded), which run inside an audit call's window.
HARNESS_KERNELS = ("d2k_cover", "spin_kernel")


def own_kernel_names(source: str) -> set[str]:
    """The kernels the submission declares: its Triton JIT functions and CUDA `__global__`s.

    A Triton kernel runs under its function's name (a function decorated
    with `triton.jit`, possibly under `autotune` or `heuristics`); a
    `load_inline` kernel under its `__global__` function's (demangled, with
    namespaces, template arguments and parameters), declared in a string
    the submission compiles. Only declarations count: a library kernel's
    name in a comment, a docstring or a variable declares nothing. A
    library's kernel (cuBLAS, CuPy, Inductor) is named by the library.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
            "jit" in ast.unparse(decorator) for decorator in node.decorator_list
        ):
            names.add(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            code = _LAUNCH_BOUNDS.sub(" ", _C_COMMENT.sub(" ", node.value))
            names.update(match.group(1) for match in _GLOBAL_KERNEL.finditer(code))
    return names


_C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_GLOBAL_KERNEL = re.compile(r"__global__[^;{(]*?\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def kernel_base_name(kernel: str) -> str:
    """`void ns::name<T>(float*, int)` -> `name`: the kernel's own identifier."""
    text = kernel.strip()
    if text.startswith("void "):
        text = text[5:]
    text = text.split("(", 1)[0]
    depth, head = 0, []
    for char in text:
        depth += char == "<"
        if depth == 0:
            head.append(char)
        depth -= char == ">"
    return "".join(head).rsplit("::", 1)[-1].strip()


def library_kernels(kernels: list[str], own: set[str]) -> list[str]:
    """The kernels that are neither the submission's own nor glue, nor the harness's."""
    return sorted(
        k
        for k in kernels
        if isinstance(k, str)
        and kernel_base_name(k) not in own
        and not GLUE_KERNEL.search(k)
        and not any(name in k for name in HARNESS_KERNELS)
    )


def _judge_glue(spec, kernels: list[str], own: set[str], seen: Observed) -> None:
    """Flag a call of a correct workload whose every kernel was torch's glue (`glue_work`).

    Glue carries a kernel's data; it does not do its task. Judged only where
    the workload's outputs were right: a call that ran no kernel of its own
    and returned a wrong answer (nothing written, a view of an input) is
    `incorrect`, and the harness's own copy of its outputs is glue too.
    """
    kernels = [k for k in kernels or [] if isinstance(k, str)]
    ran = [k for k in kernels if not any(name in k for name in HARNESS_KERNELS)]
    if not ran or any(kernel_base_name(k) in own for k in ran):
        return
    if any(f.get("check") == "glue_work" for f in seen.flags):
        return
    shown = ", ".join(sorted({k[:80] for k in ran})[:4])
    seen.flags.append(
        flag("glue_work", f"{spec.name}: ran no kernel of its own, only torch's glue ({shown})")
    )


def _judge_kernels(spec, kernels: list[str], own: set[str], seen: Observed) -> None:
    kernels = [k for k in kernels or [] if isinstance(k, str)]
    found = library_kernels(kernels, own)
    if not found:
        return
    shown = ", ".join(name[:160] for name in found[:8])
    detail = f"{spec.name}: ran GPU kernels it did not compile: {shown}"
    if not any(f == {"check": "library_kernel", "detail": detail} for f in seen.flags):
        seen.flags.append(flag("library_kernel", detail))


def _load_outputs(path: Path, device: torch.device) -> tuple:
    """The harness's raw copies of a call's outputs (outputs.write_raw); no unpickling."""
    try:
        return read_raw(path, device)
    except (OSError, ValueError) as exc:
        return (f"unreadable output file: {exc}",)


def layout_problem(layouts: object, expected: tuple, *, inplace: bool) -> str:
    """Why a call's outputs do not stand as results (empty: they do).

    Each output has the reference's shape, dtype and strides (a stride of a
    dimension of size one is free), and, unless the task works in place,
    lies in memory of its own: a view of an input is no result.
    """
    if not isinstance(layouts, list) or len(layouts) != len(expected):
        return f"returned {_count(layouts)} outputs, the reference returns {len(expected)}"
    for index, (got, want) in enumerate(zip(layouts, expected, strict=True)):
        prefix = f"output {index}" if len(expected) > 1 else "the output"
        if not isinstance(got, dict):
            return f"{prefix}: no layout reported"
        shape = tuple(want.shape)
        if tuple(got.get("shape", ())) != shape or got.get("dtype") != str(want.dtype):
            return (
                f"{prefix} is {got.get('dtype')} of shape {tuple(got.get('shape', ()))}, "
                f"the reference's {want.dtype} of shape {shape}"
            )
        if _free_strides(shape, got.get("strides")) != _free_strides(shape, want.stride()):
            return (
                f"{prefix} has strides {tuple(got.get('strides') or ())}, the reference's "
                f"{tuple(want.stride())}: return a tensor in the reference's layout"
            )
        if got.get("aliases") and not inplace:
            inputs = ", ".join(str(i) for i in got["aliases"])
            return (
                f"{prefix} shares memory with input {inputs}: a view of an input is not a "
                "result; write the output into memory of its own"
            )
    return ""


def _free_strides(shape: tuple, strides: object) -> tuple:
    """Strides with those of dimensions of size one left out: they address nothing."""
    if not isinstance(strides, list | tuple) or len(strides) != len(shape):
        return ("malformed",)
    return tuple(s if n > 1 else None for n, s in zip(shape, strides, strict=True))


def _count(value: object) -> int:
    return len(value) if isinstance(value, list) else 0


def _compare_all(got: tuple, expected: tuple, task: TaskSpec):

    if len(got) != len(expected):
        return Comparison(
            False, None, None, f"returned {len(got)} outputs, the reference returns {len(expected)}"
        )
    worst = Comparison(True, 0.0, 0.0)
    for index, (g, e) in enumerate(zip(got, expected, strict=True)):
        if not isinstance(g, torch.Tensor):
            return Comparison(False, None, None, f"output {index}: {g}")
        c = compare_tensor(g, e, task.tolerance_for(dtype_name(e.dtype)))
        if not c.ok:
            prefix = f"output {index}: " if len(expected) > 1 else ""
            return Comparison(False, c.max_abs_err, c.rel_err, prefix + c.message)
        worst = Comparison(
            True,
            max(worst.max_abs_err or 0, c.max_abs_err or 0),
            max(worst.rel_err or 0, c.rel_err or 0),
        )
    return worst


def _times(msg: dict, key: str) -> list[float] | None:
    """The non-empty list of times (ms) under `key`: None unless finite numbers."""
    values = msg.get(key)
    if not isinstance(values, list) or not values:
        return None
    try:
        times = [float(v) for v in values]
    except (TypeError, ValueError):
        return None
    return times if all(math.isfinite(t) for t in times) else None


def _malformed_extras(
    msg: dict, batch: dict | None, outputs: list | None, entry: PlannedWorkload
) -> list[str]:
    """The parts of a workload's report, besides its times, the judge cannot read.

    Every sampled call names a seed the parent issued for a timed call, once,
    and a sample seed it issued; the audit calls are the parent's: one report
    each, with the issued seeds in order.
    """
    audits = list(entry.audits)

    def number(value: object) -> bool:
        return isinstance(value, int | float) and math.isfinite(value) and value >= 0

    issued_samples = set(entry.samples)

    def samples(value: object) -> bool:
        return isinstance(value, list) and all(
            isinstance(item, dict)
            and isinstance(item.get("seed"), int)
            and item.get("sample_seed") in issued_samples
            and "fp" in item
            for item in value
        )

    def per_side(value: object) -> bool:
        return isinstance(value, dict) and all(number(value.get(who)) for who in ("sub", "ref"))

    bad = [key for key in ("prints", "batch_prints") if not samples(msg.get(key, []))]
    if not bad:
        # Each sampled call's seed is one the parent issued for a timed call, once.
        called = [item["seed"] for key in ("prints", "batch_prints") for item in msg.get(key, [])]
        if len(set(called)) != len(called) or not set(called) <= set(entry.calls):
            bad.append("seeds")
    audited = msg.get("audit_prints", [])
    if not samples(audited) or [a["seed"] for a in audited] != audits:
        bad.append("audit_prints")
    bad += [key for key in ("cover_us", "host_bound") if key in msg and not per_side(msg[key])]
    if batch is not None:
        calls = batch.get("calls")
        if not (isinstance(calls, int) and calls >= 1 and number(batch.get("event_ms"))):
            bad.append("batch")
    if outputs and not number(outputs[0].get("host_ms", 0.0)):
        bad.append("host_ms")
    return bad


def _covers(msg: dict) -> dict:
    """The Measurement fields of the report's launch covers and host-bound calls (checked)."""
    out: dict = {}
    if covers := msg.get("cover_us"):
        out |= {"cover_us": float(covers["sub"]), "ref_cover_us": float(covers["ref"])}
    if bound := msg.get("host_bound"):
        out |= {"host_bound_calls": int(bound["sub"]), "ref_host_bound_calls": int(bound["ref"])}
    return out


def _timed_calls_match(task, spec, entry: PlannedWorkload, msg: dict, reference) -> bool:
    """Every timed and back-to-back call's fingerprint against the reference, in random order.

    The child cannot tell which calls are checked: all of them are, unless
    the reference is so slow that TIMED_CHECK_BUDGET_S runs out first, and
    then the ones checked are a random sample of at least MIN_CHECKED_CALLS.
    """
    calls = list(msg.get("prints", [])) + list(msg.get("batch_prints", []))
    secrets.SystemRandom().shuffle(calls)
    started = time.monotonic()
    for checked, item in enumerate(calls):
        over = time.monotonic() - started > TIMED_CHECK_BUDGET_S
        if over and checked >= MIN_CHECKED_CALLS:
            break
        expected = reference.outputs(spec.params, int(item["seed"]), entry.model_seed)
        if not _fingerprint_matches(item["fp"], expected, int(item["sample_seed"]), task):
            return False
    return True


def _judge_timing(task, spec, entry: PlannedWorkload, seen, reference, own, env_info):
    msg = seen.timings[spec.name]
    sub_ms, ref_ms = _times(msg, "sub_ms"), _times(msg, "ref_ms")
    malformed = [key for key, value in (("ref_ms", ref_ms), ("sub_ms", sub_ms)) if value is None]
    malformed += _malformed_extras(
        msg, seen.batches.get(spec.name), seen.outputs.get(spec.name), entry
    )
    if malformed or sub_ms is None or ref_ms is None:
        seen.flags.append(
            flag("result_channel", f"{spec.name}: malformed timing report ({', '.join(malformed)})")
        )
        return None, {}, "the child's timing report for this workload is malformed"
    med, iqr, low = summarize(sub_ms)
    ref_med, ref_iqr, _ = summarize(ref_ms)
    batch = seen.batches.get(spec.name)
    measurement = Measurement(
        median_ms=med,
        iqr_ms=iqr,
        min_ms=low,
        calls=len(sub_ms),
        ref_median_ms=ref_med,
        ref_iqr_ms=ref_iqr,
        ref_calls=len(ref_ms),
        cold_start_ms=_cold_start_ms(seen, spec.name),
        sub_deciles=tuple(_deciles(sub_ms)),
        ref_deciles=tuple(_deciles(ref_ms)),
        back_to_back_ms=float(batch["event_ms"]) / int(batch["calls"]) if batch else None,
        **_covers(msg),
    )
    # The ops of every other call of the workload's: timed, back-to-back, warm-up.
    _judge_ops(task, spec, [op for op in msg.get("ops", []) if isinstance(op, str)], seen)
    if not _timed_calls_match(task, spec, entry, msg, reference):
        return (
            measurement,
            {},
            (
                "the output of a timed call differs from the reference (outputs must be "
                "computed on every call from that call's inputs)"
            ),
        )
    # Every audit call is checked: one wrong answer is the finding.
    for item in msg.get("audit_prints", []):
        _judge_ops(task, spec, list(item.get("ops", [])), seen)
        _judge_kernels(spec, list(item.get("kernels", [])), own, seen)
        expected = reference.outputs(spec.params, int(item["seed"]), entry.model_seed)
        sample_seed = int(item["sample_seed"])
        if not _fingerprint_matches(item["fp"], expected, sample_seed, task, AUDIT_SAMPLES):
            return measurement, {}, AUDIT_FAILURE
    for item in msg.get("audit_prints", []):
        _judge_glue(spec, list(item.get("kernels", [])), own, seen)
    if batch:
        host, device = float(batch["host_ms"]), float(batch["event_ms"])
        if host > device * BATCH_SLACK_RATIO + BATCH_SLACK_MS:
            seen.flags.append(
                flag(
                    "escaped_work",
                    (
                        f"{spec.name}: {batch['calls']} back-to-back calls took {host:.2f} ms "
                        f"by the "
                        f"host clock but {device:.2f} ms by CUDA events"
                    ),
                )
            )
        expected_batch = med * float(batch["calls"])
        # Two-sided, anchored on the parent's clock, which the child cannot
        # touch: per call, the host saw far more time than the reported median
        # (beyond launch overhead). Either the reported times were shrunk, or
        # the calls are host-bound: the launch cover hides the host's queueing
        # from the events, not from a back-to-back batch (fused_adamw's expert
        # builds its pointer tables on the host: 0.44 ms a call on the H200,
        # for 0.07 ms of kernels). Which one, ncu's kernel durations say
        # (orchestrate.settle_host_clock).
        host_per_call = max(host - BATCH_MESSAGE_MS, 0.0) / float(batch["calls"])
        if host_per_call > host_clock_bound_ms(med):
            seen.host_clock.append(
                {"workload": spec.name, "host_ms_per_call": host_per_call, "median_ms": med}
            )
        if device < 0.5 * expected_batch:
            seen.flags.append(
                flag(
                    "timing_inconsistent",
                    (
                        f"{spec.name}: a batch of {batch['calls']} calls took {device:.3f} ms, "
                        f"under half of {batch['calls']} x the median call ({med:.4f} ms)"
                    ),
                )
            )
    extra: dict[str, float] = {}
    ceilings = env_info.get("ceilings")
    if ceilings and med > 0:
        seconds = med * 1e-3
        compute_s, memory_s = speed_of_light_terms(spec, ceilings)
        floor_s = max(compute_s or 0.0, memory_s)
        extra = {
            "achieved_tflops": spec.flops / seconds / 1e12,
            "achieved_tbps": spec.bytes / seconds / 1e12,
        }
        if compute_s is not None or not spec.flops:
            extra["sol_fraction"] = floor_s / seconds
        if seconds < SOL_FLOOR_MARGIN * floor_s:
            seen.flags.append(
                flag(
                    "faster_than_light",
                    (
                        f"{spec.name}: median {med * 1e3:.2f} us is below the speed-of-light floor "
                        f"{floor_s * 1e6:.2f} us"
                    ),
                )
            )
    return measurement, extra, ""


def speed_of_light_terms(spec: WorkloadSpec, ceilings: dict) -> tuple[float | None, float]:
    """Seconds of the workload's FLOPs and of its bytes at this GPU's measured ceilings.

    The FLOPs run at the matrix rate of the unit that does the work
    (`peak_tflops_<compute_dtype>`: an fp8 GEMM at the fp8 rate, not the bf16
    one); the longer term is its speed-of-light time. The compute term is None
    where that unit's rate was not measured (no fp8 matrix instructions on this
    GPU): the bytes term alone is then a lower bound, not a speed of light.
    """
    memory_s = spec.bytes / (float(ceilings["peak_tbps"]) * 1e12)
    if not spec.flops:
        return 0.0, memory_s
    tflops = ceilings.get(f"peak_tflops_{spec.compute_dtype}")
    if not isinstance(tflops, int | float) or tflops <= 0:
        return None, memory_s
    return spec.flops / (float(tflops) * 1e12), memory_s


def _cold_start_ms(seen: Observed, name: str) -> float:
    """Host time of the workload's first call: compilation, autotuning, first launch."""
    calls = seen.outputs.get(name, [])
    return float(calls[0].get("host_ms", 0.0)) if calls else 0.0


def _deciles(times: list[float]) -> list[float]:
    ordered = sorted(times)
    return [ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1) / 10))] for q in range(11)]


def wrong_profiled_calls(
    task: TaskSpec, plan: Plan, profiled: dict[str, dict], mode: Mode = Mode.CUDA
) -> list[str]:
    """The workloads whose profiled call (counters.py) did not compute the reference's answer.

    Each call's seed and sample seed must be those the parent issued for it,
    and its sampled outputs the reference's for that seed (computed on the
    GPU, or on the CPU in interpret `mode`).
    """
    reference = _Reference(task, mode)
    wrong = []
    for entry in plan.workloads:
        msg = profiled.get(entry.name, {})
        seed, sample_seed = msg.get("seed"), msg.get("sample_seed")
        if seed not in entry.calls or sample_seed not in entry.samples:
            wrong.append(entry.name)
            continue
        expected = reference.outputs(entry.params, int(seed), entry.model_seed)
        if not _fingerprint_matches(msg.get("fp"), expected, int(sample_seed), task):
            wrong.append(entry.name)
    return wrong


def _fingerprint_matches(
    fp: object, expected: tuple, fp_seed: int, task, samples: int = FINGERPRINT_SAMPLES
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
        if not compare_tensor(values, ref_values, task.tolerance_for(dtype_name(dtype))).ok:
            return False
    return True

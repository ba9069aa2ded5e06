"""The trusted side of an evaluation: seeds, sandboxed child, reference, verdict.

    evaluate(task=..., source=..., mode=...) -> Verdict

The orchestrator never imports the submission. It draws secret seeds, starts
the sandboxed child (evaluator.harness.child), waits for it under the
sandbox's limits, then computes the reference outputs itself (a different
process from the submission's) and judges everything the child reported.
"""

from __future__ import annotations

import importlib.util
import math
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import environment, sandbox
from .compare import compare_tensor, dtype_name, fingerprint_bound
from .spec import (
    Measurement,
    Mode,
    Status,
    TaskSpec,
    Verdict,
    WorkloadResult,
    WorkloadSpec,
)
from .timing import fingerprint, fingerprint_weights, summarize

LOG_LIMIT = 32_000
TIMING = {
    "warmup_calls": 3,
    "min_calls": 20,
    "max_calls": 400,
    "budget_s": 2.0,
    "target_rel_iqr": 0.01,
    "batch_ms": 60.0,
}
# Timed calls whose outputs are re-checked against the reference, chosen
# after the fact so the child cannot know which ones count.
SAMPLED_TIMED_CALLS = 6
SAMPLED_BATCH_CALLS = 2
# The host clock may exceed the device events of a back-to-back batch by launch
# and message overhead; far more than that means work escaped the events.
BATCH_SLACK_RATIO = 1.3
BATCH_SLACK_MS = 15.0
# A time under this fraction of the workload's speed-of-light floor is impossible.
SOL_FLOOR_MARGIN = 0.85


@dataclass
class _Observed:
    outputs: dict[str, list[dict]] = field(default_factory=dict)
    timings: dict[str, dict] = field(default_factory=dict)
    batches: dict[str, dict] = field(default_factory=dict)
    error: dict | None = None
    flags: list[dict[str, str]] = field(default_factory=list)
    done: bool = False
    ready: bool = False
    started: bool = False


def evaluate(
    *,
    task: TaskSpec,
    source: str,
    mode: Mode,
    timeout_s: float = 600.0,
    memory_bytes: int = 32 * 1024**3,
    keep_workdir: bool = False,
) -> Verdict:
    started = time.monotonic()
    env_info = environment.describe(mode)
    try:
        compile(source, "submission.py", "exec")
    except SyntaxError as exc:
        return _verdict(
            task,
            mode,
            Status.COMPILE_ERROR,
            f"SyntaxError at line {exc.lineno}: {exc.msg}",
            [],
            [],
            env_info,
            "",
            started,
        )
    workloads = task.workloads_for(mode)
    if mode is Mode.CUDA:
        env_info["ceilings"] = environment.ceilings()

    workdir = Path(tempfile.mkdtemp(prefix="d2k-eval-"))
    workdir.chmod(0o777)  # the sandboxed uid writes its outputs here
    try:
        plan = _plan(task, workloads, mode)
        run, observed = _run_child(task, source, mode, plan, workdir, timeout_s, memory_bytes)
        env_info["isolation"] = run.isolation
        env_info["peak_rss_mib"] = round(run.peak_rss_bytes / 2**20, 1)
        if mode is Mode.CUDA:
            env_info["gpu_state_after"] = environment.gpu_state()
        log = _read_log(workdir / "child.log")
        status, message = _crash_status(run, observed)
        results = _judge(task, mode, plan, observed, workdir, env_info)
    finally:
        if not keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    flags = observed.flags
    if status is None:
        if flags:
            status = Status.FLAGGED
            message = "honesty check fired: " + "; ".join(f["check"] for f in flags)
        elif any(r.status is Status.INCORRECT for r in results):
            bad = [r.name for r in results if r.status is Status.INCORRECT]
            status = Status.INCORRECT
            message = f"incorrect on {', '.join(bad)}: " + next(
                r.message for r in results if r.status is Status.INCORRECT
            )
        elif observed.done and len(results) == len(workloads):
            status, message = Status.CORRECT, f"correct on all {len(results)} workloads"
        else:
            status = Status.WORKER_ERROR
            message = "the evaluation ended without a result for every workload"
    return _verdict(task, mode, status, message, flags, results, env_info, log, started)


def _plan(task: TaskSpec, workloads: tuple[WorkloadSpec, ...], mode: Mode) -> dict[str, Any]:
    def seed() -> int:
        return secrets.randbits(62)

    return {
        "fingerprint_seed": seed(),
        "workloads": [
            {
                "name": w.name,
                "params": w.params,
                "seeds": [seed() for _ in range(task.seeds)],
                "timed": mode is Mode.CUDA and w.role == "timed",
                "timing_seed": seed(),
                "ref_timing_seed": seed(),
            }
            for w in workloads
        ],
    }


def _run_child(task, source, mode, plan, workdir, timeout_s, memory_bytes):
    import json

    (workdir / "submission.py").write_text(source)
    job = {
        "mode": str(mode),
        "reference": f"{sandbox.SANDBOX_TASK}/reference.py",
        "submission": f"{sandbox.SANDBOX_WORK}/submission.py",
        "out_dir": f"{sandbox.SANDBOX_WORK}/out",
        "inplace": task.inplace,
        "timing": TIMING,
        **plan,
    }
    (workdir / "job.json").write_text(json.dumps(job))
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": sandbox.SANDBOX_WORK,
        "TMPDIR": sandbox.SANDBOX_WORK,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "TRITON_CACHE_DIR": f"{sandbox.SANDBOX_WORK}/.triton",
        "TORCH_EXTENSIONS_DIR": f"{sandbox.SANDBOX_WORK}/.torch_extensions",
        "OMP_NUM_THREADS": "1",
    }
    if mode is Mode.INTERPRET:
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    import os

    for key in ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "TRITON_PTXAS_PATH"):
        if key in os.environ and key not in env:
            env[key] = os.environ[key]
    bootstrap = "import evaluator.harness.child as c; c.main()"
    run = sandbox.run_child(
        python_args=["-s", "-c", bootstrap, f"{sandbox.SANDBOX_WORK}/job.json", "{fd}"],
        workdir=workdir,
        task_dir=Path(task.directory).resolve(),
        env=env,
        limits=sandbox.Limits(timeout_s=timeout_s, memory_bytes=memory_bytes),
        log_path=workdir / "child.log",
        gpu=mode is Mode.CUDA,
    )
    return run, _collect(run)


def _collect(run: sandbox.ChildRun) -> _Observed:
    seen = _Observed()
    batch_begin: float | None = None
    pending_batch: dict | None = None
    for stamp, msg in run.messages:
        event = msg.get("event")
        if event == "hello":
            seen.started = True
        elif event == "ready":
            seen.ready = True
        elif event == "output":
            seen.outputs.setdefault(str(msg.get("workload")), []).append(msg)
        elif event == "timing":
            seen.timings[str(msg.get("workload"))] = msg
            if pending_batch is not None:
                seen.batches[str(msg.get("workload"))] = pending_batch
                pending_batch = None
        elif event == "batch_begin":
            batch_begin = stamp
        elif event == "batch_end" and batch_begin is not None:
            pending_batch = {**msg, "host_ms": (stamp - batch_begin) * 1e3}
            batch_begin = None
        elif event == "error" and seen.error is None:
            seen.error = msg
        elif event == "bad_output":
            seen.flags.append({"check": "output_type", "detail": str(msg.get("message"))})
        elif event == "patched":
            names = ", ".join(map(str, msg.get("names", [])))
            seen.flags.append(
                {"check": "monkeypatch", "detail": f"changed during {msg.get('phase')}: {names}"}
            )
        elif event == "threads":
            seen.flags.append(
                {
                    "check": "background_thread",
                    "detail": f"{msg.get('count')} "
                    f"Python thread(s) left running after {msg.get('phase')}",
                }
            )
        elif event == "done":
            seen.done = True
    if run.bad_messages:
        seen.flags.append(
            {
                "check": "result_channel",
                "detail": f"{run.bad_messages} malformed message(s) on the result pipe",
            }
        )
    return seen


def _crash_status(run: sandbox.ChildRun, seen: _Observed) -> tuple[Status | None, str]:
    if run.killed_for == "timeout":
        return Status.TIMEOUT, f"killed after the {run.wall_seconds:.0f} s time limit"
    if run.killed_for == "memory":
        return Status.OUT_OF_MEMORY, (
            f"killed for using {run.peak_rss_bytes / 2**30:.1f} GiB of host memory"
        )
    if run.killed_for == "processes":
        return Status.RUNTIME_ERROR, "killed for starting too many processes"
    if not seen.started:
        return Status.WORKER_ERROR, (
            f"the sandbox did not start (exit code {run.returncode}); see the log"
        )
    if seen.error is not None:
        kind = str(seen.error.get("kind", "runtime_error"))
        where = seen.error.get("workload")
        text = str(seen.error.get("message", ""))
        status = Status(kind) if kind in Status.__members__.values() else Status.RUNTIME_ERROR
        return status, f"{text} (workload {where})" if where else text
    if not seen.done:
        code = run.returncode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return Status.RUNTIME_ERROR, f"the submission's process ended early ({how})"
    return None, ""


def _load_reference(task: TaskSpec):
    spec = importlib.util.spec_from_file_location(
        f"d2k_reference_{task.slug}", Path(task.directory) / "reference.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, tuple | list) else (value,)


class _Reference:
    def __init__(self, task: TaskSpec, mode: Mode):
        self.module = _load_reference(task)
        self.device = torch.device("cuda" if mode is Mode.CUDA else "cpu")

    def outputs(self, params: dict, seed: int, model_seed: int) -> tuple:
        torch.manual_seed(seed)
        with torch.device(self.device):
            inputs = list(self.module.get_inputs(**params))
            init = list(self.module.get_init_inputs(**params))
        torch.manual_seed(model_seed)
        with torch.device(self.device), torch.no_grad():
            model = self.module.Model(*init)
            return _as_tuple(model(*inputs))


def _judge(task, mode, plan, seen: _Observed, workdir: Path, env_info) -> list[WorkloadResult]:
    if not seen.outputs and not seen.timings:
        return []
    reference = _Reference(task, mode)
    forbidden = set(task.forbidden_ops)
    by_name = {w.name: w for w in task.workloads}
    results = []
    for entry in plan["workloads"]:
        spec = by_name[entry["name"]]
        calls = seen.outputs.get(spec.name, [])
        if not calls:
            continue
        worst = (0.0, 0.0)
        failure = ""
        expected_by_seed: dict[int, tuple] = {}
        for call in calls:
            used = forbidden.intersection(call.get("ops", []))
            if used:
                seen.flags.append(
                    {
                        "check": "forbidden_op",
                        "detail": f"{spec.name}: called {', '.join(sorted(used))}",
                    }
                )
            if call.get("mutated_inputs"):
                seen.flags.append(
                    {
                        "check": "input_mutation",
                        "detail": f"{spec.name}: inputs "
                        f"{call['mutated_inputs']} changed during the call",
                    }
                )
            seed = int(call["seed"])
            if seed not in expected_by_seed:
                expected_by_seed[seed] = reference.outputs(spec.params, seed, seed)
            expected = expected_by_seed[seed]
            got = _load_outputs(workdir / "out" / str(call["file"]), reference.device)
            comparison = _compare_all(got, expected, task)
            worst = (
                max(worst[0], comparison.max_abs_err or 0.0),
                max(worst[1], comparison.rel_err or 0.0),
            )
            if not comparison.ok and not failure:
                repeat = " (second call on the same inputs)" if call["tag"].endswith("r") else ""
                failure = f"{comparison.message}{repeat}"
        expected_calls = task.seeds + 1
        status = (
            Status.CORRECT
            if not failure and len(calls) == expected_calls
            else (Status.INCORRECT if failure else Status.RUNTIME_ERROR)
        )
        measurement, extra = None, {}
        if status is Status.CORRECT and entry["timed"] and spec.name in seen.timings:
            measurement, extra, timing_failure = _judge_timing(
                task, spec, entry, seen, reference, plan["fingerprint_seed"], env_info
            )
            if timing_failure:
                status, failure = Status.INCORRECT, timing_failure
        results.append(
            WorkloadResult(
                name=spec.name,
                role=spec.role,
                hidden=spec.hidden,
                status=status,
                message=failure,
                max_abs_err=worst[0],
                rel_err=worst[1],
                measurement=measurement,
                **extra,
            )
        )
    return results


def _load_outputs(path: Path, device: torch.device) -> tuple:
    try:
        # weights_only: the file came from untrusted code and must not unpickle objects.
        loaded = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:
        return (f"unreadable output file: {type(exc).__name__}",)
    return _as_tuple(loaded)


def _compare_all(got: tuple, expected: tuple, task: TaskSpec):
    from .compare import Comparison

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


def _judge_timing(task, spec, entry, seen, reference, fp_seed, env_info):
    msg = seen.timings[spec.name]
    sub_ms, ref_ms = list(map(float, msg["sub_ms"])), list(map(float, msg["ref_ms"]))
    med, iqr, low = summarize(sub_ms)
    ref_med, ref_iqr, _ = summarize(ref_ms)
    measurement = Measurement(
        median_ms=med,
        iqr_ms=iqr,
        min_ms=low,
        calls=len(sub_ms),
        ref_median_ms=ref_med,
        ref_iqr_ms=ref_iqr,
        ref_calls=len(ref_ms),
        cold_start_ms=float(msg.get("cold_ms", 0.0)),
    )
    # Re-check outputs of timed calls picked now, at random.
    rng = secrets.SystemRandom()
    prints = list(msg.get("prints", []))
    batch_prints = list(msg.get("batch_prints", []))
    sample = rng.sample(prints, min(SAMPLED_TIMED_CALLS, len(prints)))
    sample += rng.sample(batch_prints, min(SAMPLED_BATCH_CALLS, len(batch_prints)))
    for item in sample:
        expected = reference.outputs(spec.params, int(item["seed"]), entry["seeds"][0])
        if not _fingerprint_matches(item["fp"], expected, fp_seed, task):
            return (
                measurement,
                {},
                (
                    "the output of a timed call differs from the reference (outputs must be "
                    "computed on every call from that call's inputs)"
                ),
            )
    batch = seen.batches.get(spec.name)
    if batch:
        host, device = float(batch["host_ms"]), float(batch["event_ms"])
        if host > device * BATCH_SLACK_RATIO + BATCH_SLACK_MS:
            seen.flags.append(
                {
                    "check": "escaped_work",
                    "detail": (
                        f"{spec.name}: {batch['calls']} back-to-back calls took {host:.2f} ms "
                        f"by the "
                        f"host clock but {device:.2f} ms by CUDA events"
                    ),
                }
            )
        expected_batch = med * float(batch["calls"])
        if device < 0.5 * expected_batch:
            seen.flags.append(
                {
                    "check": "timing_inconsistent",
                    "detail": (
                        f"{spec.name}: a batch of {batch['calls']} calls took {device:.3f} ms, "
                        f"under half of {batch['calls']} x the median call ({med:.4f} ms)"
                    ),
                }
            )
    extra = {}
    ceilings = env_info.get("ceilings")
    if ceilings and med > 0:
        seconds = med * 1e-3
        tflops = spec.flops / seconds / 1e12
        tbps = spec.bytes / seconds / 1e12
        floor_s = max(
            spec.flops / (ceilings["peak_tflops_bf16"] * 1e12),
            spec.bytes / (ceilings["peak_tbps"] * 1e12),
        )
        extra = {
            "achieved_tflops": tflops,
            "achieved_tbps": tbps,
            "sol_fraction": floor_s / seconds,
        }
        if seconds < SOL_FLOOR_MARGIN * floor_s:
            seen.flags.append(
                {
                    "check": "faster_than_light",
                    "detail": (
                        f"{spec.name}: median {med * 1e3:.2f} us is below the speed-of-light floor "
                        f"{floor_s * 1e6:.2f} us"
                    ),
                }
            )
    return measurement, extra, ""


def _fingerprint_matches(prints: list[dict], expected: tuple, fp_seed: int, task) -> bool:
    if len(prints) != len(expected):
        return False
    want = fingerprint(expected, seed=fp_seed)
    for index, (got, ref, ref_print) in enumerate(zip(prints, expected, want, strict=True)):
        if int(got.get("nonfinite", -1)) != ref_print["nonfinite"]:
            return False
        flat = ref.reshape(-1)
        integer = not (flat.is_floating_point() or flat.is_complex())
        if integer:
            if int(got.get("sum", 0)) != ref_print["sum"]:
                return False
            continue
        w = fingerprint_weights(
            flat.numel(), seed=fp_seed + index, device=flat.device, integer=False
        )
        bound = fingerprint_bound(ref, w, task.tolerance_for(dtype_name(ref.dtype)))
        if not math.isfinite(float(got.get("sum", math.nan))):
            return False
        if abs(float(got["sum"]) - ref_print["sum"]) > bound:
            return False
    return True


def _read_log(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data.decode(errors="replace")
    if len(text) <= LOG_LIMIT:
        return text
    half = LOG_LIMIT // 2
    return f"{text[:half]}\n… [{len(text) - LOG_LIMIT} characters cut] …\n{text[-half:]}"


def _verdict(task, mode, status, message, flags, results, env_info, log, started) -> Verdict:
    return Verdict(
        status=status,
        message=message,
        flags=tuple(flags),
        workloads=tuple(results),
        environment=env_info,
        log=log,
        task=task.slug,
        mode=str(mode),
        wall_seconds=round(time.monotonic() - started, 3),
    )


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else 0.0


__all__ = ["evaluate", "geomean"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m evaluator check")

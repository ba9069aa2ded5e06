"""The sandboxed child: imports the submission, runs it, reports raw observations.

Run as `python -c "from evaluator.harness.child import main; main()" JOB FD`.
It never sees reference *outputs* and never decides a verdict: it sends what
it observed (output files, op names, times, fingerprints) as JSON lines on
the result descriptor FD, and the parent judges. Its own stdout and stderr
are the submission's log.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Everything the checks rely on is imported, and snapshotted, before the
# submission is: see PatchGuard.
import torch
import torch._dynamo

from evaluator.harness import fingerprints, honesty, outputs, timing
from evaluator.harness.job import Job, TimingSettings
from evaluator.harness.workload import load_module, make_inputs, make_model

_perf_counter = time.perf_counter


class Channel:
    """Messages to the parent on `fd`; its answers to requests (`ask`) on `reply_fd`."""

    def __init__(self, fd: int, reply_fd: int | None = None):
        self._fd = fd
        self._replies = os.fdopen(reply_fd, "rb") if reply_fd is not None else None

    def ask(self, what: str, **fields: Any) -> dict:
        """A request the parent answers at once: the next step, a call's seed, an audit."""
        if self._replies is None:
            raise RuntimeError("the child has no reply channel")
        self.send("ask", what=what, **fields)
        reply = json.loads(self._replies.readline() or b"{}")
        if not isinstance(reply, dict) or "error" in reply or not reply:
            raise RuntimeError(f"the parent refused the request {what!r}: {reply!r}")
        return reply

    def seed(self, workload: str, purpose: str) -> int:
        return int(self.ask("seed", workload=workload, purpose=purpose)["seed"])

    def send(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields}, default=str) + "\n"
        data = line.encode()
        while data:
            written = os.write(self._fd, data)
            data = data[written:]


# What a worker without the toolchain for torch.utils.cpp_extension says:
# our fault (worker_error), not the submission's.
MISSING_TOOLCHAIN = (
    "Ninja is required to load C++ extensions",
    "CUDA_HOME environment variable is not set",
    "c++: not found",
    "g++: not found",
    "nvcc: not found",
    "x86_64-linux-gnu-g++: not found",
    "No CUDA runtime is found",
)


def classify(exc: BaseException) -> str:
    """Map an exception from the submission to a verdict status."""
    if isinstance(exc, SyntaxError):
        return "compile_error"
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return "out_of_memory"
    text = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    if any(sign in text for sign in MISSING_TOOLCHAIN):
        return "worker_error"
    if "CompilationError" in text or "Error building extension" in text:
        return "compile_error"
    if "out of memory" in text.lower():
        return "out_of_memory"
    return "runtime_error"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"SyntaxError at line {exc.lineno}: {exc.msg}"
    text = str(exc)
    if "Error building extension" in text:
        return build_error(text)
    summary = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return summary[:2000]


def build_error(text: str, lines: int = 8) -> str:
    """A failed load_inline build as its author needs it: the compiler's first error lines.

    torch's message starts with the ninja build's command lines, which name
    every include folder; the errors come after them.
    """
    head = text.splitlines()[0] if text else ""
    errors = [line.strip() for line in text.splitlines() if "error" in line.lower()]
    skip = ("FAILED:", "ninja: build stopped", "Error building extension")
    errors = [line for line in errors if not line.startswith(skip)]
    body = "\n".join(errors[:lines]) or text[-1500:]
    return f"{head.split(':', 1)[0]}:\n{body}"[:2000]


class Tampered(Exception):
    """A guarded namespace changed around a call: its result is not read (flag `monkeypatch`)."""

    def __init__(self, names: list[str]):
        super().__init__(", ".join(names))
        self.names = names


@dataclass(frozen=True)
class Call:
    """One call of the submission's: its events (timed calls), what the harness copied, host µs."""

    events: tuple
    taken: outputs.Taken
    host_us: float


class Child:
    def __init__(self, job: Job, channel: Channel):
        self.job = job
        self.chan = channel
        self.mode = job.mode
        self.device = torch.device(job.device or ("cuda" if self.mode == "cuda" else "cpu"))
        self.out_dir = Path(job.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.ref = load_module(job.reference, "d2k_reference")
        # What the submission is timed against: the task's baseline.py where it
        # has one (inputs still come from reference.py), else the reference.
        self.base = load_module(job.baseline, "d2k_baseline") if job.baseline else self.ref
        # A clean run times the baseline alone, in a process that never
        # imports the submission (orchestrate: reference_tampering).
        self.clean = job.clean
        # A profiling pass (counters.py) makes one untimed call of each timed
        # workload, under ncu, and no other.
        self.profile = job.profile
        self._model_seeds: dict[str, int] = {}
        honesty.settle_torch()
        self.guard = honesty.PatchGuard()
        # The aten ops of every call not made under a recorder (timed, batch,
        # warm-up, profiled), reported with each workload's timing.
        self.op_log = honesty.DispatchRecorder()
        self.threads = honesty.live_python_threads()
        self.sub: Any = None
        self.l2_reported = False
        self.escape_reported = False
        self._previous_inputs: dict[str, list] = {}

    # -- helpers ------------------------------------------------------------
    def inputs(self, params: dict, seed: int) -> list:
        return make_inputs(self.ref, params, seed, self.device)

    def construct(self, cls: type, params: dict, seed: int) -> torch.nn.Module:
        return make_model(cls, self.ref, params, seed, self.device)

    def sync(self) -> None:
        if self.device.type == "cuda":
            timing.synchronize()

    def check_patches(self, phase: str) -> None:
        changed = self.guard.changed()
        if changed:
            self.chan.send("patched", phase=phase, names=changed)
        new_threads = honesty.live_python_threads() - self.threads
        if new_threads:
            self.chan.send("threads", phase=phase, count=len(new_threads))

    # -- phases -------------------------------------------------------------
    def load_submission(self) -> bool:
        try:
            self.sub = load_module(self.job.submission, "submission")
        except BaseException as exc:
            self.chan.send("error", kind=classify(exc), phase="import", message=_describe(exc))
            traceback.print_exc()
            return False
        if not isinstance(getattr(self.sub, "ModelNew", None), type):
            self.chan.send(
                "error",
                kind="compile_error",
                phase="import",
                message="the file defines no class ModelNew(nn.Module)",
            )
            return False
        self.chan.send("ready")
        self.check_patches("import")
        return True

    def correctness(self, workload: dict) -> bool:
        name, params = workload["name"], workload["params"]
        for index in range(self.job.seeds):
            # Each seed is asked for as its call is made: none exists before.
            seed = self.chan.seed(name, "check")
            self._model_seeds.setdefault(name, seed)
            # The first seed is run twice, with the allocator poisoned between
            # the calls: undefined behaviour rarely gives the same answer twice.
            repeats = 2 if index == 0 else 1
            for repeat in range(repeats):
                tag = f"{index}" if repeat == 0 else f"{index}r"
                if not self._one_call(workload, name, params, seed, tag):
                    return False
        return True

    def _invoke(self, model, inputs, *, flusher=None, staged=(), recorder=None) -> Call:
        """Every call of the submission's, checked, timed, audited or warming up, is made here.

        One code path, with the same frames whatever the call is for, and no
        seed or phase in them: what differs (a recorder, a flush and cover
        with events) is decided by the caller. The guarded namespaces are
        checked before the call and after it, and what the call returned is
        copied by the harness's own means (outputs.take) before anything
        else of the harness runs: what is read later is those copies.
        """
        self._refuse_if_patched()
        spans = outputs.input_spans(inputs)
        # Every call runs under a dispatch mode of the same kind: the checked
        # calls' recorder, else the log of every op the other calls make.
        mode = recorder.dispatch_mode if recorder is not None else self.op_log

        def take(result: object) -> outputs.Taken:
            return outputs.take(result, spans, (mode,))

        queued = _perf_counter()
        taken: object
        with recorder if recorder is not None else self.op_log:
            if flusher is None:
                events, taken = (), take(model(*inputs))
            else:
                events, taken = timing.timed_call(model, inputs, flusher, staged=staged, take=take)
        host_us = (_perf_counter() - queued) * 1e6
        self._refuse_if_patched()
        assert isinstance(taken, outputs.Taken)
        return Call(events, taken, host_us)

    def _refuse_if_patched(self) -> None:
        changed = self.guard.patched()
        if changed:
            raise Tampered(changed)

    def _model_seed(self, name: str) -> int:
        """The seed a workload's models are built from: its first correctness seed (long past)."""
        if name not in self._model_seeds:
            self._model_seeds[name] = self.chan.seed(name, "model")
        return self._model_seeds[name]

    def _one_call(self, workload: dict, name: str, params: dict, seed: int, tag: str) -> bool:
        try:
            inputs = self.inputs(params, seed)
            previous = self._previous_inputs.get(name)
            if tag not in ("0", "0r") and previous is not None:
                # Same tensors, new values: a cache keyed on data_ptr() or id()
                # hits, and returns the previous seed's answer.
                for old, new in zip(previous, inputs, strict=True):
                    if torch.is_tensor(old) and old.shape == new.shape:
                        old.copy_(new)
                inputs = [
                    old if torch.is_tensor(old) and old.shape == new.shape else new
                    for old, new in zip(previous, inputs, strict=True)
                ]
            self._previous_inputs[name] = inputs
            model = self.construct(self.sub.ModelNew, params, seed)
            originals = [x.clone() if torch.is_tensor(x) else x for x in inputs]
            honesty.poison_allocator(self.device, 2 * _bytes_of(inputs))
            self.sync()
            recorder = honesty.OpRecorder(kernels=self.device.type == "cuda")
            t0 = _perf_counter()
            call = self._invoke(model, inputs, recorder=recorder)
            self.sync()
            call_ms = (_perf_counter() - t0) * 1e3
        except (Tampered, outputs.UnreadableOutput, outputs.ModeLeftPushed) as exc:
            self._report_refusal(exc, name)
            return False
        except BaseException as exc:
            self.chan.send(
                "error",
                kind=classify(exc),
                phase="correctness",
                workload=name,
                message=_describe(exc),
            )
            traceback.print_exc()
            return False
        mutated = []
        if not self.job.inplace:
            mutated = [
                i
                for i, (now, before) in enumerate(zip(inputs, originals, strict=True))
                if torch.is_tensor(now) and not honesty.tensors_equal(now, before)
            ]
        path = self.out_dir / f"{name}.{tag}.out"
        outputs.write_raw(call.taken.copies, path)
        self.chan.send(
            "output",
            workload=name,
            seed=seed,
            tag=tag,
            file=path.name,
            ops=sorted(recorder.ops),
            kernels=sorted(recorder.kernels),
            mutated_inputs=mutated,
            layouts=[layout.as_dict() for layout in call.taken.layouts],
            host_ms=call_ms,
        )
        return True

    def _report_refusal(self, exc: BaseException, workload: str) -> None:
        """A call whose result the harness will not read: a patch, a foreign output, a mode."""
        if isinstance(exc, Tampered):
            self.chan.send("patched", phase=f"a call of {workload}", names=exc.names)
        elif isinstance(exc, outputs.ModeLeftPushed):
            self.chan.send("patched", phase=f"a call of {workload}", names=[str(exc)])
        else:
            # Touching it could run the submission's code: reported unread.
            self.chan.send("bad_output", workload=workload, message=str(exc))

    def time_workload(self, workload: dict, flusher: timing.L2Flusher) -> bool:
        name, params, cfg = workload["name"], workload["params"], self.job.timing
        sides = ("ref",) if self.clean else ("ref", "sub")
        audit_prints: list[dict] = []
        try:
            sub, ref, covers = self._phase(workload, cfg, first=True)
            per_phase = cfg.calls_per_phase
            sub_events, ref_events, prints = [], [], []
            # Calls whose queueing by the host outlasted their cover.
            host_bound = {"sub": 0, "ref": 0}
            started = _perf_counter()
            call = 0
            while True:
                call += 1
                if call > 1 and (call - 1) % per_phase == 0:
                    del sub, ref
                    sub, ref, covers = self._phase(workload, cfg, first=False)
                # Alternate the order each iteration so drift cancels.
                order = sides if call % 2 else sides[::-1]
                for who in order:
                    flusher.cover_us = covers[who]
                    if who == "ref":
                        ref_inputs = self.inputs(params, self.chan.seed(name, "ref"))
                        ref_events.append(timing.timed_call(ref, ref_inputs, flusher)[0])
                        del ref_inputs
                        host_bound["ref"] += flusher.queue_us > flusher.cover_us
                        continue
                    seed = self.chan.seed(name, "call")
                    inputs = self.inputs(params, seed)
                    honesty.poison_allocator(self.device, _bytes_of(inputs))
                    made = self._invoke(sub, inputs, flusher=flusher)
                    host_bound["sub"] += flusher.queue_us > flusher.cover_us
                    sub_events.append(made.events)
                    persisting = flusher.persisting_l2_bytes()
                    if persisting and not self.l2_reported:
                        self.l2_reported = True
                        self.chan.send("l2_persistence", workload=name, bytes=persisting)
                    # The harness's copies were queued straight after the end
                    # event; the outputs are copied again once the whole device
                    # has finished: work left running on another stream or
                    # thread changes an output in between. The positions' seed
                    # is asked for only now, after the call returned.
                    sample_seed = self.chan.seed(name, "sample")
                    early = fingerprints.read(made.taken.copies, seed=sample_seed)
                    fp = early.fingerprint
                    prints.append({"seed": seed, "sample_seed": sample_seed, "fp": fp})
                    self.sync()
                    later = outputs.take_again(made.taken.originals)
                    settled = fingerprints.read(later, seed=sample_seed)
                    if not settled.same_as(early) and not self.escape_reported:
                        self.escape_reported = True
                        self.chan.send("escaped", workload=name, call=call)
                    del made, later
                self.sync()
                # Whether an audit follows this call is the parent's secret until now.
                if not self.clean and self.chan.ask("audit", workload=name, call=call)["audit"]:
                    audit_prints.append(self._audit_call(sub, name, params, flusher, covers["sub"]))
                if call >= cfg.max_calls:
                    break
                # The budget ends timing only at the end of a phase, so every
                # phase weighs the same.
                boundary = call % per_phase == 0 if cfg.phases > 1 else call % 5 == 0
                if boundary and _perf_counter() - started > cfg.budget_s:
                    break
            sub_ms = [timing.elapsed_ms(a, b) for a, b in sub_events]
            ref_ms = [timing.elapsed_ms(a, b) for a, b in ref_events]
            if self.clean:
                self.chan.send(
                    "timing",
                    workload=name,
                    ref_ms=ref_ms,
                    cover=flusher.describe(),
                    cover_us=covers,
                )
                return True
            # Audits placed after the last call the budget allowed still run.
            left = int(self.chan.ask("audits_left", workload=name)["count"])
            audit_prints += [
                self._audit_call(sub, name, params, flusher, covers["sub"]) for _ in range(left)
            ]
            batch = self._batch(name, sub, params, sub_ms, cfg)
        except (Tampered, outputs.UnreadableOutput, outputs.ModeLeftPushed) as exc:
            self._report_refusal(exc, name)
            return False
        except BaseException as exc:
            self.chan.send(
                "error", kind=classify(exc), phase="timing", workload=name, message=_describe(exc)
            )
            traceback.print_exc()
            return False
        self.chan.send(
            "timing",
            workload=name,
            sub_ms=sub_ms,
            ref_ms=ref_ms,
            prints=prints,
            batch_prints=batch,
            audit_prints=audit_prints,
            l2_persist_reset=flusher.resets_persisting_lines,
            cover=flusher.describe(),
            cover_us=covers,
            host_bound=host_bound,
            ops=sorted(self.op_log.ops),
        )
        self.op_log.ops.clear()
        return True

    def profile_workload(self, workload: dict, mark: Any) -> bool:
        """One untimed call of a timed workload inside the profiler's range (counters.Mark).

        The model is built and called once first, outside the range: the
        compilation and autotuning are not what the counters are for, nor is
        making the inputs.
        """
        name, params = workload["name"], workload["params"]
        try:
            model = self.construct(self.sub.ModelNew, params, self._model_seed(name))
            self._invoke(model, self.inputs(params, self.chan.seed(name, "warm")))
            seed = self.chan.seed(name, "call")
            inputs = self.inputs(params, seed)
            with mark.profiled():
                made = self._invoke(model, inputs)
            # The parent checks what the profiled kernels computed: their
            # durations stand against the timed child's reported times.
            sample_seed = self.chan.seed(name, "sample")
            fp = fingerprints.read(made.taken.copies, seed=sample_seed).fingerprint
        except (Tampered, outputs.UnreadableOutput, outputs.ModeLeftPushed) as exc:
            self._report_refusal(exc, name)
            return False
        except BaseException as exc:
            self.chan.send(
                "error", kind=classify(exc), phase="profile", workload=name, message=_describe(exc)
            )
            traceback.print_exc()
            return False
        self.chan.send("profiled", workload=name, seed=seed, sample_seed=sample_seed, fp=fp)
        return True

    def _phase(self, workload: dict, cfg: TimingSettings, *, first: bool) -> tuple:
        """A timing phase's start: the allocator's cache released, new models, a warm-up.

        Returns the models and each one's launch cover (µs), sized to how long
        the host took to queue its warm-up calls (timing.cover_for). The first
        phase of a workload warms up for at least `warmup_s` as well as
        `warmup_calls`; the next ones follow it at once, with the GPU's clocks
        already up, and warm up for `warmup_calls` only.
        """
        name, params = workload["name"], workload["params"]
        timing.release_cached_memory()
        model_seed = self._model_seed(name)
        ref = self.construct(self.base.Model, params, model_seed)
        sub = ref if self.clean else self.construct(self.sub.ModelNew, params, model_seed)
        # Compilation and autotuning happened in the correctness calls
        # (their host time is the cold start); these are plain warm-ups,
        # kept up long enough for the GPU to leave its idle clocks.
        queue_us: dict[str, list[float]] = {"sub": [], "ref": []}
        warmup_s = cfg.warmup_s if first else 0.0
        warm_seeds = {who: self.chan.seed(name, "warm") for who in ("ref", "sub")}
        warm_started, warm_calls = _perf_counter(), 0
        while warm_calls < cfg.warmup_calls or (_perf_counter() - warm_started < warmup_s):
            warm_calls += 1
            for who, model in (("ref", ref), ("sub", sub)):
                if self.clean and who == "sub":
                    continue
                inputs = self.inputs(params, warm_seeds[who])
                self.sync()
                if who == "sub" and not self.clean:
                    queue_us[who].append(self._invoke(model, inputs).host_us)
                    continue
                queued = _perf_counter()
                model(*inputs)
                queue_us[who].append((_perf_counter() - queued) * 1e6)
            self.sync()
        covers = {who: timing.cover_for(times) for who, times in queue_us.items()}
        if self.clean:
            covers["sub"] = covers["ref"]
        return sub, ref, covers

    def _audit_call(
        self, sub, name: str, params: dict, flusher: timing.L2Flusher, cover_us: float
    ) -> dict:
        """An untimed call made exactly as a timed one, whose inputs are written late.

        Before the cover, the call's input tensors hold another seed's inputs
        (a decoy); their real values are copied in on the caller's stream
        after the cover, just before the start event. Work that waits for the
        caller's stream, as CUDA's stream order requires, reads the real
        inputs. Work that starts on a stream of its own without waiting, as
        the cover releases the GPU (case 4b), reads the decoy, and the
        output, checked against the reference by the parent, is wrong.
        """
        seed = self.chan.seed(name, "audit")
        inputs = self.inputs(params, seed)
        staged = [(x, x.clone()) for x in inputs if torch.is_tensor(x)]
        decoy = self.inputs(params, self.chan.seed(name, "decoy"))
        for x, other in zip(inputs, decoy, strict=True):
            if torch.is_tensor(x) and torch.is_tensor(other) and x.shape == other.shape:
                x.copy_(other)
        del decoy
        honesty.poison_allocator(self.device, _bytes_of(inputs))
        # The submission's cover, as for its timed calls. The recorder's
        # profiler starts before the cover is queued, so only its per-op cost
        # falls inside the covered call.
        flusher.cover_us = cover_us
        recorder = honesty.OpRecorder(kernels=self.device.type == "cuda")
        made = self._invoke(sub, inputs, flusher=flusher, staged=staged, recorder=recorder)
        self.sync()
        sample_seed = self.chan.seed(name, "sample")
        fp = fingerprints.fingerprint(
            made.taken.copies, seed=sample_seed, samples=fingerprints.AUDIT_SAMPLES
        )
        return {
            "seed": seed,
            "sample_seed": sample_seed,
            "fp": fp,
            "ops": sorted(recorder.ops),
            "kernels": sorted(recorder.kernels),
        }

    def _batch(self, name, sub, params, sub_ms, cfg: TimingSettings) -> list:
        """Back-to-back calls timed by events here and by the parent's clock outside.

        The parent compares its own wall time between `batch_begin` and
        `batch_end` with the event total: work on hidden streams or threads,
        or a patched timer, makes the two disagree.
        """
        median = max(sorted(sub_ms)[len(sub_ms) // 2], 1e-3)
        calls = int(min(max(cfg.batch_ms / median, 5), 200))
        first = self.inputs(params, self.chan.seed(name, "warm"))
        # Every call has inputs of its own, and they all live at once: cap the
        # count by memory (inputs, and about as much again for outputs and for
        # the harness's copies of them).
        per_call = 3 * max(_bytes_of(first), 1)
        calls = max(2, min(calls, int(cfg.batch_memory_bytes // per_call)))
        # One untimed pass first: keeping every output alive makes the caching
        # allocator call cudaMalloc for each one (hundreds of microseconds for
        # large outputs), which would swamp a short kernel on the host clock.
        # The timed pass then reuses those blocks, as the per-call loop does,
        # on inputs drawn afresh (an in-place task wrote into the first ones).
        warm = [
            first,
            *(self.inputs(params, self.chan.seed(name, "warm")) for _ in range(1, calls)),
        ]
        del first
        with self.op_log:
            outs = [sub(*inputs) for inputs in warm]
        del outs, warm
        seeds = [self.chan.seed(name, "call") for _ in range(calls)]
        sets = [self.inputs(params, seed) for seed in seeds]
        spans = [outputs.input_spans(inputs) for inputs in sets]
        self.sync()
        self._refuse_if_patched()
        start, end = timing.event(), timing.event()
        results = []
        self.chan.send("batch_begin", workload=name, calls=calls)
        timing.record(start)
        with self.op_log:
            for inputs in sets:
                results.append(sub(*inputs))
        timing.record(end)
        # Copied by the harness's own means before anything else reads them.
        taken = [outputs.take(r, s) for r, s in zip(results, spans, strict=True)]
        del results
        timing.synchronize()
        self._refuse_if_patched()
        self.chan.send(
            "batch_end", workload=name, calls=calls, event_ms=timing.elapsed_ms(start, end)
        )
        prints = []
        for seed, made in zip(seeds, taken, strict=True):
            sample_seed = self.chan.seed(name, "sample")
            fp = fingerprints.fingerprint(made.copies, seed=sample_seed)
            prints.append({"seed": seed, "sample_seed": sample_seed, "fp": fp})
        return prints

    def run(self) -> None:
        # Calibrated before the submission is imported, so nothing it patches
        # can reach the flush or the launch cover.
        flusher = None
        mark = None
        if self.profile:
            from evaluator.harness.counters import Mark

            mark = Mark()
        elif self.mode == "cuda":
            flusher = timing.L2Flusher(self.device)
        if self.clean:
            self.chan.send("ready")
        elif not self.load_submission():
            return
        while True:
            # What was printed so far reaches the log before the next step:
            # the parent marks where the hidden workloads' part begins.
            sys.stdout.flush()
            sys.stderr.flush()
            step = self.chan.ask("step")
            if step["step"] == "end":
                break
            workload = step["workload"]
            if step["step"] == "check":
                if not self.correctness(workload):
                    return
                self.check_patches(f"correctness:{workload['name']}")
            elif step["step"] == "profile" and mark is not None:
                if not self.profile_workload(workload, mark):
                    return
            elif flusher is not None:
                if not self.time_workload(workload, flusher):
                    return
                self.check_patches(f"timing:{workload['name']}")
        self.chan.send("done")


def _bytes_of(values) -> int:
    return sum(x.numel() * x.element_size() for x in values if torch.is_tensor(x))


def main() -> None:
    job_path, fd = sys.argv[1], int(sys.argv[2])
    reply_fd = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else None
    channel = Channel(fd, reply_fd)
    honesty.block_audit_hooks()
    channel.send("hello", pid=os.getpid())
    with open(job_path) as fh:
        job = Job.from_dict(json.load(fh))
    os.unlink(job_path)  # it holds no secret, but the submission has no use for it
    try:
        Child(job, channel).run()
    except BaseException as exc:  # a failure of the harness itself
        channel.send("error", kind="worker_error", phase="harness", message=_describe(exc))
        traceback.print_exc()
        raise
    if not job.profile:  # ncu reads a profiled process's last counters as it exits normally
        # Everything is reported: end here rather than tear the interpreter down (about a
        # second with torch loaded, in each of an evaluation's processes). The submission's
        # exit handlers and leftover threads end with the process, unrun.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

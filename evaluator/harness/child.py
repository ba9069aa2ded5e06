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
from pathlib import Path
from typing import Any

# Everything the checks rely on is imported, and snapshotted, before the
# submission is: see PatchGuard.
import torch
import torch._dynamo

from evaluator.harness import fingerprints, honesty, outputs, timing
from evaluator.harness.channel import Channel, classify, describe
from evaluator.harness.childtiming import Timing, bytes_of
from evaluator.harness.job import Job
from evaluator.harness.workload import load_module, make_inputs, make_model

_perf_counter = time.perf_counter


class Child(Timing):
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
        # imports the submission (cleanreference.py: reference_tampering).
        self.clean = job.clean
        # A profiling pass (counters.py) makes one untimed call of each timed
        # workload, under ncu, and no other.
        self.profile = job.profile
        self._model_seeds: dict[str, int] = {}
        # The guard's snapshot is taken again in `run`, once CUDA and the launch
        # cover are set up, just before the submission is imported.
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
            self.chan.send("error", kind=classify(exc), phase="import", message=describe(exc))
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

    def _invoke(self, model, inputs, *, flusher=None, staged=(), recorder=None) -> outputs.Call:
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
        return outputs.Call(events, taken, host_us)

    def _refuse_if_patched(self) -> None:
        changed = self.guard.patched()
        if changed:
            raise honesty.Tampered(changed)

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
            honesty.poison_allocator(self.device, 2 * bytes_of(inputs))
            self.sync()
            recorder = honesty.OpRecorder(kernels=self.device.type == "cuda")
            t0 = _perf_counter()
            call = self._invoke(model, inputs, recorder=recorder)
            self.sync()
            call_ms = (_perf_counter() - t0) * 1e3
        except BaseException as exc:
            self._report_failure(exc, "correctness", name)
            return False
        mutated = []
        if not self.job.inplace:
            mutated = [
                i
                for i, (now, before) in enumerate(zip(inputs, originals, strict=True))
                if torch.is_tensor(now) and not honesty.tensors_equal(now, before)
            ]
        path = self.out_dir / f"{name}.{tag}.out"
        digest = outputs.write_raw(call.taken.copies, path)
        self.chan.send(
            "output",
            workload=name,
            seed=seed,
            tag=tag,
            file=path.name,
            sha256=digest,
            ops=sorted(recorder.ops),
            kernels=sorted(recorder.kernels),
            mutated_inputs=mutated,
            layouts=[layout.as_dict() for layout in call.taken.layouts],
            host_ms=call_ms,
        )
        return True

    def _report_failure(self, exc: BaseException, phase: str, workload: str) -> None:
        """What ended a step: a call the harness refused to read, or the submission's error."""
        if isinstance(exc, honesty.Tampered | outputs.UnreadableOutput | outputs.ModeLeftPushed):
            self._report_refusal(exc, workload)
            return
        self.chan.send(
            "error", kind=classify(exc), phase=phase, workload=workload, message=describe(exc)
        )
        traceback.print_exc()

    def _report_refusal(self, exc: BaseException, workload: str) -> None:
        """A call whose result the harness will not read: a patch, a foreign output, a mode."""
        if isinstance(exc, honesty.Tampered):
            self.chan.send("patched", phase=f"a call of {workload}", names=exc.names)
        elif isinstance(exc, outputs.ModeLeftPushed):
            self.chan.send("patched", phase=f"a call of {workload}", names=[str(exc)])
        else:
            # Touching it could run the submission's code: reported unread.
            self.chan.send("bad_output", workload=workload, message=str(exc))

    def profile_workload(self, workload: dict, mark: Any) -> bool:
        """One untimed call of a timed workload inside the profiler's range (profilemark.Mark).

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
        except BaseException as exc:
            self._report_failure(exc, "profile", name)
            return False
        self.chan.send("profiled", workload=name, seed=seed, sample_seed=sample_seed, fp=fp)
        return True

    def run(self) -> None:
        # Calibrated before the submission is imported, so nothing it patches
        # can reach the flush or the launch cover.
        flusher = None
        mark = None
        if self.profile:
            from evaluator.harness.profilemark import Mark

            mark = Mark()
        elif self.mode == "cuda":
            flusher = timing.L2Flusher(self.device)
        # Everything the harness set up is now in the snapshot, and nothing of
        # the submission's yet.
        self.guard = honesty.PatchGuard()
        self.threads = honesty.live_python_threads()
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


def main() -> None:
    job_path, fd = sys.argv[1], int(sys.argv[2])
    reply_fd = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else None
    channel = Channel(fd, reply_fd)
    honesty.block_audit_hooks()
    channel.send("hello", pid=os.getpid())
    if reply_fd is not None:
        # Up to here the child has run its imports and nothing else: it has left the
        # GPU alone, so a GPU lease let it start beside another evaluation's timed
        # phase. It touches CUDA only once it has the GPU (gpulease).
        if torch.cuda.is_initialized():
            channel.send(
                "error", kind="worker_error", phase="harness",
                message="the harness initialised CUDA before it was given the GPU",
            )  # fmt: skip
            raise SystemExit(1)
        channel.ask("gpu")
    with open(job_path) as fh:
        job = Job.from_dict(json.load(fh))
    os.unlink(job_path)  # it holds no secret, but the submission has no use for it
    try:
        Child(job, channel).run()
    except BaseException as exc:  # a failure of the harness itself
        channel.send("error", kind="worker_error", phase="harness", message=describe(exc))
        traceback.print_exc()
        raise
    if not job.profile:  # ncu reads a profiled process's last counters as it exits normally
        # Everything is reported: end here rather than tear the interpreter down (about a
        # second with torch loaded, in each of an evaluation's processes). The submission's
        # exit handlers and leftover threads end with the process, unrun.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

"""The child's timing of a workload (`cuda` mode): the measurement and the defences beside it.

`Timing.time_workload` is the measurement, `_time_calls` its loop (read it
first: it is `triton.testing.do_bench` with the baseline interleaved and the
calls split into phases); each kind of call has one method (`_time_ref`,
`_time_sub`, `_audit_call`, `_batch`), with what is checked before and after
it written beside the call. A mixin of `child.Child`, whose state it uses:
the channel, the job, the models and the harness's call path (`_invoke`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from evaluator.harness import fingerprints, honesty, outputs, timing
from evaluator.harness.job import TimingSettings

_perf_counter = time.perf_counter
# The back-to-back batch: calls enough for `batch_ms`, at least two (a slow
# call's batch is two calls, not five of a second each), at most 200.
BATCH_MIN_CALLS = 2
BATCH_MAX_CALLS = 200


@dataclass
class _TimingRun:
    """What one workload's timing gathers, call by call, for its report."""

    sub_events: list = field(default_factory=list)
    ref_events: list = field(default_factory=list)
    prints: list[dict] = field(default_factory=list)
    audit_prints: list[dict] = field(default_factory=list)
    # Calls whose queueing by the host outlasted their cover.
    host_bound: dict[str, int] = field(default_factory=lambda: {"sub": 0, "ref": 0})


class Timing:
    """The timing methods of `child.Child`."""

    # Provided by Child.
    chan: Any
    job: Any
    device: torch.device
    clean: bool
    l2_reported: bool
    escape_reported: bool
    op_log: honesty.DispatchRecorder
    threads: set[int]
    base: Any
    sub: Any

    # Provided by Child as well.
    def inputs(self, params: dict, seed: int) -> list:
        raise NotImplementedError

    def construct(self, cls: type, params: dict, seed: int) -> torch.nn.Module:
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def _model_seed(self, name: str) -> int:
        raise NotImplementedError

    def _refuse_if_patched(self) -> None:
        raise NotImplementedError

    def _report_failure(self, exc: BaseException, phase: str, workload: str) -> None:
        raise NotImplementedError

    def _invoke(self, model, inputs, *, flusher=None, staged=(), recorder=None) -> outputs.Call:
        raise NotImplementedError

    def time_workload(self, workload: dict, flusher: timing.L2Flusher) -> bool:
        """Time one workload (`_time_calls`), then its audits and back-to-back batch; report."""
        name, cfg = workload["name"], self.job.timing
        run = _TimingRun()
        try:
            sub, covers = self._time_calls(workload, flusher, run)
            sub_ms = [timing.elapsed_ms(a, b) for a, b in run.sub_events]
            ref_ms = [timing.elapsed_ms(a, b) for a, b in run.ref_events]
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
            for _ in range(left):
                run.audit_prints.append(self._audit_call(sub, workload, flusher, covers["sub"]))
            batch = self._batch(name, sub, workload["params"], sub_ms, cfg)
        except BaseException as exc:
            self._report_failure(exc, "timing", name)
            return False
        self.chan.send(
            "timing",
            workload=name,
            sub_ms=sub_ms,
            ref_ms=ref_ms,
            prints=run.prints,
            batch_prints=batch,
            audit_prints=run.audit_prints,
            l2_persist_reset=flusher.resets_persisting_lines,
            cover=flusher.describe(),
            cover_us=covers,
            host_bound=run.host_bound,
            ops=sorted(self.op_log.ops),
        )
        self.op_log.ops.clear()
        return True

    def _time_calls(self, workload: dict, flusher: timing.L2Flusher, run: _TimingRun) -> tuple:
        """The measurement: baseline and submission in turn, phase after phase, until done.

        Like `triton.testing.do_bench`, with the two sides interleaved (the
        order swapped every iteration so drift cancels) and the calls split
        into phases, each with new models and a warm-up (`_phase`). What each
        call is checked for happens beside it: `_time_ref`, `_time_sub` and
        the audits the parent places in secret. Returns the last models'
        submission and the covers.
        """
        name, cfg = workload["name"], self.job.timing
        sides = ("ref",) if self.clean else ("ref", "sub")
        sub, ref, covers = self._phase(workload, cfg, first=True)
        started, call = _perf_counter(), 0
        while True:
            call += 1
            if call > 1 and (call - 1) % cfg.calls_per_phase == 0:
                del sub, ref
                sub, ref, covers = self._phase(workload, cfg, first=False)
            for who in sides if call % 2 else sides[::-1]:
                flusher.cover_us = covers[who]
                if who == "ref":
                    self._time_ref(ref, workload, flusher, run)
                else:
                    self._time_sub(sub, workload, flusher, run, call)
            self.sync()
            # Whether an audit follows this call is the parent's secret until now.
            if not self.clean and self.chan.ask("audit", workload=name, call=call)["audit"]:
                run.audit_prints.append(self._audit_call(sub, workload, flusher, covers["sub"]))
            if call >= cfg.max_calls:
                break
            if _perf_counter() - started > cfg.budget_s and _may_stop(call, cfg):
                break
        return sub, covers

    @contextlib.contextmanager
    def _baseline_threads(self) -> Iterator[None]:
        """Threads started while the baseline runs are the baseline's, not the submission's.

        A baseline compiled with torch.compile starts a thread of its own at its
        first compile; `background_thread` counts only the submission's.
        """
        before = honesty.live_python_threads()
        try:
            yield
        finally:
            self.threads |= honesty.live_python_threads() - before

    def _time_ref(self, ref, workload: dict, flusher: timing.L2Flusher, run: _TimingRun) -> None:
        """One timed call of the baseline, on inputs of its own; its output is discarded."""
        inputs = self.inputs(workload["params"], self.chan.seed(workload["name"], "ref"))
        with self._baseline_threads():
            run.ref_events.append(timing.timed_call(ref, inputs, flusher)[0])
        run.host_bound["ref"] += flusher.queue_us > flusher.cover_us

    def _time_sub(
        self, sub, workload: dict, flusher: timing.L2Flusher, run: _TimingRun, call: int
    ) -> None:
        """One timed call of the submission's, with the defences that follow every one.

        Before: fresh inputs from a new secret seed, the allocator poisoned.
        After: persisting L2 reported, the harness's copies fingerprinted at
        positions drawn only now, and the outputs copied again once the whole
        device has finished (work left on another stream changes them).
        """
        name = workload["name"]
        seed = self.chan.seed(name, "call")
        inputs = self.inputs(workload["params"], seed)
        honesty.poison_allocator(self.device, bytes_of(inputs))
        made = self._invoke(sub, inputs, flusher=flusher)
        run.host_bound["sub"] += flusher.queue_us > flusher.cover_us
        run.sub_events.append(made.events)
        persisting = flusher.persisting_l2_bytes()
        if persisting and not self.l2_reported:
            self.l2_reported = True
            self.chan.send("l2_persistence", workload=name, bytes=persisting)
        sample_seed = self.chan.seed(name, "sample")
        early = fingerprints.read(made.taken.copies, seed=sample_seed)
        run.prints.append({"seed": seed, "sample_seed": sample_seed, "fp": early.fingerprint})
        self.sync()
        settled = fingerprints.read(outputs.take_again(made.taken.originals), seed=sample_seed)
        if not settled.same_as(early) and not self.escape_reported:
            self.escape_reported = True
            self.chan.send("escaped", workload=name, call=call)

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
                with self._baseline_threads():
                    model(*inputs)
                queue_us[who].append((_perf_counter() - queued) * 1e6)
            self.sync()
        covers = {who: timing.cover_for(times) for who, times in queue_us.items()}
        if self.clean:
            covers["sub"] = covers["ref"]
        return sub, ref, covers

    def _audit_call(self, sub, workload: dict, flusher: timing.L2Flusher, cover_us: float) -> dict:
        """An untimed call made exactly as a timed one, whose inputs are written late.

        Before the cover, the call's input tensors hold another seed's inputs
        (a decoy); their real values are copied in on the caller's stream
        after the cover, just before the start event. Work that waits for the
        caller's stream, as CUDA's stream order requires, reads the real
        inputs. Work that starts on a stream of its own without waiting, as
        the cover releases the GPU (case 4b), reads the decoy, and the
        output, checked against the reference by the parent, is wrong.
        """
        name, params = workload["name"], workload["params"]
        seed = self.chan.seed(name, "audit")
        inputs = self.inputs(params, seed)
        staged = [(x, x.clone()) for x in inputs if torch.is_tensor(x)]
        decoy = self.inputs(params, self.chan.seed(name, "decoy"))
        for x, other in zip(inputs, decoy, strict=True):
            if torch.is_tensor(x) and torch.is_tensor(other) and x.shape == other.shape:
                x.copy_(other)
        del decoy
        honesty.poison_allocator(self.device, bytes_of(inputs))
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
        calls = self._batch_warm(name, sub, params, sub_ms, cfg)
        seeds = [self.chan.seed(name, "call") for _ in range(calls)]
        sets = [self.inputs(params, seed) for seed in seeds]
        spans = [outputs.input_spans(inputs) for inputs in sets]
        self.sync()
        self._refuse_if_patched()
        start, end = timing.event(), timing.event()
        results = []
        self.chan.send("batch_begin", workload=name, calls=calls)
        timing.record(start)
        # No op log here: its per-op cost is host time, which this batch is there to
        # measure. Its outputs are checked like the timed calls'.
        for inputs in sets:
            results.append(sub(*inputs))
        timing.record(end)
        # Copied by the harness's own means before anything else reads them, and
        # before the device is waited for. The copies' host time is the harness's,
        # not the calls': the parent's clock sees where it begins and ends
        # (batch_calls, batch_taken) and leaves it out of the batch's host time.
        self.chan.send("batch_calls", workload=name)
        taken = [outputs.take(r, s) for r, s in zip(results, spans, strict=True)]
        self.chan.send("batch_taken", workload=name)
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

    def _batch_warm(self, name, sub, params, sub_ms, cfg: TimingSettings) -> int:
        """The batch's size, after one untimed pass of that many calls.

        Keeping every output alive makes the caching allocator call cudaMalloc
        for each one (hundreds of microseconds for large outputs), which would
        swamp a short kernel on the host clock: the timed pass then reuses the
        blocks of this one, as the per-call loop does, on inputs drawn afresh
        (an in-place task wrote into these).
        """
        median = max(sorted(sub_ms)[len(sub_ms) // 2], 1e-3)
        calls = min(max(math.ceil(cfg.batch_ms / median), BATCH_MIN_CALLS), BATCH_MAX_CALLS)
        first = self.inputs(params, self.chan.seed(name, "warm"))
        # Every call has inputs of its own, and they all live at once: cap the
        # count by memory (inputs, and about as much again for outputs and for
        # the harness's copies of them).
        per_call = 3 * max(bytes_of(first), 1)
        calls = max(2, min(calls, int(cfg.batch_memory_bytes // per_call)))
        warm = [
            first,
            *(self.inputs(params, self.chan.seed(name, "warm")) for _ in range(1, calls)),
        ]
        del first
        outs = [sub(*inputs) for inputs in warm]
        # The harness's copies of every output live at once too: taken here once,
        # their blocks are cached for the timed pass's copies.
        warm_taken = [outputs.take(r) for r in outs]
        del outs, warm, warm_taken
        return calls


def _may_stop(call: int, cfg: TimingSettings) -> bool:
    """Whether the budget, once spent, may end timing after `call` calls a side.

    At the end of a phase, so every phase weighs the same; and within the first
    phase once `slow_calls` calls are made: calls so slow that one phase outruns
    the budget (a naive kernel of a second a call) make one short phase, and the
    figure of one phase weighs what it weighs.
    """
    boundary = call % cfg.calls_per_phase == 0 if cfg.phases > 1 else call % 5 == 0
    return boundary or (call <= cfg.calls_per_phase and call >= max(cfg.slow_calls, 1))


def bytes_of(values) -> int:
    return sum(x.numel() * x.element_size() for x in values if torch.is_tensor(x))

"""The child's timing primitives: what a timed call waits for, and what a patch can reach."""

from types import SimpleNamespace

import pytest
import torch

from evaluator.harness import fingerprints, timing
from evaluator.harness.child import Child
from evaluator.harness.job import TimingSettings


class FakeChannel:
    """The child's channel to the parent, with the parent's answers played by the test.

    Seeds count up per purpose (timed calls 2, 3, 4, ...); `audits` are
    (after_call, seed, decoy_seed) triples, answered as the Dealer would.
    """

    def __init__(self, sent: list, audits=()):
        self.sent, self.audits = sent, list(audits)
        self.counters: dict[str, int] = {}
        self.pending: list[int] = []

    def send(self, event, **fields):
        self.sent.append((event, fields))

    def seed(self, workload, purpose):
        if purpose in ("audit", "decoy") and self.pending:
            return self.pending.pop(0)
        self.counters[purpose] = self.counters.get(purpose, 1) + 1
        return self.counters[purpose]

    def ask(self, what, **fields):
        if what == "audit":
            due = [a for a in self.audits if a[0] <= fields["call"]][:1]
            for after, seed, decoy in due:
                self.audits.remove((after, seed, decoy))
                self.pending = [seed, decoy]
            return {"audit": bool(due)}
        assert what == "audits_left"
        self.pending = [x for _, seed, decoy in self.audits for x in (seed, decoy)]
        count, self.audits = len(self.audits), []
        return {"count": count}


class StubFlusher:
    def flush(self) -> None:
        pass


def test_a_timed_call_waits_for_its_own_stream_only(monkeypatch):
    # Outputs are fingerprinted once the call's stream is done and again once the
    # device is: a device-wide wait here would hide work left on a side stream.
    waited = []
    monkeypatch.setattr(timing, "_Event", lambda enable_timing: object())
    monkeypatch.setattr(timing, "_record_on", lambda event, stream: waited.append("record"))
    monkeypatch.setattr(timing, "_current_stream", lambda: "the current stream")
    monkeypatch.setattr(timing, "_stream_synchronize", lambda stream: waited.append(stream))
    monkeypatch.setattr(timing, "_synchronize", lambda: waited.append("the whole device"))

    _, out = timing.timed_call(lambda x: x + 1, (torch.zeros(3),), StubFlusher())

    assert waited == ["record", "record", "the current stream"]
    assert out.tolist() == [1.0, 1.0, 1.0]


def test_patching_torch_after_the_harness_is_imported_reaches_none_of_its_primitives(
    monkeypatch,
):
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 1e-6)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    assert timing._elapsed is not torch.cuda.Event.elapsed_time
    assert timing._synchronize is not torch.cuda.synchronize
    assert timing._sleep is not torch.cuda._sleep


def test_the_launch_cover_is_clamped_to_a_real_clock(monkeypatch):
    # A patched or broken reading (here: the sleep took 1e-6 ms) must not make
    # the cover spin for minutes: at most 5 GHz worth of cycles.
    monkeypatch.setattr(timing, "_sleep", lambda cycles: None)
    monkeypatch.setattr(timing, "_Event", lambda enable_timing: object())
    monkeypatch.setattr(timing, "_record", lambda event: None)
    monkeypatch.setattr(timing, "_event_sync", lambda event: None)
    monkeypatch.setattr(timing, "_elapsed", lambda start, end: 1e-6)
    assert timing._cycles_for(200.0) == 5000 * 200

    monkeypatch.setattr(timing, "_elapsed", lambda start, end: 1e6)  # absurdly slow
    assert timing._cycles_for(200.0) == 100 * 200


def test_each_workload_is_timed_from_an_empty_allocator_cache(monkeypatch):
    # Where a workload's tensors land must not depend on the workloads timed
    # before it in the same process (docs/benchmarks.md, series 3).
    events = []
    monkeypatch.setattr(timing, "release_cached_memory", lambda: events.append("release"))
    sent = []
    child = Child.__new__(Child)
    child.job = SimpleNamespace(timing=TimingSettings())
    child.chan = FakeChannel(sent)
    child.sub = SimpleNamespace(ModelNew=object)
    child.base = SimpleNamespace(Model=object)
    child.clean, child._model_seeds = False, {"w": 3}

    def construct(cls, params, seed):
        events.append("construct")
        raise RuntimeError("stop before timing")

    child.construct = construct
    workload = {"name": "w", "params": {}, "timing_seed": 1, "ref_timing_seed": 2, "seeds": [3]}

    assert not child.time_workload(workload, StubFlusher())
    assert events == ["release", "construct"]
    assert [event for event, _ in sent] == ["error"]


def test_the_cover_is_queued_on_an_idle_device(monkeypatch):
    # Work queued before the cover (inputs, the poisoned block) must be done:
    # a side stream could otherwise start beside it, ahead of the cover.
    order = []
    monkeypatch.setattr(timing, "_synchronize", lambda: order.append("device idle"))
    monkeypatch.setattr(timing, "_current_stream", lambda: SimpleNamespace(cuda_stream=7))
    flusher = timing.L2Flusher.__new__(timing.L2Flusher)
    flusher._cudart, flusher.cover_us, flusher.buffer = None, 200.0, "buffer"
    flusher.cover = SimpleNamespace(launch=lambda *args: order.append(("cover", *args)))
    flusher.flush()
    assert order == ["device idle", ("cover", "buffer", 200.0, 7)]


def test_a_workload_s_calls_split_into_phases_each_with_new_models(monkeypatch):
    # Timing setting phases=3: the calls are one series, but every third of
    # them starts with new models and a warm-up of its own (Child._phase).
    monkeypatch.setattr(timing, "timed_call", _stub_timed_call())
    phases, sent = [], []
    covers = {"sub": 250.0, "ref": 200.0}
    cfg = {"phases": 3, "max_calls": 6, "budget_s": 60.0}
    child = _fake_child(
        monkeypatch,
        cfg,
        sent,
        lambda w, c, first: (phases.append(first), ("sub", "ref", covers))[1],
    )

    assert child.time_workload(WORKLOAD, _fake_flusher())
    assert phases == [True, False, False]  # only the first warms up for warmup_s
    [(event, fields)] = sent
    assert event == "timing" and len(fields["sub_ms"]) == len(fields["ref_ms"]) == 6
    assert fields["cover_us"] == covers


def _stub_timed_call(result=lambda model, inputs: torch.zeros(1)):
    """timed_call over no GPU: events (0.0, 1.0), and what `take` makes of `result`."""

    def timed_call(model, inputs, flusher, staged=(), take=None):
        return (0.0, 1.0), (take(result(model, inputs)) if take else ())

    return timed_call


def _fake_flusher(**fields) -> SimpleNamespace:
    return SimpleNamespace(
        persisting_l2_bytes=lambda: 0,
        resets_persisting_lines=False,
        describe=lambda: {},
        cover_us=200.0,
        queue_us=0.0,
        **fields,
    )


def _fake_child(monkeypatch, timing_cfg: dict, sent: list, phase, audits=()) -> Child:
    """A child whose job has `timing_cfg` over the default timing settings."""
    from evaluator.harness import honesty

    monkeypatch.setattr(timing, "elapsed_ms", lambda start, end: end - start)
    monkeypatch.setattr(honesty, "poison_allocator", lambda device, nbytes: None)
    child = Child.__new__(Child)
    child.job = SimpleNamespace(timing=TimingSettings().with_overrides(timing_cfg))
    child.device = torch.device("cpu")
    child.l2_reported = child.escape_reported = False
    child.clean, child._model_seeds = False, {"w": 3}
    child.chan = FakeChannel(sent, audits)
    child.inputs = lambda params, seed: []
    child.sync = lambda: None
    child._batch = lambda *args: []
    child._phase = phase
    # Taken last, so that the test's own stubs are what it guards.
    child.guard = honesty.PatchGuard()
    child.op_log = honesty.DispatchRecorder()
    child.threads = honesty.live_python_threads()
    return child


WORKLOAD = {"name": "w", "params": {}}


def _time_stub_calls(monkeypatch, cfg: dict, workload: dict = WORKLOAD, audits=()) -> dict:
    """time_workload over stub timed calls of 1 ms and stub models: the fields it reports."""
    monkeypatch.setattr(timing, "timed_call", _stub_timed_call())
    sent: list = []
    child = _fake_child(
        monkeypatch, cfg, sent, lambda w, c, first: ("sub", "ref", {"sub": 1, "ref": 1}), audits
    )
    assert child.time_workload(workload, _fake_flusher())
    [(_, fields)] = sent
    return fields


def _stub_event_primitives(monkeypatch) -> None:
    """The CUDA event and stream primitives timed_call uses, as no-ops (events read 0.0)."""
    monkeypatch.setattr(timing, "_Event", lambda enable_timing: 0.0)
    monkeypatch.setattr(timing, "_record_on", lambda event, stream: None)
    monkeypatch.setattr(timing, "_current_stream", lambda: None)
    monkeypatch.setattr(timing, "_stream_synchronize", lambda stream: None)


def test_calls_the_host_queued_slower_than_their_cover_are_counted(monkeypatch):
    # The submission's calls take the host 900 µs to queue against a cover
    # of 250 µs: its events may time the host, and the report says how often.
    def timed_call(model, inputs, flusher, staged=(), take=None):
        flusher.queue_us = 900.0 if model == "sub" else 50.0
        return (0.0, 1.0), (take(torch.zeros(1)) if take else ())

    monkeypatch.setattr(timing, "timed_call", timed_call)
    sent: list = []
    cfg = {"phases": 1, "max_calls": 4, "budget_s": 60.0}
    covers = {"sub": 250.0, "ref": 200.0}
    child = _fake_child(monkeypatch, cfg, sent, lambda w, c, first: ("sub", "ref", covers))
    flusher = _fake_flusher()

    assert child.time_workload(WORKLOAD, flusher)
    [(_, fields)] = sent
    assert fields["host_bound"] == {"sub": 4, "ref": 0}
    assert fields["cover_us"] == covers


def test_the_cover_is_sized_to_the_host_s_queueing_of_the_call():
    assert timing.cover_for([]) == timing.LAUNCH_COVER_US
    assert timing.cover_for([20.0, 30.0, 25.0]) == timing.LAUNCH_COVER_US  # 150 µs: the floor
    assert timing.cover_for([230.0, 210.0, 5000.0]) == pytest.approx(2 * 230.0 + 100.0)
    assert timing.cover_for([1e6]) == timing.MAX_COVER_US


def test_a_timed_call_records_how_long_the_host_took_to_queue_it(monkeypatch):
    _stub_event_primitives(monkeypatch)
    clock = iter([10.0, 10.000_75])
    monkeypatch.setattr(timing, "_perf_counter", lambda: next(clock))
    flusher = StubFlusher()

    timing.timed_call(lambda: None, (), flusher)

    assert flusher.queue_us == pytest.approx(750.0)


def test_the_time_budget_ends_timing_at_the_end_of_a_phase_whatever_the_count(monkeypatch):
    # 300 calls asked for, phases of 3, no time left: the budget ends it
    # after the first whole phase.
    cfg = {"phases": 100, "max_calls": 300, "budget_s": 0.0}

    assert len(_time_stub_calls(monkeypatch, cfg)["sub_ms"]) == 3


def _clocked_calls(monkeypatch, cfg: dict, seconds_per_call: float) -> dict:
    """time_workload over stub calls of the submission's that each take `seconds_per_call`
    of the child's clock (the reference's take none)."""
    from evaluator.harness import childtiming

    clock = [0.0]

    def result(model, inputs):
        clock[0] += seconds_per_call
        return torch.zeros(1)

    monkeypatch.setattr(childtiming, "_perf_counter", lambda: clock[0])
    monkeypatch.setattr(timing, "timed_call", _stub_timed_call(result))
    sent: list = []
    child = _fake_child(
        monkeypatch, cfg, sent, lambda w, c, first: ("sub", "ref", {"sub": 1, "ref": 1})
    )
    assert child.time_workload(WORKLOAD, _fake_flusher())
    [(_, fields)] = sent
    return fields


@pytest.mark.parametrize(
    ("seconds_per_call", "overrides", "calls"),
    [
        # A second a call: the first phase of 10 outruns the 1.5 s budget; it
        # ends after slow_calls (5) calls a side, not 10.
        (1.0, {}, 5),
        (1.0, {"slow_calls": 8}, 8),
        # 0.2 s a call: the budget is spent after the eighth, within the first phase.
        (0.2, {}, 8),
        # Faster calls: the first phase is whole; the budget ends timing at the
        # end of the phase in which it ran out (0.04 s a call: after the 38th).
        (0.04, {}, 40),
        # Spent in the second phase: it ends at that phase's end, never within it.
        (0.07, {"budget_s": 0.8}, 20),
    ],
)
def test_a_first_phase_that_outruns_the_budget_ends_after_slow_calls(
    monkeypatch, seconds_per_call, overrides, calls
):
    fields = _clocked_calls(monkeypatch, overrides, seconds_per_call)
    assert len(fields["sub_ms"]) == len(fields["ref_ms"]) == calls


def test_a_slow_call_s_back_to_back_batch_is_two_calls(monkeypatch):
    # The batch is as many calls as take batch_ms (60) at the median, two at
    # least and 200 at most, with an untimed pass of as many before it.
    child = _fake_child(monkeypatch, {}, [], None)
    made = []

    def sub():
        made.append(1)
        return torch.zeros(1)

    cfg = TimingSettings()
    counts = {
        median: child._batch_warm("w", sub, {}, [median, median, median], cfg)
        for median in (1000.0, 40.0, 20.0, 13.0, 0.5, 0.01)
    }
    assert counts == {1000.0: 2, 40.0: 2, 20.0: 3, 13.0: 5, 0.5: 120, 0.01: 200}
    assert len(made) == sum(counts.values())  # the untimed pass made each one


def test_an_audit_call_s_inputs_are_written_on_the_stream_after_the_cover(monkeypatch):
    # The audit comes after the planned timed call. Until its cover is
    # queued, its input tensor holds the decoy seed's values; the real ones
    # are copied in after the cover and before the start event, so the
    # submission is called on tensors that hold them only in stream order.
    _stub_event_primitives(monkeypatch)
    made: dict[int, torch.Tensor] = {}

    def inputs(params, seed):
        made[seed] = torch.full((2,), float(seed))
        return [made[seed], 3]  # a tensor and a plain number

    at_flush, called = [], []
    flusher = _fake_flusher(
        flush=lambda: at_flush.append(made[77].tolist() if 77 in made else None),
    )

    def sub(x, k):
        called.append(x.tolist())
        return x * k

    sent: list = []
    cfg = {"phases": 1, "max_calls": 3, "budget_s": 60.0}
    child = _fake_child(
        monkeypatch,
        cfg,
        sent,
        lambda w, c, first: (sub, lambda x, k: x, {"sub": 1, "ref": 1}),
        audits=[(2, 77, 5)],
    )
    child.inputs = inputs

    assert child.time_workload(WORKLOAD, flusher)
    [(_, fields)] = sent
    [audit] = fields["audit_prints"]
    # Sampled from the output of the real inputs (77 * 3), not the decoy's.
    assert audit["seed"] == 77 and audit["fp"]["values"] == [231.0, 231.0]
    # The positions it is sampled at are drawn after it returned, and its ops were recorded.
    assert audit["sample_seed"] not in (77, 5) and "aten::mul" in audit["ops"]
    # Timed calls 1 and 2 (seeds 2 and 3), the audit, then timed call 3.
    assert called[:4] == [[2.0, 2.0], [3.0, 3.0], [77.0, 77.0], [4.0, 4.0]]
    assert at_flush[4] == [5.0, 5.0]  # the decoy when the audit's cover was queued


def test_audits_placed_after_the_last_call_the_budget_allowed_still_run(monkeypatch):
    cfg = {"phases": 2, "max_calls": 4, "budget_s": 0.0}
    fields = _time_stub_calls(monkeypatch, cfg, audits=[(1, 8, 9), (4, 6, 9)])
    assert len(fields["sub_ms"]) == 2
    assert [a["seed"] for a in fields["audit_prints"]] == [8, 6]


def _escape_child(monkeypatch, out: torch.Tensor, finish) -> tuple[Child, list]:
    """A child timing a submission that returns `out`; `finish` runs at the first device sync."""
    monkeypatch.setattr(timing, "timed_call", _stub_timed_call(lambda model, inputs: model()))
    sent: list = []
    cfg = {"phases": 1, "max_calls": 2, "budget_s": 60.0}
    models = (lambda: out, lambda: None, {"sub": 1, "ref": 1})
    child = _fake_child(monkeypatch, cfg, sent, lambda w, c, first: models)
    pending = [finish]
    child.sync = lambda: pending and pending.pop()()
    return child, sent


def test_an_output_that_changes_after_the_call_s_own_stream_is_escaped_work(monkeypatch):
    # Work left on another stream finishes when the device is synchronised:
    # one element of 100 000 changes, at none of the sampled positions. The
    # output's norm, queued right after the call, sees it.
    out = torch.ones(100_000)
    assert 12345 not in fingerprints.sample_positions(out.numel(), seed=2)
    child, sent = _escape_child(monkeypatch, out, lambda: out.__setitem__(12345, 2.0))
    assert child.time_workload(WORKLOAD, _fake_flusher())
    assert [event for event, _ in sent] == ["escaped", "timing"]
    assert sent[0][1] == {"workload": "w", "call": 1}


def test_an_output_finished_within_its_own_stream_is_not_escaped_work(monkeypatch):
    out = torch.ones(100_000)
    child, sent = _escape_child(monkeypatch, out, lambda: None)
    assert child.time_workload(WORKLOAD, _fake_flusher())
    assert [event for event, _ in sent] == ["timing"]


def test_a_thread_the_baseline_starts_is_not_the_submission_s(monkeypatch):
    # A baseline compiled with torch.compile starts a thread at its first compile,
    # in the middle of timing: background_thread is for the submission's threads.
    import threading

    from evaluator.harness import honesty

    stop = threading.Event()

    def baseline(*inputs):
        if not any(t.name == "d2k-test-baseline" for t in threading.enumerate()):
            threading.Thread(target=stop.wait, name="d2k-test-baseline", daemon=True).start()
        return torch.zeros(1)

    def submission(*inputs):
        return torch.zeros(1)

    monkeypatch.setattr(timing, "timed_call", _stub_timed_call(lambda model, inputs: model()))
    sent: list = []
    cfg = {"phases": 1, "max_calls": 2, "budget_s": 60.0}
    child = _fake_child(
        monkeypatch, cfg, sent, lambda w, c, first: (submission, baseline, {"sub": 1, "ref": 1})
    )
    child.threads = honesty.live_python_threads()
    try:
        assert child.time_workload(WORKLOAD, _fake_flusher())
        assert honesty.live_python_threads() - child.threads == set()
    finally:
        stop.set()

import pytest

from evaluator.harness import reports
from evaluator.harness.job import Plan, PlannedWorkload
from evaluator.harness.protocol import collect, expected_sequence

PLAN = Plan(
    workloads=(
        PlannedWorkload("a", {}, timed=True, hidden=False, seeds=(11, 12)),
        PlannedWorkload("b", {}, timed=False, hidden=False, seeds=(21, 22)),
    ),
    steps=(("check", "a"), ("check", "b"), ("time", "a")),
    seeds=2,
)


def honest_messages():
    msgs = []
    for event, name, tag in expected_sequence(PLAN):
        msg = {"event": event}
        if name:
            msg["workload"] = name
        if event == "output":
            index = int(tag.rstrip("r"))
            seed = PLAN.workload(name).seeds[index]
            msg.update(tag=tag, seed=seed, file=f"{name}.{tag}.out")
        msgs.append(msg)
    return [(float(i), m) for i, m in enumerate(msgs)]


def test_an_honest_sequence_is_accepted_without_flags():
    seen = collect(honest_messages(), PLAN)
    assert seen.done and seen.started and not seen.flags
    assert [m.tag for m in seen.outputs["a"]] == ["0", "0r", "1"]
    # batch_begin, batch_calls, batch_taken, batch_end one second apart: the copies'
    # second is the harness's, not the calls'.
    assert seen.batches["a"].host_ms == pytest.approx(2000.0)
    assert seen.batches["a"].take_ms == pytest.approx(1000.0)


def test_the_harness_s_copies_are_left_out_of_the_batch_s_host_time():
    stamps = {"batch_begin": 10.0, "batch_calls": 10.004, "batch_taken": 10.054, "batch_end": 10.06}
    msgs = [(stamps.get(m["event"], t), m) for t, m in honest_messages()]
    batch = collect(msgs, PLAN).batches["a"]
    assert batch.host_ms == pytest.approx(10.0) and batch.take_ms == pytest.approx(50.0)
    # Skipping the markers is a break in the sequence, not a free pass.
    forged = [(t, m) for t, m in msgs if m["event"] != "batch_taken"]
    flags = collect(forged, PLAN).flags
    assert flags and "expected 'batch_taken'" in flags[0]["detail"]


@pytest.mark.parametrize(
    ("forge", "fragment"),
    [
        (lambda m: [*m, (99.0, {"event": "done"})], "after the end"),
        (lambda m: [*m[:2], (2.0, {"event": "done"})], "expected 'output'"),
        (lambda m: [m[0], m[1], (2.0, {**m[2][1], "seed": 999}), *m[3:]], "seed"),
        (lambda m: [m[0], m[1], (2.0, {**m[2][1], "file": "../x.out"}), *m[3:]], "names the file"),
        (lambda m: [m[0], m[1], (2.0, {**m[2][1], "workload": "b"}), *m[3:]], "expected 'a'"),
        (
            lambda m: [*m[:-1], (50.0, {"event": "timing", "workload": "a"}), m[-1]],
            "expected 'done'",
        ),
    ],
)
def test_forged_or_out_of_order_messages_are_flagged(forge, fragment):
    seen = collect(forge(honest_messages()), PLAN)
    checks = [f for f in seen.flags if f["check"] == "result_channel"]
    assert checks and fragment in checks[0]["detail"]


def test_an_error_ends_the_sequence_and_is_kept():
    msgs = [*honest_messages()[:3], (3.0, {"event": "error", "kind": "runtime_error"})]
    seen = collect(msgs, PLAN)
    assert seen.error.kind == "runtime_error" and not seen.flags and not seen.done


@pytest.mark.parametrize(
    "kind", ["correct", "flagged", "incorrect", "timeout", "", "CORRECT", "rows 4099 cols 77"]
)
def test_an_error_of_a_kind_the_harness_never_sends_is_flagged_not_kept(kind):
    """The child's error says the evaluation failed; a verdict's word there is forged. The
    flag does not quote it: the owner reads flags, and it could carry a hidden shape."""
    msgs = [*honest_messages()[:3], (3.0, {"event": "error", "kind": kind, "message": "ok"})]
    seen = collect(msgs, PLAN)
    assert seen.error is None and not seen.done
    assert [f["check"] for f in seen.flags] == ["result_channel"]
    detail = seen.flags[0]["detail"]
    assert "never sends" in detail and "4099" not in detail and "correct" not in detail


def test_every_kind_the_child_can_send_is_one_the_parent_keeps():
    from evaluator.harness import channel

    sent = {channel.classify(exc) for exc in (SyntaxError("x"), MemoryError(), RuntimeError())}
    sent |= {channel.classify(RuntimeError(sign)) for sign in channel.MISSING_TOOLCHAIN}
    assert sent | {"worker_error"} == reports.CHILD_ERROR_KINDS


def test_malformed_lines_are_flagged():
    seen = collect(honest_messages(), PLAN, bad_messages=2)
    assert any("2 malformed" in f["detail"] for f in seen.flags)


def test_informational_events_become_flags_wherever_they_appear():
    msgs = honest_messages()
    msgs.insert(3, (2.5, {"event": "patched", "phase": "import", "names": ["time.perf_counter"]}))
    seen = collect(msgs, PLAN)
    assert seen.done
    assert seen.flags == [
        {"check": "monkeypatch", "detail": "changed during import: time.perf_counter"}
    ]


def test_an_output_message_is_parsed_once_into_what_the_judge_reads():
    honest = {
        "event": "output",
        "workload": "a",
        "seed": 11,
        "tag": "0",
        "file": "a.0.out",
        "ops": ["aten::empty", 3],
        "kernels": [],
        "mutated_inputs": [],
        "layouts": [{"shape": [4], "dtype": "torch.float32", "strides": [1], "aliases": []}],
        "host_ms": 2.5,
    }
    report = reports.parse_output(honest)
    assert report.mutated_inputs == () and report.ops == ("aten::empty",)
    assert report.layouts == (reports.OutputLayout((4,), "torch.float32", (1,), ()),)
    assert report.host_ms == 2.5
    forged = reports.parse_output({**honest, "mutated_inputs": [0], "host_ms": "slow"})
    assert forged.mutated_inputs == (0,) and forged.host_ms is None
    assert reports.parse_output({**honest, "layouts": "none"}).layouts is None


def test_a_number_past_any_float_is_malformed_not_a_crash():
    timing = reports.parse_timing({"sub_ms": [10**400], "cover_us": {"sub": 10**400, "ref": 1}})
    assert timing.sub_ms is None and timing.malformed == {"cover_us"}
    assert reports.parse_batch({"calls": 3, "event_ms": 10**400}, host_ms=1.0).event_ms is None

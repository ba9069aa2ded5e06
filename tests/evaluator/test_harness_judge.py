"""The parent's judgement of timed calls and of the whole run, on synthetic observations.

These are the checks that only fire in cuda mode on a GPU; here they are fed
the same messages a child sends, parsed at the same boundary as the child's
(reports.py), with outputs computed on the CPU.
"""

import dataclasses

import pytest
import torch

from evaluator.harness import judge as judge_module
from evaluator.harness import kernelchecks, reports, timingchecks
from evaluator.harness.decision import decide
from evaluator.harness.fingerprints import AUDIT_SAMPLES, FINGERPRINT_SAMPLES, fingerprint
from evaluator.harness.job import Plan, PlannedWorkload
from evaluator.harness.protocol import Observed
from evaluator.harness.reference import ReferenceOutputs
from evaluator.harness.sandbox import ChildRun
from evaluator.harness.verdict import Status, WorkloadOutcome
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Mode, WorkloadRole

TASK = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
SPEC = dataclasses.replace(TASK.workloads_for(Mode.INTERPRET)[0], bytes=1e9, flops=0.0)
MODEL_SEED, FP_SEED = 11, 7
CEILINGS = {"ceilings": {"peak_tflops_bf16": 700.0, "peak_tbps": 4.0}}  # floor: 0.25 ms


@pytest.fixture(scope="module")
def reference():
    return ReferenceOutputs(TASK, Mode.INTERPRET)


def prints_for(reference, seeds, *, answer_seed=None, samples=FINGERPRINT_SAMPLES):
    """Fingerprints of honest outputs (or of another seed's output, for a stale kernel)."""
    out = []
    for seed in seeds:
        expected = reference.outputs(SPEC.params, answer_seed or seed, MODEL_SEED)
        fp = fingerprint(expected, seed=FP_SEED, samples=samples)
        out.append({"seed": seed, "sample_seed": FP_SEED, "fp": fp})
    return out


def entry_for(spec=SPEC, audit_seeds=()):
    """What the parent issued for the workload (protocol.Dealer.record)."""
    return PlannedWorkload(
        name=spec.name,
        params=spec.params,
        timed=True,
        hidden=False,
        seeds=(MODEL_SEED,),
        model_seed=MODEL_SEED,
        calls=(*range(100, 105), *range(200, 202)),
        samples=(FP_SEED,),
        audits=tuple(audit_seeds),
    )


class Sent:
    """The messages a child sent for the workload, as raw JSON objects, before the parse."""

    def __init__(self, timing, batch, output):
        self.timing, self.batch, self.output = timing, batch, output

    def observed(self):
        """What the parent reads of them: each parsed at the boundary, as protocol.collect does."""
        seen = Observed()
        seen.timings[SPEC.name] = reports.parse_timing(self.timing)
        host_ms = self.batch.pop("host_ms")  # the parent's own clock, not the child's
        seen.batches[SPEC.name] = reports.parse_batch(self.batch, host_ms=host_ms)
        seen.outputs[SPEC.name] = [reports.parse_output(self.output)]
        return seen


def observe(reference, *, median=1.0, batch=None, stale=False, sent=False):
    answer = 999 if stale else None
    timing = {
        "event": "timing",
        "workload": SPEC.name,
        "sub_ms": [median] * 20,
        "ref_ms": [2.0 * median] * 20,
        "prints": prints_for(reference, range(100, 105), answer_seed=answer),
        "batch_prints": prints_for(reference, range(200, 202), answer_seed=answer),
    }
    batch = dict(batch or {"calls": 10, "event_ms": 10.0 * median, "host_ms": 10.0 * median + 2})
    output = {"workload": SPEC.name, "seed": 0, "tag": "0", "file": "", "host_ms": 55.0}
    messages = Sent(timing, {"event": "batch_end", "workload": SPEC.name, **batch}, output)
    return messages if sent else messages.observed()


def run_judge(reference, seen, spec=SPEC):
    return timingchecks.judge_timing(TASK, spec, entry_for(spec), seen, reference, set(), CEILINGS)


def checks(seen):
    return sorted({f["check"] for f in seen.flags})


def test_the_launch_covers_and_host_bound_calls_reach_the_measurement(reference):
    sent = observe(reference, sent=True)
    sent.timing |= {
        "cover_us": {"sub": 450.0, "ref": 200.0},
        "host_bound": {"sub": 3, "ref": 0},
    }
    seen = sent.observed()
    measurement, _, failure = run_judge(reference, seen)
    assert failure == "" and seen.flags == []
    assert (measurement.cover_us, measurement.ref_cover_us) == (450.0, 200.0)
    assert (measurement.host_bound_calls, measurement.ref_host_bound_calls) == (3, 0)


def test_honest_timed_calls_give_a_measurement_and_no_flag(reference):
    seen = observe(reference)
    measurement, extra, failure = run_judge(reference, seen)
    assert failure == "" and seen.flags == []
    assert measurement.speedup == pytest.approx(2.0)
    assert measurement.cold_start_ms == 55.0
    assert measurement.back_to_back_ms == pytest.approx(1.0)
    assert extra["sol_fraction"] == pytest.approx(0.25)


def test_stale_outputs_of_timed_calls_make_the_workload_incorrect(reference):
    _, _, failure = run_judge(reference, observe(reference, stale=True))
    assert "differs from the reference" in failure


def test_host_clock_far_beyond_the_events_is_escaped_work(reference):
    seen = observe(reference, batch={"calls": 10, "event_ms": 10.0, "host_ms": 200.0})
    run_judge(reference, seen)
    assert "escaped_work" in checks(seen)


def test_a_median_far_below_what_the_host_clock_saw_waits_for_the_kernels_durations(reference):
    # Reported median 1 ms, but the orchestrator's clock saw 10 ms per call:
    # shrunk times, or a host-bound call; ncu's durations settle which.
    seen = observe(reference, batch={"calls": 10, "event_ms": 100.0, "host_ms": 105.0})
    run_judge(reference, seen)
    assert seen.flags == []
    assert seen.host_clock == [
        {"workload": SPEC.name, "host_ms_per_call": pytest.approx(10.0), "median_ms": 1.0}
    ]


def test_launch_bound_small_kernels_are_not_flagged(reference):
    seen = observe(reference, median=0.01, batch={"calls": 100, "event_ms": 5.0, "host_ms": 8.0})
    run_judge(reference, seen, spec=dataclasses.replace(SPEC, bytes=1e7))  # floor 2.5 us
    assert seen.flags == [] and seen.host_clock == []


def test_a_time_below_the_speed_of_light_floor_is_flagged(reference):
    seen = observe(reference)
    run_judge(reference, seen, spec=dataclasses.replace(SPEC, bytes=1e10))  # floor 2.5 ms
    assert "faster_than_light" in checks(seen)


# 1e12 FLOPs in 1 ms: 1000 TFLOP/s, above the bf16 ceiling, 50 % of the fp8 one.
FP8_CEILINGS = {
    "ceilings": {"peak_tflops_bf16": 700.0, "peak_tflops_fp8": 2000.0, "peak_tbps": 4.0}
}
GEMM_SPEC = dataclasses.replace(SPEC, flops=1e12, bytes=1e8)


def judge_with(reference, spec, ceilings):
    seen = observe(reference)
    _, extra, _ = timingchecks.judge_timing(
        TASK, spec, entry_for(spec), seen, reference, set(), ceilings
    )
    return seen, extra


def test_an_fp8_workload_counts_its_flops_at_the_fp8_ceiling(reference):
    seen, extra = judge_with(
        reference, dataclasses.replace(GEMM_SPEC, compute_dtype="fp8"), FP8_CEILINGS
    )
    assert seen.flags == []
    assert extra["sol_fraction"] == pytest.approx(0.5)


def test_a_bf16_workload_at_the_same_rate_is_faster_than_light(reference):
    seen, extra = judge_with(reference, GEMM_SPEC, FP8_CEILINGS)
    assert "faster_than_light" in checks(seen)
    assert extra["sol_fraction"] == pytest.approx(1e12 / 700e12 / 1e-3)


def test_without_its_units_ceiling_an_fp8_workload_has_no_sol_but_keeps_the_bytes_floor(
    reference,
):
    fp8 = dataclasses.replace(GEMM_SPEC, compute_dtype="fp8")
    seen, extra = judge_with(reference, fp8, CEILINGS)
    assert seen.flags == [] and "sol_fraction" not in extra
    assert extra["achieved_tflops"] == pytest.approx(1000.0)

    seen, _ = judge_with(reference, dataclasses.replace(fp8, bytes=1e10), CEILINGS)
    assert "faster_than_light" in checks(seen)  # 2.5 ms of bytes in 1 ms


def test_in_interpret_mode_there_is_no_ceiling_and_no_speed_of_light(reference):
    seen, extra = judge_with(reference, dataclasses.replace(GEMM_SPEC, compute_dtype="fp8"), {})
    assert seen.flags == [] and extra == {}


def audited_judge(reference, audit_prints, planned_seeds=(300, 301)):
    sent = observe(reference, sent=True)
    sent.timing["audit_prints"] = audit_prints
    seen = sent.observed()
    entry = entry_for(audit_seeds=planned_seeds)
    return seen, timingchecks.judge_timing(TASK, SPEC, entry, seen, reference, set(), CEILINGS)


def test_audit_calls_that_read_their_own_inputs_pass(reference):
    audited = prints_for(reference, (300, 301), samples=AUDIT_SAMPLES)
    seen, (measurement, _, failure) = audited_judge(reference, audited)
    assert failure == "" and seen.flags == [] and measurement.speedup == pytest.approx(2.0)


def test_an_audit_call_that_read_the_decoy_inputs_makes_the_workload_incorrect(reference):
    # Case 4b under an audit: the part run ahead on its own stream read the
    # inputs the call's tensors held before the cover (another seed's).
    honest = prints_for(reference, (300,), samples=AUDIT_SAMPLES)
    ahead = prints_for(reference, (301,), answer_seed=1, samples=AUDIT_SAMPLES)
    seen, (_, _, failure) = audited_judge(reference, honest + ahead)
    assert failure == timingchecks.AUDIT_FAILURE and seen.flags == []


@pytest.mark.parametrize(
    "audit_prints",
    [
        [],
        [
            {"seed": 301, "sample_seed": FP_SEED, "fp": []},
            {"seed": 300, "sample_seed": FP_SEED, "fp": []},
        ],
        "skipped",
    ],
    ids=["missing", "out of order", "not a list"],
)
def test_audit_calls_not_made_as_planned_are_a_malformed_report(reference, audit_prints):
    seen, (measurement, _, failure) = audited_judge(reference, audit_prints)
    assert measurement is None and "malformed" in failure
    assert checks(seen) == ["result_channel"]


def result(status):
    return WorkloadOutcome(
        name="w", role=WorkloadRole.CHECK, hidden=False, status=status, message="why"
    )


def seen_with(**fields):
    seen = Observed(started=True, ready=True, done=True)
    for key, value in fields.items():
        setattr(seen, key, value)
    return seen


@pytest.mark.parametrize(
    ("run", "seen", "results", "status"),
    [
        (
            ChildRun(returncode=-9, killed_for="timeout"),
            seen_with(flags=[{"check": "monkeypatch"}]),
            [],
            Status.FLAGGED,
        ),
        (ChildRun(returncode=-9, killed_for="timeout"), seen_with(), [], Status.TIMEOUT),
        (ChildRun(returncode=-9, killed_for="memory"), seen_with(), [], Status.OUT_OF_MEMORY),
        (ChildRun(returncode=1), seen_with(started=False), [], Status.WORKER_ERROR),
        (
            ChildRun(returncode=0),
            seen_with(flags=[{"check": "forbidden_op", "detail": ""}]),
            [result(Status.CORRECT)],
            Status.FLAGGED,
        ),
        (
            ChildRun(returncode=0),
            seen_with(done=False, error=reports.parse_error({"kind": "compile_error"})),
            [],
            Status.COMPILE_ERROR,
        ),
        (
            ChildRun(returncode=139, isolation="bwrap"),
            seen_with(done=False),
            [],
            Status.RUNTIME_ERROR,
        ),
        (ChildRun(returncode=0), seen_with(), [result(Status.INCORRECT)], Status.INCORRECT),
        (ChildRun(returncode=0), seen_with(), [], Status.WORKER_ERROR),
        (ChildRun(returncode=0), seen_with(), [result(Status.CORRECT)], Status.CORRECT),
    ],
)
def test_one_status_in_order_of_precedence(run, seen, results, status):
    assert decide(run, seen, results, expected=1, task=TASK)[0] is status


def test_a_flagged_kernel_that_was_killed_says_so():
    run = ChildRun(returncode=-9, killed_for="timeout", wall_seconds=60.0)
    _, message = decide(run, seen_with(flags=[{"check": "monkeypatch"}]), [], 1, task=TASK)
    assert message == "honesty check fired: monkeypatch (then killed after the 60 s time limit)"


def test_a_child_ended_by_the_wall_time_cap_is_told_apart_from_one_that_ran_its_limit():
    run = ChildRun(
        returncode=-9,
        killed_for="timeout",
        wall_seconds=1200.0,
        cpu_wait_seconds=700.0,
        wall_capped=True,
    )
    _, message = decide(run, seen_with(done=False), [], 1, task=TASK)
    assert message == (
        "killed after 1200 s of wall time, the most an evaluation may take on a busy host "
        "(700 s of it waiting for a CPU)"
    )


def test_a_crash_under_bubblewrap_names_its_signal():
    run = ChildRun(returncode=139, isolation="bwrap")
    _, message = decide(run, seen_with(done=False), [], 1, task=TASK)
    assert "signal 11" in message


@pytest.mark.parametrize(
    "forged",
    [
        {"sub_ms": ["fast"]},
        {"sub_ms": [float("nan")] * 20},
        {"ref_ms": "2.0"},
        {"sub_ms": []},
        {"prints": [{"seed": "one", "fp": []}]},
        {"batch_prints": 7},
        {"cover_us": {"sub": "long", "ref": 200.0}},
        {"host_bound": {"sub": -1, "ref": 0}},
        {"host_bound": [0, 0]},
        "batch with no calls",
        "cold start not a number",
    ],
)
def test_a_malformed_timing_report_is_flagged_not_a_crash(reference, forged):
    # The report comes from the child, where the submission runs: a forged
    # one is evidence, and must not take the orchestrator down.
    sent = observe(reference, sent=True)
    if forged == "batch with no calls":
        sent.batch["calls"], forged = 0, {}
    if forged == "cold start not a number":
        sent.output["host_ms"], forged = "slow", {}
    sent.timing.update(forged)
    seen = sent.observed()
    measurement, _, failure = run_judge(reference, seen)
    assert measurement is None and "malformed" in failure
    assert checks(seen) == ["result_channel"]


def test_a_sampled_call_whose_seed_the_parent_never_issued_is_a_malformed_report(reference):
    # A child that reports an easy seed of its own choosing (or one call twice).
    sent = observe(reference, sent=True)
    sent.timing["prints"][0]["seed"] = 12345
    seen = sent.observed()
    measurement, _, failure = run_judge(reference, seen)
    assert measurement is None and "malformed" in failure
    assert "seeds" in seen.flags[0]["detail"]


def test_ops_beyond_glue_are_flagged_by_name_forbidden_ones_as_forbidden_op():
    seen = Observed()
    glue = ["aten::empty_like", "aten::view", "aten::copy_", "aten::_to_copy", "aten::fill_"]
    kernelchecks.judge_ops(TASK, SPEC, glue, seen)
    assert seen.flags == []
    kernelchecks.judge_ops(TASK, SPEC, [*glue, "aten::exp", "aten::_softmax", "aten::sum"], seen)
    assert checks(seen) == ["compute_op", "forbidden_op"]
    details = {f["check"]: f["detail"] for f in seen.flags}
    assert "aten::exp, aten::sum" in details["compute_op"]
    assert "aten::_softmax" in details["forbidden_op"]
    allowing = dataclasses.replace(TASK, allowed_ops=("aten::exp", "aten::sum"))
    seen = Observed()
    kernelchecks.judge_ops(allowing, SPEC, ["aten::exp", "aten::sum"], seen)
    assert seen.flags == []


def test_pinning_a_pointer_table_is_not_a_compute_op():
    # What fused_adamw's expert does on a GPU, every call: its table of
    # tensor addresses, pinned in host memory and copied to the device without
    # waiting. Flagged compute_op on the H200 before pinning counted as glue.
    adamw = load_task(DEFAULT_CATALOG_DIR / "fused_adamw")
    ops = ["aten::lift_fresh", "aten::pin_memory", "aten::_pin_memory", "aten::is_pinned"]
    seen = Observed()
    kernelchecks.judge_ops(adamw, adamw.workloads[0], [*ops, "aten::_to_copy", "aten::copy_"], seen)
    assert seen.flags == []


def test_only_kernels_the_submission_compiled_or_glue_may_run():
    source = (
        "@triton.jit\ndef _softmax_single_pass(x): ...\n"
        'CUDA = """__global__ void d2k_rows(const float* x) {}"""\n'
        "# sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1\n"
        "triton_poi_fused_exp_sub_0 = 'named, never declared'\n"
    )
    own = kernelchecks.own_kernel_names(source)
    kernels = [
        "_softmax_single_pass",
        "void d2k_rows<float>(float const*, float*, long)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)",
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>()",
        "Memcpy DtoD (Device -> Device)",
        "d2k_cover",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
        "triton_poi_fused_exp_sub_0",
    ]
    assert kernelchecks.kernel_base_name(kernels[1]) == "d2k_rows"
    assert kernelchecks.library_kernels(kernels, own) == [kernels[6], kernels[7]]
    seen = Observed()
    kernelchecks.judge_kernels(SPEC, kernels, own, seen)
    assert checks(seen) == ["library_kernel"] and "sm90_xmma_gemm" in seen.flags[0]["detail"]


OWN_AND_NAMED = '''
"""Runs sm90_xmma_gemm_bf16 underneath."""
import triton


@triton.autotune(configs=[], key=[])
@triton.jit
def tuned(x): ...


def helper(): ...


SRC = r"""
// __global__ void cutlass_commented(float* x)
template <int T> __global__ void __launch_bounds__(256) d2k_hist(int* h) {}
"""
'''


def test_a_kernel_is_own_only_where_the_submission_declares_it():
    # A library kernel's name in a comment, a docstring, a variable or a
    # commented-out line of CUDA declares nothing; a Triton JIT function
    # (under autotune too) and a __global__ in a compiled string do.
    assert kernelchecks.own_kernel_names(OWN_AND_NAMED) == {"tuned", "d2k_hist"}
    assert kernelchecks.own_kernel_names("def broken(:") == set()


def test_a_call_whose_every_kernel_is_glue_did_the_task_in_glue():
    glue = [
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>()",
        "d2k_cover",
    ]
    seen = Observed()
    kernelchecks.judge_glue(SPEC, glue, {"_transpose_tile"}, seen)
    assert checks(seen) == ["glue_work"]
    seen = Observed()
    kernelchecks.judge_glue(SPEC, [*glue, "_transpose_tile"], {"_transpose_tile"}, seen)
    assert seen.flags == []
    seen = Observed()
    kernelchecks.judge_glue(SPEC, ["d2k_cover"], set(), seen)
    assert seen.flags == []
    # Library kernels are library_kernel's business, not glue's.
    seen = Observed()
    kernelchecks.judge_kernels(SPEC, glue, {"_transpose_tile"}, seen)
    assert seen.flags == []


def layout_problem(layouts, expected, *, inplace):
    """The judge's reading of the layouts a child sent, parsed as protocol.collect parses them."""
    return judge_module.layout_problem(reports.parse_layouts(layouts), expected, inplace=inplace)


def _reference_layout(shape=(4, 6), strides=None, aliases=()):
    return {
        "shape": list(shape),
        "dtype": "torch.float32",
        "device": "cpu",
        "strides": list(strides or torch.empty(shape).stride()),
        "aliases": list(aliases),
    }


def test_an_output_must_have_the_reference_s_layout_and_memory_of_its_own():
    expected = (torch.empty(4, 6),)
    assert layout_problem([_reference_layout()], expected, inplace=False) == ""
    transposed = layout_problem([_reference_layout(strides=(1, 4))], expected, inplace=False)
    assert "strides (1, 4)" in transposed and "(6, 1)" in transposed
    view = layout_problem([_reference_layout(aliases=(0,))], expected, inplace=False)
    assert "shares memory with input 0" in view
    # A task that works in place returns its inputs.
    assert layout_problem([_reference_layout(aliases=(0,))], expected, inplace=True) == ""
    # A dimension of size one may have any stride.
    single = (torch.empty(1, 6),)
    assert (
        layout_problem([_reference_layout((1, 6), strides=(999, 1))], single, inplace=False) == ""
    )
    assert "returned 0 outputs" in layout_problem(None, expected, inplace=False)


def test_a_row_major_output_stands_beside_a_reference_that_returns_a_permuted_view():
    # An attention reference that returns (B, S, H, D) memory seen as (B, H, S, D):
    # the natural row-major (B, H, S, D) result is a plain copy for the harness.
    expected = (torch.empty(2, 4, 8, 3).transpose(1, 2),)
    shape = (2, 8, 4, 3)
    row_major = _reference_layout(shape)
    assert layout_problem([row_major], expected, inplace=False) == ""
    as_reference = _reference_layout(shape, strides=expected[0].stride())
    assert layout_problem([as_reference], expected, inplace=False) == ""
    # Any other layout leaves work to the harness's copy: a transposed view of a
    # row-major result, an expanded one.
    other = _reference_layout(shape, strides=(96, 12, 1, 4))
    assert "row-major tensor or one in the reference's layout" in layout_problem(
        [other], expected, inplace=False
    )
    expanded = _reference_layout(shape, strides=(0, 12, 3, 1))
    assert layout_problem([expanded], expected, inplace=False) != ""


def _written_calls(reference, workdir, *, wrong_tag=None, misplaced_tag=None):
    """Observed output reports of every seed of SPEC (and the repeated call), each with the
    file the child writes (outputs.write_raw): the reference's answer, or a wrong one."""
    from evaluator.harness.outputs import write_raw

    (workdir / "out").mkdir(parents=True)
    seen = Observed()
    calls = []
    for index in range(TASK.seeds + 1):
        for tag in (str(index), f"{index}r") if index == 0 else (str(index),):
            seed = 300 + index
            expected = reference.outputs(SPEC.params, seed, seed)
            copies = tuple(t.clone() for t in expected)
            if tag == wrong_tag:
                copies = tuple(t + 1 for t in copies)
            file = f"{SPEC.name}.{tag}.out"
            digest = write_raw(copies, workdir / "out" / file)
            strides = (1, *copies[0].shape[:1]) if tag == misplaced_tag else None
            layout = _reference_layout(copies[0].shape, strides=strides)
            layout["dtype"] = str(copies[0].dtype)
            message = {"workload": SPEC.name, "seed": seed, "tag": tag, "file": file}
            message["sha256"] = digest
            calls.append(reports.parse_output(message | {"layouts": [layout]}))
    seen.outputs[SPEC.name] = calls
    entry = dataclasses.replace(entry_for(), timed=False)
    return seen, Plan(workloads=(entry,), steps=(), seeds=len(calls))


def test_the_judge_gives_each_output_file_back_once_it_is_read(reference, tmp_path):
    seen, plan = _written_calls(reference, tmp_path)
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(files) == len(seen.outputs[SPEC.name]) >= 2
    [outcome] = judge_module.judge(TASK, Mode.INTERPRET, plan, seen, tmp_path, {})
    assert outcome.status is Status.CORRECT, outcome.message
    assert list((tmp_path / "out").iterdir()) == []


def test_a_wrong_or_misplaced_output_s_file_goes_too_and_the_verdict_stands(reference, tmp_path):
    seen, plan = _written_calls(reference, tmp_path, wrong_tag="1")
    [outcome] = judge_module.judge(TASK, Mode.INTERPRET, plan, seen, tmp_path, {})
    assert outcome.status is Status.INCORRECT and "outside atol" in outcome.message
    assert list((tmp_path / "out").iterdir()) == []
    seen, plan = _written_calls(reference, tmp_path / "again", misplaced_tag="0r")
    [outcome] = judge_module.judge(TASK, Mode.INTERPRET, plan, seen, tmp_path / "again", {})
    assert outcome.status is Status.INCORRECT and "strides" in outcome.message
    assert list((tmp_path / "again" / "out").iterdir()) == []


def test_outputs_kept_for_a_look_stay_where_the_child_wrote_them(reference, tmp_path):
    seen, plan = _written_calls(reference, tmp_path)
    before = sorted(p.name for p in (tmp_path / "out").iterdir())
    [outcome] = judge_module.judge(
        TASK, Mode.INTERPRET, plan, seen, tmp_path, {}, keep_outputs=True
    )
    assert outcome.status is Status.CORRECT
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == before


def test_a_file_changed_after_the_child_saved_it_is_tampering_not_an_output(reference, tmp_path):
    # The scratch folder is the submission's to write: a later call could put the right
    # answer over a wrong one. The file must still have the digest the child sent.
    seen, plan = _written_calls(reference, tmp_path)
    first = tmp_path / "out" / seen.outputs[SPEC.name][0].file
    head, _, body = first.read_bytes().partition(b"\n")
    first.write_bytes(head + b"\n" + bytes(len(body)))
    [outcome] = judge_module.judge(TASK, Mode.INTERPRET, plan, seen, tmp_path, {})
    assert outcome.status is Status.INCORRECT
    assert [f["check"] for f in seen.flags] == ["harness_tampering"]
    assert "changed after the harness saved it" in seen.flags[0]["detail"]
    # A message without the digest (not the harness's) reads no file either.
    seen, plan = _written_calls(reference, tmp_path / "again")
    seen.outputs[SPEC.name][0] = dataclasses.replace(seen.outputs[SPEC.name][0], sha256="")
    [outcome] = judge_module.judge(TASK, Mode.INTERPRET, plan, seen, tmp_path / "again", {})
    assert [f["check"] for f in seen.flags] == ["harness_tampering"]


@pytest.mark.parametrize("planted", ["file", "folder"])
def test_a_link_planted_for_an_output_is_never_followed(reference, tmp_path, planted):
    # The parent resolves the path on the host: a link to /dev/zero would read forever, one
    # to a host file would read what the sandbox never held.
    seen, plan = _written_calls(reference, tmp_path)
    out = tmp_path / "out"
    first = out / seen.outputs[SPEC.name][0].file
    if planted == "file":
        first.unlink()
        first.symlink_to("/dev/zero")
    else:
        out.rename(tmp_path / "moved")
        out.symlink_to(tmp_path / "moved")
    [outcome] = judge_module.judge(TASK, Mode.INTERPRET, plan, seen, tmp_path, {})
    assert outcome.status is Status.INCORRECT
    assert {f["check"] for f in seen.flags} == {"harness_tampering"}


def test_the_child_saves_a_file_of_its_own_whatever_was_planted_at_its_path(tmp_path):
    from evaluator.harness.outputs import read_raw, write_raw

    target = tmp_path / "planted"
    target.write_bytes(b"the submission's")
    path = tmp_path / "call.out"
    path.symlink_to(target)
    digest = write_raw((torch.arange(6.0),), path)
    assert not path.is_symlink() and target.read_bytes() == b"the submission's"
    assert torch.equal(read_raw(path, torch.device("cpu"), sha256=digest)[0], torch.arange(6.0))

"""The child's messages in cuda mode follow exactly the protocol the parent enforces.

The parent flags any deviation as result_channel, so a mismatch between what
child.py sends and what protocol.py expects would flag every honest kernel on
a GPU (it did once: batch messages without their workload). This test runs
the child's whole cuda-mode flow, timing included, on the CPU with CUDA's
timing calls faked, and feeds its messages to the parent's reader.
"""

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from evaluator.exploits.cases import KERNELS_DIR
from evaluator.harness import judge, launch, orchestrate, protocol, resultpipe, sandbox
from evaluator.harness.compare import fingerprint_matches
from evaluator.harness.fingerprints import AUDIT_SAMPLES, FINGERPRINT_SAMPLES
from evaluator.harness.job import Plan
from evaluator.harness.reference import ReferenceOutputs
from evaluator.harness.reports import CallPrint
from evaluator.harness.timing import LAUNCH_COVER_US, MAX_COVER_US
from evaluator.harness.verdict import Status
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Mode, TaskSpec
from tests.evaluator import test_harness_baseline

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


class FakeCudaRun(NamedTuple):
    task: TaskSpec
    plan: Plan
    seen: protocol.Observed
    log: str
    run: sandbox.ChildRun


def run_child_with_fake_cuda(
    tmp_path,
    slug: str,
    submission: Path | None,
    baseline: Path | None = None,
    clean: bool = False,
    task: TaskSpec | None = None,
    **timing,
) -> FakeCudaRun:
    """The child's cuda-mode flow over two check workloads (of `task`, else the catalog's).

    The parent's side is the orchestrator's own: a Dealer answers the
    child's requests through the sandbox's reader, and `plan` is its record.
    """
    task = task or load_task(DEFAULT_CATALOG_DIR / slug)
    checks = task.workloads_for(Mode.INTERPRET)[:2]
    settings = orchestrate.timing_settings(
        {"warmup_s": 0.0, "max_calls": 4, "budget_s": 0.1, "batch_ms": 1.0, **timing}
    )
    # The check workloads, timed as cuda mode times its timed ones.
    planned = tuple(
        dataclasses.replace(w, timed=True) for w in launch.planned_workloads(checks, Mode.INTERPRET)
    )
    dealer = launch.dealer_for(task, planned, settings, clean=clean)
    job = launch.child_job(
        task=task,
        mode=Mode.CUDA,
        settings=settings,
        task_dir=str(DEFAULT_CATALOG_DIR / slug),
        out_dir=str(tmp_path / "out"),
        submission=str(submission or ""),
        baseline=str(baseline or ""),
        device="cpu",
    )
    assert job.clean is clean
    (tmp_path / "job.json").write_text(json.dumps(dataclasses.asdict(job)))
    read_fd, write_fd = os.pipe()
    child_reply_fd, reply_fd = os.pipe()
    bootstrap = (
        "import sys; sys.path[:0] = [sys.argv[4], sys.argv[5]]; import cuda_fakes; "
        "cuda_fakes.install(); from evaluator.harness.child import main; main()"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            bootstrap,
            str(tmp_path / "job.json"),
            str(write_fd),
            str(child_reply_fd),
            str(ROOT),
            str(Path(__file__).parent),
        ],
        pass_fds=(write_fd, child_reply_fd),
        env={**os.environ, "TRITON_INTERPRET": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    os.close(write_fd)
    os.close(child_reply_fd)
    run = sandbox.ChildRun(returncode=None)
    reader = resultpipe.Reader(read_fd, run, dealer.answer, reply_fd)
    reader.start()
    log = proc.communicate(timeout=600)[0].decode(errors="replace")
    reader.join(timeout=30)
    os.close(reply_fd)
    plan = dealer.record()
    seen = protocol.collect(run.messages, plan, run.bad_messages)
    seen.flags += [protocol.flag("result_channel", problem) for problem in dealer.problems]
    return FakeCudaRun(task, plan, seen, log, run)


def test_cuda_mode_messages_satisfy_the_parent_protocol(tmp_path):
    expert = DEFAULT_CATALOG_DIR / "row_softmax" / "expert.py"
    task, _, seen, log, _ = run_child_with_fake_cuda(tmp_path, "row_softmax", expert)
    checks = task.workloads_for(Mode.INTERPRET)[:2]
    assert seen.flags == [], (seen.flags, log[-3000:])
    assert seen.done and seen.error is None
    assert set(seen.timings) == set(seen.batches) == {w.name for w in checks}
    for name, timing in seen.timings.items():
        assert timing.sub_ms and timing.ref_ms and timing.prints and not timing.malformed
        assert seen.batches[name].calls >= 2
        # Each side's cover, sized from its warm-up, and its host-bound calls.
        assert timing.cover_us is not None and timing.host_bound is not None
        for who in ("sub", "ref"):
            assert LAUNCH_COVER_US <= getattr(timing.cover_us, who) <= MAX_COVER_US
            assert 0 <= getattr(timing.host_bound, who) <= len(getattr(timing, f"{who}_ms"))


def test_timed_outputs_of_an_in_place_task_match_the_reference(tmp_path):
    # On the H200 the rotary expert (in place) once came back incorrect: the
    # batch's untimed warm-up pass rotated the inputs that the timed pass then
    # rotated again. Every timed, batch and audit output must match its own inputs.
    expert = DEFAULT_CATALOG_DIR / "rotary_embedding" / "expert.py"
    task, plan, seen, log, _ = run_child_with_fake_cuda(tmp_path, "rotary_embedding", expert)
    assert task.inplace
    assert seen.flags == [] and seen.done, (seen.flags, log[-3000:])
    reference = ReferenceOutputs(task, Mode.INTERPRET)
    for entry in plan.workloads:
        timing = seen.timings[entry.name]
        params = entry.params
        assert [a.seed for a in timing.audit_prints] == list(entry.audits)
        assert len(entry.audits) == 4
        timed = timing.prints + timing.batch_prints
        sampled = [(item, FINGERPRINT_SAMPLES) for item in timed]
        sampled += [(item, AUDIT_SAMPLES) for item in timing.audit_prints]
        for item, samples in sampled:
            expected = reference.outputs(params, item.seed, entry.model_seed)
            fp_seed = item.sample_seed
            assert fp_seed in entry.samples
            assert fingerprint_matches(item.fp, expected, fp_seed, task, samples)


def test_a_patched_elapsed_time_cannot_bend_the_harness_clock(tmp_path):
    # Exploit 17 sets torch.cuda.Event.elapsed_time to return 1e-6 ms. On the
    # H200 that once made the launch-cover calibration spin for minutes (a
    # timeout, not a flag). The harness times through the primitives it took
    # before the import, and checks the guarded namespaces around every call:
    # the patch is flagged at the first call, whose result is not read, and
    # no figure is reported from the patched process.
    kernel = KERNELS_DIR / "17_elapsed_time_near_zero.py"
    _, _, seen, log, _ = run_child_with_fake_cuda(tmp_path, "row_softmax", kernel)
    assert {f["check"] for f in seen.flags} == {"monkeypatch"}, log[-3000:]
    assert "torch.cuda.Event.elapsed_time" in seen.flags[0]["detail"]
    assert seen.error is None and not seen.outputs and not seen.timings


def test_with_a_baseline_the_submission_is_timed_against_it(tmp_path):
    # Correctness stays against reference.py (judged in the parent); the
    # timed "reference" side is baseline.py's Model, on reference.py's inputs.
    baseline = tmp_path / "baseline.py"
    baseline.write_text(test_harness_baseline.BASELINE)
    expert = DEFAULT_CATALOG_DIR / "row_softmax" / "expert.py"
    _, _, seen, log, _ = run_child_with_fake_cuda(tmp_path, "row_softmax", expert, baseline)
    assert seen.flags == [] and seen.done, (seen.flags, log[-3000:])
    assert "D2K-BASELINE-CALLED" in log
    assert all(timing.ref_ms for timing in seen.timings.values())


def test_a_clean_run_times_the_reference_alone_and_never_imports_a_submission(tmp_path):
    # The clean run behind reference_tampering: no submission file at all,
    # the reference timed with the same protocol, one report per workload.
    _, plan, seen, log, _ = run_child_with_fake_cuda(tmp_path, "row_softmax", None, clean=True)
    assert seen.flags == [] and seen.done, (seen.flags, log[-3000:])
    assert [kind for kind, _ in plan.steps] == ["time", "time"]
    for timing in seen.timings.values():
        assert 1 <= len(timing.ref_ms) <= 4 and timing.sub_ms is None


def sent_bytes(item: CallPrint) -> int:
    """About what a call's fingerprint takes on the result pipe: its JSON."""
    return len(json.dumps(dataclasses.asdict(item)))


def adamw_task(*layers: int) -> TaskSpec:
    """fused_adamw with one check workload per layer count: 9 tensors a layer, plus 2."""
    task = load_task(DEFAULT_CATALOG_DIR / "fused_adamw")
    check = task.workloads_for(Mode.INTERPRET)[0]
    shape = {"vocab": 64, "hidden": 8, "ffn": 16, "kv": 4}
    return dataclasses.replace(
        task,
        workloads=tuple(
            dataclasses.replace(check, name=f"layers_{n}", params={**shape, "layers": n})
            for n in layers
        ),
    )


def test_hundreds_of_outputs_cost_the_result_pipe_no_more_per_timed_call(tmp_path):
    # On the H200, fused_adamw's expert returns ~650 tensors per call: the
    # fingerprints then filled the result pipe past its cap, the child's
    # requests went unanswered, and the run was killed at the time limit.
    # Here 6 outputs against 600, through the whole cuda-mode flow and the judge.
    expert = DEFAULT_CATALOG_DIR / "fused_adamw" / "expert.py"
    task, plan, seen, log, run = run_child_with_fake_cuda(
        tmp_path, "fused_adamw", expert, task=adamw_task(0, 22)
    )
    assert seen.flags == [] and seen.done and run.bad_messages == 0, (seen.flags, log[-3000:])
    results = judge.judge(task, Mode.INTERPRET, plan, seen, tmp_path, {}, source=expert.read_text())
    assert [r.status for r in results] == [Status.CORRECT, Status.CORRECT], results
    # No compute_op: the ops of every checked and audit call are glue. (The fake device's
    # events are the host's clock, so a busy machine can make its batch look
    # inconsistent: timing flags say nothing here.)
    assert [f for f in seen.flags if f["check"] != "timing_inconsistent"] == []

    def per_call(name: str) -> list[int]:
        timing = seen.timings[name]
        return [sent_bytes(item) for item in timing.prints + timing.batch_prints]

    few, many = per_call("layers_0"), per_call("layers_22")
    assert max(many) < 1500 and max(many) < 1.25 * max(few) + 100, (few, many)
    audits = [sent_bytes(a) for a in seen.timings["layers_22"].audit_prints]
    assert max(audits) < 40_000, audits
    assert run.channel_bytes < resultpipe.MAX_CHANNEL_BYTES / 100, run.channel_bytes


def test_the_child_asks_for_the_gpu_before_any_of_the_submission_runs(tmp_path, monkeypatch):
    """A child left to start beside another evaluation's timed phase runs only the
    harness's imports: the submission's own import-time code comes after the request."""
    asked: list[tuple[str, float]] = []
    answer = protocol.Dealer.answer

    def recorded(self, request):
        asked.append((str(request.get("what")), time.monotonic()))
        return answer(self, request)

    monkeypatch.setattr(protocol.Dealer, "answer", recorded)
    marker = tmp_path / "imported"
    expert = (DEFAULT_CATALOG_DIR / "row_softmax" / "expert.py").read_text()
    submission = tmp_path / "submission.py"
    submission.write_text(
        f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text(str(time.monotonic()))\n"
        + expert
    )
    _, _, seen, log, _ = run_child_with_fake_cuda(tmp_path, "row_softmax", submission)
    assert seen.done and seen.error is None, log[-3000:]
    assert [what for what, _ in asked].count("gpu") == 1
    assert asked[0][0] == "gpu" and asked[0][1] < float(marker.read_text())


def test_the_judge_reads_output_files_outside_its_gpu_work_and_computes_within_it(
    tmp_path, monkeypatch
):
    """A timed phase of another evaluation waits for the judge's GPU work to end (gpulease):
    one reference output, one comparison, the timing checks, never the disk reads of a
    workload's output files, which go to the host's memory first."""
    from evaluator.harness import gpulease

    expert = DEFAULT_CATALOG_DIR / "row_softmax" / "expert.py"
    task, plan, seen, log, _ = run_child_with_fake_cuda(tmp_path, "row_softmax", expert)
    assert seen.done, log[-2000:]
    events: list[tuple] = []
    with gpulease.joined(tmp_path / "lease") as lease:

        def recorded(name, real):
            def call(*args, **kwargs):
                events.append((name, lease._parent_busy, *[str(a) for a in args[1:2]]))
                return real(*args, **kwargs)

            return call

        monkeypatch.setattr(judge, "read_raw", recorded("read", judge.read_raw))
        monkeypatch.setattr(judge, "_compare_all", recorded("compare", judge._compare_all))
        monkeypatch.setattr(judge, "judge_timing", recorded("timing", judge.judge_timing))
        outputs = recorded("reference", ReferenceOutputs.outputs)
        monkeypatch.setattr(ReferenceOutputs, "outputs", outputs)
        results = judge.judge(task, Mode.INTERPRET, plan, seen, tmp_path, {}, source="")
    assert [r.status for r in results] == [Status.CORRECT, Status.CORRECT], results
    kinds = {e[0] for e in events}
    assert kinds == {"read", "compare", "timing", "reference"}, events
    for event in events:
        if event[0] == "read":
            assert event[1:] == (0, "cpu"), event
        else:
            assert event[1] == 1, event


def test_the_judge_waits_for_memory_other_evaluations_hold_and_flags_nothing_twice(
    tmp_path, monkeypatch
):
    """A piece of the judge's GPU work that runs out of memory beside other evaluations
    runs again once memory is back (gpumemory), instead of failing the evaluation and
    throwing its timed work away; what the failed try had flagged is put back."""
    import torch

    from evaluator.harness import gpulease, gpumemory

    expert = DEFAULT_CATALOG_DIR / "row_softmax" / "expert.py"
    task, plan, seen, log, _ = run_child_with_fake_cuda(tmp_path, "row_softmax", expert)
    assert seen.done, log[-2000:]
    real, tries = judge.judge_timing, []

    def short_of_memory_once(task_, spec, entry, seen_, *rest):
        tries.append(spec.name)
        if len(tries) == 1:
            seen_.flags.append({"check": "escaped_work", "detail": "half a judgement"})
            seen_.host_clock.append({"workload": spec.name})
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(task_, spec, entry, seen_, *rest)

    monkeypatch.setattr(judge, "judge_timing", short_of_memory_once)
    monkeypatch.setattr(gpumemory, "_sleep", lambda s: None)
    monkeypatch.setattr(gpumemory, "_free_bytes", lambda: 4 * 2**30)
    with gpulease.joined(tmp_path / "lease") as lease:
        monkeypatch.setattr(lease, "others", lambda: 1)  # another evaluation on the GPU
        results = judge.judge(task, Mode.INTERPRET, plan, seen, tmp_path, {}, source="")
    assert [r.status for r in results] == [Status.CORRECT, Status.CORRECT], results
    assert tries[0] == tries[1] == results[0].name and len(tries) == 3
    # What the failed try flagged is gone; what the judgement itself found stays (the
    # fake child's times are the busy CPU's, and may well be flagged).
    assert {"check": "escaped_work", "detail": "half a judgement"} not in seen.flags
    assert {"workload": results[0].name} not in seen.host_clock
    assert lease.report.memory_waits == 1

"""The GPU lease: evaluations that share a GPU are never beside another's timed phase.

Each test runs the evaluations as processes of their own, as a worker runs them
(tests/evaluator/lease_member.py), on this machine's clock: a process that is
frozen writes no tick.
"""

import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evaluator.harness import cleanreference, gpuidle, gpulease, isolation, sandbox
from evaluator.harness.job import CleanReference, TimingSettings
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Mode

MEMBER = Path(__file__).with_name("lease_member.py")


def member(folder: Path, role: str, first: float, second: object, out: Path) -> subprocess.Popen:
    """Another evaluation. Where this process holds a share too, the other is its child
    here but not in a worker: it is counted among this process's own (never frozen)."""
    process = subprocess.Popen(
        [sys.executable, str(MEMBER), str(folder), role, str(first), str(second), str(out)]
    )
    gpulease.trusted_pids.add(process.pid)
    return process


def ticks(path: Path) -> list[float]:
    return [float(line) for line in path.read_text().split()] if path.exists() else []


def wait_for(condition, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def dealt(answer, lease: gpulease.GpuLease, steps: int) -> list[str]:
    """Deal `steps` steps, with room after each for another evaluation to be timed were
    the GPU free; the lease's state after each."""
    states = []
    for _ in range(steps):
        answer({"what": "step"})
        states.append(lease._state)
        time.sleep(0.2)
    return states


def test_another_evaluation_s_processes_are_frozen_for_a_timed_phase_and_thaw_after(
    tmp_path: Path,
):
    folder, tick_file, out = tmp_path / "lease", tmp_path / "ticks", tmp_path / "share.json"
    sharer = member(folder, "share", 6, tick_file, out)
    wait_for(lambda: len(ticks(tick_file)) > 5)
    with gpulease.joined(folder) as lease, lease.exclusive():
        started = time.monotonic()
        time.sleep(1.5)
        ended = time.monotonic()
    assert sharer.wait(timeout=120) == 0
    times = ticks(tick_file)
    # Not one tick while the phase ran; ticks before it and after it.
    assert not [t for t in times if started < t < ended]
    assert any(t < started for t in times) and any(t > ended for t in times)
    # The frozen time is not the sharer's own (its watchdog does not count it).
    assert json.loads(out.read_text())["paused_s"] >= 1.4
    assert lease.report.exclusive_phases == 1 and lease.report.most_others == 1


def test_a_child_still_starting_runs_beside_a_timed_phase_and_is_frozen_once_on_the_gpu(
    tmp_path: Path,
):
    folder, tick_file, out = tmp_path / "lease", tmp_path / "ticks", tmp_path / "start.json"
    starter = member(folder, "start", 1.0, tick_file, out)
    wait_for(lambda: len(ticks(tick_file)) > 5)
    with gpulease.joined(folder) as lease:
        with lease.exclusive():
            first = time.monotonic()
            # The child asks for the GPU during this phase: it waits for its end.
            time.sleep(2.5)
            first_end = time.monotonic()
        granted = Path(f"{out}.granted")
        wait_for(granted.exists)
        with lease.exclusive():
            second = time.monotonic()
            time.sleep(1.5)
            second_end = time.monotonic()
        # Thawed, it runs on.
        wait_for(lambda: any(t > second_end for t in ticks(tick_file)))
    Path(f"{out}.done").write_text("")
    assert starter.wait(timeout=120) == 0
    times = ticks(tick_file)
    report = json.loads(out.read_text())
    # Before its request the child started on beside the timed phase, unfrozen;
    # the request was answered only once the phase had ended.
    assert [t for t in times if first < t < first_end]
    assert first < report["asked"] < first_end <= report["granted"]
    assert report["lease"]["yielded_unfrozen"] >= 1
    assert report["lease"]["gpu_grant_wait_s"] > 0
    # On the GPU, it is frozen for the next timed phase.
    assert not [t for t in times if second < t < second_end]
    assert report["lease"]["frozen_times"] >= 1


def test_timed_phases_of_several_evaluations_never_overlap(tmp_path: Path):
    folder = tmp_path / "lease"
    outs = [tmp_path / f"time{i}.json" for i in range(3)]
    timers = [member(folder, "time", 0.1 * i, 0.2, out) for i, out in enumerate(outs)]
    for timer in timers:
        assert timer.wait(timeout=120) == 0
    phases = sorted(p for out in outs for p in json.loads(out.read_text())["phases"])
    assert len(phases) == 9
    for (_, end), (start, _) in itertools.pairwise(phases):
        assert end <= start


def test_the_parent_s_own_gpu_work_waits_for_another_s_timed_phase(tmp_path: Path):
    folder, out = tmp_path / "lease", tmp_path / "time.json"
    with gpulease.joined(folder) as lease:
        timer = member(folder, "time", 0.5, 1.0, out)
        wait_for(lambda: lease._gate_taken())
        with lease.parent_work():
            worked_at = time.monotonic()
        assert timer.wait(timeout=120) == 0
    first_start, first_end = json.loads(out.read_text())["phases"][0]
    assert not first_start < worked_at < first_end


def test_a_child_s_timed_steps_hold_the_lease_and_its_other_steps_do_not(tmp_path: Path):
    steps = iter(["check", "time", "profile", "check", "end"])
    states = []
    with gpulease.joined(tmp_path / "lease") as lease:
        with lease.child(
            lambda request: {"step": next(steps)} if request["what"] == "step" else {"seed": 1}
        ) as answer:
            for _ in range(5):
                answer({"what": "step"})
                states.append(lease._state)
            answer({"what": "seed"})  # not a step: the lease stays as it is
        after = lease._state
    assert states == ["shared", "exclusive", "exclusive", "shared", "shared"]
    assert after == "shared"
    assert lease.report.exclusive_phases == 1 and lease.report.exclusive_held_s > 0


def test_a_hold_of_a_whole_pass_keeps_the_gpu_between_its_childs_timed_steps(tmp_path: Path):
    """Held around a child (the counters pass), the lease is not given back when the
    child's timed steps end: no other evaluation is timed until the hold ends."""
    folder, out = tmp_path / "lease", tmp_path / "time.json"
    steps = iter(["time", "check", "time", "check", "end"])
    with gpulease.joined(folder) as lease:
        with lease.exclusive():
            timer = member(folder, "time", 0.0, 0.1, out)
            with lease.child(lambda request: {"step": next(steps)}) as answer:
                states = dealt(answer, lease, 5)
            ended = time.monotonic()
        after = lease._state
        assert timer.wait(timeout=120) == 0
    assert states == ["exclusive"] * 5 and after == "shared"
    assert lease.report.exclusive_phases == 1
    assert all(start >= ended for start, _ in json.loads(out.read_text())["phases"])


def test_a_child_that_has_the_gpu_alone_takes_it_at_its_first_request_and_keeps_it(
    tmp_path: Path,
):
    """The counters pass: its child starts without the lease, then holds it to its end."""
    folder, out = tmp_path / "lease", tmp_path / "time.json"
    steps = iter(["profile", "check", "profile", "end"])
    with gpulease.joined(folder) as lease:
        with lease.child(lambda request: {"step": next(steps)}, alone=True) as answer:
            starting = lease._state
            answer({"what": "gpu"})
            states = [lease._state]
            timer = member(folder, "time", 0.0, 0.1, out)
            states += dealt(answer, lease, 4)
            ended = time.monotonic()
        after = lease._state
        assert timer.wait(timeout=120) == 0
    assert starting == "shared" and states == ["exclusive"] * 5 and after == "shared"
    assert lease.report.exclusive_phases == 1
    assert all(start >= ended for start, _ in json.loads(out.read_text())["phases"])


def test_a_child_that_ends_in_its_timed_steps_gives_the_lease_back(tmp_path: Path):
    with gpulease.joined(tmp_path / "lease") as lease:
        with lease.child(lambda request: {"step": "time"}) as answer:
            answer({"what": "step"})
            assert lease._state == "exclusive"
        assert lease._state == "shared"


def test_an_evaluation_waiting_for_another_s_clean_reference_gives_up_its_share(
    tmp_path: Path, monkeypatch
):
    # The other evaluation measures the clean reference this one needs too; its timing
    # holds the lease exclusive, so it needs this one's share while this one waits for
    # its measurement: the wait gives the share up, as any evaluation between steps does.
    folder, mark, out = tmp_path / "lease", tmp_path / "measuring", tmp_path / "clean.json"
    measured: list[str] = []
    monkeypatch.setattr(
        cleanreference, "clean_reference_times", lambda task, *a: measured.append(task.slug)
    )
    answers: list[CleanReference] = []
    with gpulease.joined(folder):
        measurer = member(folder, "clean", 1.0, mark, out)
        wait_for(mark.exists)
        task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")

        def ask() -> None:
            settings, public = TimingSettings(), Path("/nonexistent")
            answers.append(
                cleanreference.reusable_clean_reference(
                    task, Mode.CUDA, settings, public, 60.0, None, "GPU-lease-test"
                )
            )

        waiter = threading.Thread(target=ask, daemon=True)
        waiter.start()
        waiter.join(timeout=120)
        assert not waiter.is_alive(), "the waiting evaluation and the measuring one deadlocked"
    assert measurer.wait(timeout=120) == 0
    assert json.loads(out.read_text())["age_s"] == 0.0
    assert measured == [] and answers[0].ref_median_ms == {"w": 0.5}


def test_without_a_folder_the_lease_does_nothing():
    with gpulease.joined(None) as lease, lease.exclusive(), lease.parent_work():
        assert lease.paused_seconds() == 0.0 and lease.summary() is None


@pytest.mark.skipif(isolation.unavailable() is not None, reason="no sandbox on this host")
def test_a_sandboxed_child_is_frozen_past_its_time_limit_without_being_killed(tmp_path: Path):
    """The sandbox's processes are frozen like any other (bubblewrap's too), and the time
    they spend frozen is not counted against the child's limit."""
    folder, out = tmp_path / "lease", tmp_path / "time.json"
    work = tmp_path / "work"
    work.mkdir()
    # The child ticks until the test tells it to stop, after the other evaluation's
    # phases: ended earlier, its sandbox's clean-up would end every process the test
    # started, the other evaluation included (it stands in for another worker's).
    script = (
        "import os, time\n"
        "with open('ticks', 'a', buffering=1) as f:\n"
        "    while not os.path.exists('stop'):\n"
        "        f.write(f'{time.monotonic()}\\n'); time.sleep(0.01)\n"
    )
    result: list[sandbox.ChildRun] = []
    with gpulease.joined(folder):
        runner = threading.Thread(
            target=lambda: result.append(
                sandbox.run_child(
                    python_args=["-c", script],
                    workdir=work,
                    task_dir=(DEFAULT_CATALOG_DIR / "row_softmax").resolve(),
                    env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(work)},
                    limits=sandbox.Limits(timeout_s=8, max_wall_factor=10),
                    gpu=False,
                )
            )
        )
        runner.start()
        wait_for(lambda: len(ticks(work / "ticks")) > 5)
        # Another evaluation times for 3 x 4 s while the child runs: 12 s frozen, past
        # the child's limit of 8 s.
        timer = member(folder, "time", 0, 4.0, out)
        assert timer.wait(timeout=120) == 0
        (work / "stop").touch()
        runner.join(timeout=120)
    run = result[0]
    assert run.killed_for == "", run.log[-2000:]
    assert run.returncode == 0, run.log[-2000:]
    times = ticks(work / "ticks")
    for start, end in json.loads(out.read_text())["phases"]:
        assert not [t for t in times if start < t < end]


class FakeNvml:
    """The driver's utilisation samples: a history, then what each later read adds."""

    def __init__(self, history, later):
        self.history, self.later = history, list(later)

    def utilization_samples(self, after_us):
        if after_us == 0:
            return list(self.history)
        fresh = self.later.pop(0) if self.later else []
        self.history += fresh
        return [s for s in self.history if s[0] > after_us]


def test_the_drain_ends_at_the_first_idle_period_after_the_freeze(monkeypatch):
    # Samples every 1,000 us; the last one before the wait read 40 %: the GPU is idle
    # only once a whole period after it reads 0 (a 0 inside a period is not enough).
    fake = FakeNvml([(1000, 50), (2000, 40)], [[], [(2500, 0)], [(3000, 30)], [(4000, 0)]])
    monkeypatch.setattr(gpuidle, "_load", lambda: fake)
    monkeypatch.setattr(gpuidle, "POLL_S", 0)
    assert gpuidle.wait_idle(since=time.monotonic()) == ""
    assert fake.later == []


def test_a_gpu_that_stays_busy_after_the_freeze_is_reported(monkeypatch):
    busy = FakeNvml([(1000, 90), (2000, 90)], [[(t, 90)] for t in range(3000, 10**6, 1000)])
    monkeypatch.setattr(gpuidle, "_load", lambda: busy)
    problem = gpuidle.wait_idle(since=time.monotonic(), timeout_s=0.2)
    assert "stayed busy for 0.2 s" in problem


def test_a_process_whose_kernels_run_on_while_frozen_is_named_and_its_evaluation_told(
    monkeypatch, tmp_path: Path
):
    """A kernel that never ends keeps the GPU busy though its process is frozen: the
    evaluation that waits names the process, and the process's own evaluation ends it."""
    folder, tick_file, out = tmp_path / "lease", tmp_path / "ticks", tmp_path / "share.json"
    sharer = member(folder, "share", 4, tick_file, out)
    wait_for(lambda: len(ticks(tick_file)) > 5 and Path(f"{out}.pid").exists())
    busy_pid = int(Path(f"{out}.pid").read_text())
    waits = iter(["busy", ""])
    seen_named = []

    def wait_idle(*, since, timeout_s):
        answer = next(waits)
        if not answer:  # the second wait: the named file is there while it lasts
            seen_named.extend(p.name for p in folder.glob("busy-*"))
            time.sleep(0.5)
        return answer

    monkeypatch.setattr(gpuidle, "wait_idle", wait_idle)
    monkeypatch.setattr(gpuidle, "busy_pids", lambda: {busy_pid})
    with gpulease.joined(folder) as lease, lease.exclusive():
        pass
    assert sharer.wait(timeout=120) == 0
    assert seen_named == [f"busy-{busy_pid}"] and not list(folder.glob("busy-*"))
    assert f"its process {busy_pid} kept the GPU busy" in json.loads(out.read_text())["gpu_busy"]
    assert lease.report.drain_failed == ""


@pytest.mark.skipif(isolation.unavailable() is not None, reason="no sandbox on this host")
def test_a_child_named_busy_on_the_gpu_is_killed_and_its_verdict_says_why(tmp_path: Path):
    from evaluator.harness.decision import killed_status
    from evaluator.harness.verdict import Status

    result: list[sandbox.ChildRun] = []
    with gpulease.joined(tmp_path / "lease") as lease:
        runner = threading.Thread(
            target=lambda: result.append(
                sandbox.run_child(
                    python_args=["-c", "import time; time.sleep(60)"],
                    workdir=tmp_path,
                    task_dir=(DEFAULT_CATALOG_DIR / "row_softmax").resolve(),
                    env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)},
                    limits=sandbox.Limits(timeout_s=120),
                    gpu=False,
                )
            )
        )
        runner.start()
        time.sleep(1)
        lease.gpu_busy = "its process 1 kept the GPU busy"
        runner.join(timeout=60)
    run = result[0]
    assert run.killed_for == "gpu_busy" and run.wall_seconds < 30
    assert killed_status(run) == (Status.TIMEOUT, "killed: its process 1 kept the GPU busy")


def test_out_of_memory_beside_another_evaluation_is_the_worker_s_and_alone_the_submission_s(
    tmp_path: Path,
):
    """Another evaluation on the GPU holds memory of it: a submission that runs out of it
    then is not blamed; its evaluation is taken again (worker_error)."""
    from evaluator.harness import decision, reports
    from evaluator.harness.protocol import Observed
    from evaluator.harness.verdict import Status
    from evaluator.harness.watchdog import ChildRun

    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    gpu = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."

    def out_of_memory(message: str = gpu, kind: str = "out_of_memory") -> tuple[Status, str]:
        error = {"kind": kind, "phase": "check", "message": message}
        seen = Observed(started=True, ready=True, error=reports.parse_error(error))
        return decision.decide(ChildRun(returncode=1), seen, [], 1, task=task)

    with gpulease.joined(tmp_path / "alone"):
        assert out_of_memory()[0] is Status.OUT_OF_MEMORY
    folder, tick_file = tmp_path / "lease", tmp_path / "ticks"
    sharer = member(folder, "share", 5, tick_file, tmp_path / "share.json")
    wait_for(lambda: len(ticks(tick_file)) > 0)
    with gpulease.joined(folder):
        status, message = out_of_memory()
        # Host memory is the evaluation's own, shared GPU or not.
        assert out_of_memory("MemoryError")[0] is Status.OUT_OF_MEMORY
        # The GPU's memory run out in the CUDA runtime (a Triton module's load) or in a
        # library's handle reads as the allocator's does, whatever status it was given.
        for words, kind in [
            ("RuntimeError: Triton Error [CUDA]: out of memory", "out_of_memory"),
            ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling", "runtime_error"),
        ]:
            assert out_of_memory(words, kind)[0] is Status.WORKER_ERROR
        assert out_of_memory("ValueError: wrong shape", "runtime_error")[0] is Status.RUNTIME_ERROR
        # More than the GPU could give the submission with nobody beside it: its own.
        alone_too_much = (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 200.00 GiB. GPU 0 "
            "has a total capacity of 139.80 GiB of which 90.00 GiB is free. Including "
            "non-PyTorch memory, this process has 1.20 GiB memory in use."
        )
        assert out_of_memory(alone_too_much)[0] is Status.OUT_OF_MEMORY
    assert sharer.wait(timeout=120) == 0
    assert status is Status.WORKER_ERROR
    assert message.startswith("out of memory while 1 other evaluation shared the GPU")


def test_the_judge_gives_back_its_cached_gpu_memory_after_each_workload_inside_its_gpu_work(
    tmp_path, monkeypatch
):
    """What one workload's reference outputs took in the parent's allocator is freed before
    the next (the evaluations beside it need the GPU's memory), and never beside another
    evaluation's timed phase: the release is the parent's own GPU work."""
    import torch

    from evaluator.harness import judge
    from evaluator.harness.job import Plan, PlannedWorkload
    from evaluator.harness.protocol import Observed

    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    names = [w.name for w in task.workloads_for(Mode.INTERPRET)][:2]
    events: list[tuple[str, str | int]] = []

    def judged(task_, spec, *rest):
        events.append(("judged", spec.name))
        return spec.name

    monkeypatch.setattr(judge, "ReferenceOutputs", lambda task_, mode: None)
    monkeypatch.setattr(judge, "_judge_workload", judged)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    plan = Plan(
        workloads=tuple(
            PlannedWorkload(name=n, params={}, timed=False, hidden=False) for n in names
        ),
        steps=tuple(("check", n) for n in names),
        seeds=1,
    )
    seen = Observed(outputs={n: ["a call"] for n in names})  # type: ignore[dict-item]
    with gpulease.joined(tmp_path / "lease") as lease:
        monkeypatch.setattr(
            torch.cuda, "empty_cache", lambda: events.append(("freed", lease._parent_busy))
        )
        outcomes = judge.judge(task, Mode.CUDA, plan, seen, tmp_path, {})
    assert outcomes == names
    assert events == [("judged", names[0]), ("freed", 1), ("judged", names[1]), ("freed", 1)]


def test_the_reference_outputs_a_counters_pass_is_checked_against_wait_for_timed_phases(
    tmp_path, monkeypatch
):
    """After the profiling pass has given the GPU back, the parent's check of its profiled
    calls computes reference outputs on the GPU: parent work like the judge's."""
    from evaluator.harness import judge
    from evaluator.harness.job import Plan, PlannedWorkload
    from evaluator.harness.reference import ReferenceOutputs
    from evaluator.harness.reports import ProfiledReport

    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    spec = task.workloads_for(Mode.INTERPRET)[0]
    entry = PlannedWorkload(
        name=spec.name, params=spec.params, timed=True, hidden=False, calls=(7,), samples=(8,)
    )
    plan = Plan(workloads=(entry,), steps=(("profile", spec.name),), seeds=1)
    seen: list[int] = []
    with gpulease.joined(tmp_path / "lease") as lease:
        real = ReferenceOutputs.outputs

        def outputs(self, *args):
            seen.append(lease._parent_busy)
            return real(self, *args)

        monkeypatch.setattr(ReferenceOutputs, "outputs", outputs)
        profiled = {spec.name: ProfiledReport(workload=spec.name, seed=7, sample_seed=8, fp=None)}
        wrong = judge.wrong_profiled_calls(task, plan, profiled, Mode.INTERPRET)
    assert seen == [1]
    assert wrong == [spec.name]  # no fingerprint: not the reference's answer

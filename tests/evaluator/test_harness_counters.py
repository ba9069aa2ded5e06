"""Hardware counters (evaluator/harness/counters.py): ncu's table read, and every path without it.

`tests/data/ncu/row_softmax_raw.csv` is a real capture: ncu 2025.3.1.0 on an
NVIDIA H200 (driver 580, Firecracker host), the row_softmax expert's three
timed workloads, written by the harness's own profiling pass. It was made,
on the GPU host after `bash bench/device_prepare.sh` here, with

    source bench/device_setup.sh && python3 bench/counters_table.py \
        --tasks row_softmax --profile-only --keep-csv $OUT/row_softmax_raw.csv

`MULTI` below is a hand-written table in the same format (header row, units
row, one row per kernel), with made-up values, for what the capture lacks:
several kernels in one call, tensor-core instructions, "n/a", thousands
separators and scaled units.
"""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.harness import (
    counters,
    gpulease,
    isolation,
    judge,
    ncu_report,
    protocol,
    resultpipe,
    sandbox,
)
from evaluator.harness.job import PlannedWorkload
from evaluator.harness.profilemark import MARK_KERNEL
from evaluator.harness.verdict import Status, WorkloadOutcome
from taskformat import counter_rules
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Mode, WorkloadRole

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "data" / "ncu" / "row_softmax_raw.csv"
EXPERT = DEFAULT_CATALOG_DIR / "row_softmax" / "expert.py"
# The workloads of the capture (row_softmax's timed set at the time) and their
# minimum bytes: one read of x and one write of y.
ROW_SOFTMAX = ["bf16_8192x1024", "fp32_4096x4096", "bf16_2048x32768"]
CAPTURE_MINIMUM = {
    "bf16_8192x1024": 2 * 8192 * 1024 * 2,
    "fp32_4096x4096": 2 * 4096 * 4096 * 4,
    "bf16_2048x32768": 2 * 2048 * 32768 * 2,
}
# Hand-written, made-up values (see the module's docstring).
MULTI = (
    '"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum",'
    '"lts__t_sectors_srcunit_tex_op_write.sum","sm__inst_executed.sum",'
    '"sm__inst_executed_pipe_tensor_op_gmma.sum","sm__inst_executed_pipe_tensor_op_hmma.sum",'
    '"gpu__time_duration.sum"\n'
    '"","","byte","Kbyte","sector","inst","inst","inst","usecond"\n'
    '"0","d2k_profile_mark","0","0","0","2","0","0","1.5"\n'
    '"1","gemm_kernel","1,000,000","2","100","9,000,000","600,000","n/a","1,200.25"\n'
    '"2","epilogue_kernel","24","0","1","1,000,000","0","400,000","3"\n'
)


def test_the_capture_gives_every_kernel_in_order_with_its_counters():
    kernels = ncu_report.parse_ncu_csv(CAPTURE.read_text())
    assert [k["id"] for k in kernels] == [0, 1, 2, 3, 4, 5]
    assert [k["name"] for k in kernels][:2] == ["d2k_profile_mark", "_softmax_single_pass"]
    first = kernels[1]["metrics"]
    assert first["dram__bytes_read.sum"] == 16_782_592
    assert first["lts__t_sectors_srcunit_tex_op_write.sum"] == 524_288
    assert first["sm__inst_executed_pipe_tensor_op_gmma.sum"] == 0


def test_thousands_separators_scaled_units_and_na_are_read():
    _, gemm, epilogue = ncu_report.parse_ncu_csv(MULTI)
    assert gemm["metrics"]["dram__bytes_read.sum"] == 1_000_000
    assert gemm["metrics"]["dram__bytes_write.sum"] == 2_000  # 2 Kbyte
    assert gemm["metrics"]["sm__inst_executed_pipe_tensor_op_hmma.sum"] is None  # "n/a"
    assert epilogue["metrics"]["sm__inst_executed.sum"] == 1_000_000


@pytest.mark.parametrize(
    ("unit", "value", "expected"),
    [("byte", "1,024", 1024.0), ("Kbyte", "2", 2000.0), ("Mbyte", "1.5", 1.5e6), ("", "7", 7.0)],
)
def test_scaled_units_are_brought_to_base_units(unit, value, expected):
    header = '"ID","Kernel Name","dram__bytes_read.sum"'
    text = f'{header}\n"","","{unit}"\n"0","k","{value}"\n'
    [kernel] = ncu_report.parse_ncu_csv(text)
    assert kernel["metrics"]["dram__bytes_read.sum"] == expected


def test_output_without_a_table_is_an_error():
    with pytest.raises(ncu_report.CountersError, match="no table"):
        ncu_report.parse_ncu_csv("==PROF== Disconnected from process 1\n")


def test_the_marker_kernels_split_the_table_into_the_workloads_calls():
    calls = ncu_report.split_by_mark(ncu_report.parse_ncu_csv(CAPTURE.read_text()), ROW_SOFTMAX)
    assert [[k["id"] for k in calls[name]] for name in ROW_SOFTMAX] == [[1], [3], [5]]
    [gemm] = ncu_report.split_by_mark(ncu_report.parse_ncu_csv(MULTI), ["gemm"]).values()
    assert [k["id"] for k in gemm] == [1, 2]


@pytest.mark.parametrize(
    ("ids", "fragment"),
    [([0, 1, 3, 5], "1 marked calls for 3"), ([1, 0, 2, 3, 4, 5], "before the first marked")],
)
def test_a_table_that_does_not_match_the_workloads_is_refused(ids, fragment):
    by_id = {k["id"]: k for k in ncu_report.parse_ncu_csv(CAPTURE.read_text())}
    with pytest.raises(ncu_report.CountersError, match=fragment):
        ncu_report.split_by_mark([by_id[i] for i in ids], ROW_SOFTMAX)


def test_the_softmax_experts_traffic_is_its_minimum_with_the_writes_left_in_the_l2():
    minimum = CAPTURE_MINIMUM
    calls = ncu_report.split_by_mark(ncu_report.parse_ncu_csv(CAPTURE.read_text()), ROW_SOFTMAX)
    small = ncu_report.summarise(
        calls["bf16_8192x1024"], min_bytes=minimum["bf16_8192x1024"], tool="t"
    )
    # 16 MiB of output fits the L2: the kernel ends with it there, not yet in DRAM.
    assert small["dram_write_bytes"] == 2_304
    assert small["l2_write_bytes"] == 524_288 * 32 == 16 * 2**20
    assert small["dram_bytes"] == 16_782_592 + 2_304
    assert small["traffic_bytes"] == 16_782_592 + 16 * 2**20
    for name in ROW_SOFTMAX:
        summary = ncu_report.summarise(calls[name], min_bytes=minimum[name], tool="ncu 2025.3.1.0")
        assert summary["traffic_ratio"] == pytest.approx(1.0, abs=0.001), (name, summary)
        assert summary["tensor_share"] == 0.0 and summary["kernels"] == 1
        assert summary["tool"] == "ncu 2025.3.1.0"


def test_counters_are_summed_over_a_calls_kernels():
    [kernels] = ncu_report.split_by_mark(ncu_report.parse_ncu_csv(MULTI), ["gemm"]).values()
    summary = ncu_report.summarise(kernels, min_bytes=2_000_000, tool="ncu")
    assert summary["dram_read_bytes"] == 1_000_024 and summary["dram_write_bytes"] == 2_000
    assert summary["l2_write_bytes"] == 101 * 32
    assert summary["traffic_bytes"] == 1_000_024 + 101 * 32
    assert summary["traffic_ratio"] == pytest.approx((1_000_024 + 3_232) / 2_000_000, abs=1e-4)
    # gmma (600 000) + hmma (n/a, then 400 000) over 10 000 000 instructions.
    assert summary["tensor_instructions"] == 1_000_000 and summary["instructions"] == 10_000_000
    assert summary["tensor_share"] == pytest.approx(0.1)
    assert summary["kernels"] == 2
    # 1,200.25 us + 3 us of kernels; the marker's 1.5 us is not the call's.
    assert summary["kernel_ms"] == pytest.approx(1.20325)


def test_without_a_minimum_or_instructions_there_is_no_ratio_and_no_share():
    kernel = {"id": 0, "name": "k", "metrics": {"dram__bytes_read.sum": 10.0}}
    summary = ncu_report.summarise([kernel], min_bytes=0, tool="ncu")
    assert summary["traffic_ratio"] is None and summary["tensor_share"] is None
    assert summary["kernel_ms"] is None  # a table without durations (the capture's ncu run)
    assert summary["l2_write_bytes"] is None and summary["traffic_bytes"] == 10


def test_a_pass_that_read_only_durations_states_no_dram_traffic_rather_than_none_moved():
    kernels = [
        {"id": 1, "name": "k", "metrics": {"gpu__time_duration.sum": 1500.0}},
        {"id": 2, "name": "k", "metrics": {"gpu__time_duration.sum": 500.0}},
    ]
    summary = ncu_report.summarise(kernels, min_bytes=1_000_000, tool="ncu")
    assert summary["kernel_ms"] == pytest.approx(0.002) and summary["kernels"] == 2
    for key in ("dram_bytes", "dram_read_bytes", "dram_write_bytes", "traffic_bytes"):
        assert summary[key] is None, key
    assert summary["traffic_ratio"] is None and summary["tensor_share"] is None
    # No counter rule and no page reads a DRAM figure into it.
    assert counter_rules.traffic_ratio(summary) is None


def test_the_duration_only_wrapper_asks_ncu_for_the_kernel_time_alone():
    argv = counters.ncu_command("/opt/ncu", "/d2k/work/ncu.csv", ncu_report.DURATION_ONLY)
    assert argv[argv.index("--metrics") + 1] == "gpu__time_duration.sum"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA "
            "GPU Performance Counters on the target device 0.",
            "ERR_NVGPUCTRPERM",
        ),
        ("==ERROR== Failed to initialize the profiler: LibraryNotLoaded", "LibraryNotLoaded"),
        ("==PROF== Disconnected from process 1", ""),
    ],
)
def test_ncus_errors_become_the_note(text, fragment):
    note = ncu_report.failure_note(text)
    assert (fragment in note and note.startswith("not read")) if fragment else note == ""


def timed_results(task):
    return [
        WorkloadOutcome(name=w.name, role=w.role, hidden=w.hidden, status=Status.CORRECT)
        for w in task.workloads_for(Mode.CUDA)
    ]


@pytest.mark.parametrize(
    ("mode", "status", "enabled", "fragment"),
    [
        (Mode.INTERPRET, Status.CORRECT, True, "interpret mode"),
        (Mode.CUDA, Status.CORRECT, False, "switched off"),
        (Mode.CUDA, Status.INCORRECT, True, "correct verdicts only"),
    ],
)
def test_no_pass_runs_outside_a_correct_cuda_verdict(mode, status, enabled, fragment, monkeypatch):
    monkeypatch.setattr(counters, "find_ncu", lambda path: pytest.fail("looked for ncu"))
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    results = timed_results(task)
    out, note = counters.profile(
        task=task, source="", mode=mode, status=status, results=results, enabled=enabled
    )
    assert out == results and fragment in note and note.startswith("not read")


def test_the_profiling_pass_holds_the_gpu_lease_alone_from_its_first_request_to_its_end(
    tmp_path, monkeypatch
):
    """One ncu session on a GPU at a time, never frozen halfway by another evaluation;
    its start (ncu's, the child's imports) is not held alone."""
    seen = []

    def run_child(**kwargs):
        # As sandbox.run_child answers the child's requests.
        lease = gpulease.current()
        with lease.child(kwargs["answer"], alone=kwargs["gpu_alone"]) as answer:
            seen.append(lease._state)
            answer({"what": "gpu"})
            seen.append(lease._state)
            answer({"what": "step"})
            seen.append(lease._state)
        raise counters.CountersError("not read: stopped by the test")

    monkeypatch.setattr(counters, "find_ncu", lambda path: "/usr/bin/true")
    monkeypatch.setattr(counters, "ncu_version", lambda ncu: "ncu")
    monkeypatch.setattr(counters.sandbox, "run_child", run_child)
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    with gpulease.joined(tmp_path / "lease") as lease:
        _, note = counters.profile(
            task=task, source="", mode=Mode.CUDA, status=Status.CORRECT,
            results=timed_results(task),
        )  # fmt: skip
        assert lease._state == "shared"
    assert seen == ["shared", "exclusive", "exclusive"]
    assert note == "not read: stopped by the test"
    assert lease.report.exclusive_phases == 1


def test_without_ncu_the_note_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(isolation, "child_path", lambda: str(tmp_path))
    monkeypatch.setattr(counters, "NCU_ROOT", tmp_path / "nsight-compute")
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    results = timed_results(task)
    out, note = counters.profile(
        task=task, source="", mode=Mode.CUDA, status=Status.CORRECT, results=results
    )
    assert out == results
    assert note == "not read: Nsight Compute (ncu) is not installed on this worker"


FAKE_NCU = """#!/bin/sh
# A stand-in for ncu: writes MESSAGE where --log-file says, exits 1, runs nothing.
while [ $# -gt 0 ]; do
  if [ "$1" = "--log-file" ]; then printf '%s\\n' "$MESSAGE" > "$2"; fi
  if [ "$1" = "--version" ]; then echo "Version 2099.1.0.0 (build 1)"; exit 0; fi
  shift
done
exit 1
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("message", "fragment"),
    [
        (
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA "
            "GPU Performance Counters on the target device 0.",
            "ERR_NVGPUCTRPERM",
        ),
        ("==ERROR== Failed to initialize the profiler: LibraryNotLoaded", "LibraryNotLoaded"),
    ],
)
def test_a_failing_ncu_leaves_the_results_and_explains(tmp_path, monkeypatch, message, fragment):
    ncu = tmp_path / "ncu"
    ncu.write_text(FAKE_NCU)
    ncu.chmod(0o755)
    # The process level: the fake lives in a folder bubblewrap would not mount.
    monkeypatch.setenv("D2K_SANDBOX", "process")
    monkeypatch.setattr(counters, "find_ncu", lambda path: str(ncu))
    env = {"PATH": "/usr/bin:/bin", "MESSAGE": message}
    monkeypatch.setattr(counters, "_child_env", lambda work: env)
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    results = timed_results(task)
    out, note = counters.profile(
        task=task,
        source=EXPERT.read_text(),
        mode=Mode.CUDA,
        status=Status.CORRECT,
        results=results,
        timeout_s=60,
    )
    assert out == results and all(r.counters is None for r in out)
    assert note.startswith("not read") and fragment in note, note


def test_the_ncu_wrapper_profiles_only_the_marked_ranges_with_caches_flushed():
    argv = counters.ncu_command("/opt/ncu", "/d2k/work/ncu.csv")
    assert argv[0] == "/opt/ncu"
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert argv[argv.index("--cache-control") + 1] == "all"
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--log-file") + 1] == "/d2k/work/ncu.csv"
    assert set(argv[argv.index("--metrics") + 1].split(",")) == set(ncu_report.METRICS.values())


def test_the_wrapper_runs_inside_the_sandbox_before_the_interpreter(tmp_path):
    argv, _, level = isolation.sandbox_command(
        python_args=["-c", "pass"],
        workdir=tmp_path,
        task_dir=tmp_path,
        env={},
        gpu=False,
        wrapper=["/opt/ncu", "--csv"],
    )
    at = argv.index("/opt/ncu")
    assert argv[at : at + 3] == ["/opt/ncu", "--csv", sys.executable]
    if level == "bwrap":
        assert argv.index("--") < at


# A wrapper in ncu's place: it writes a line of its table, keeps the file open, runs the
# interpreter, and writes the rest once the interpreter (and all it started) has ended.
FAKE_PROFILER = """
import os, subprocess, sys
log = sys.argv[sys.argv.index("--log-file") + 1]
rest = sys.argv[sys.argv.index("--") + 1 :]
with open(log, "w") as table:
    table.write("ncu's first row\\n")
    table.flush()
    code = subprocess.call(rest)
    table.write("ncu's last row\\n")
sys.exit(code)
"""
# The profiled interpreter's attempts on the table: where ncu wrote it before, where the
# wrapper writes it now, and through any open file of any process it can see.
TABLE_HUNTER = r"""
import json, os, sys, time
done = []
for path in ("/d2k/work/ncu.csv", "/d2k/tool/ncu.csv"):
    try:
        with open(path, "w") as f:
            f.write("forged\n")
        done.append(path)
    except OSError:
        pass
seen = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        seen.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode())
        for fd in os.listdir(f"/proc/{pid}/fd"):
            if os.readlink(f"/proc/{pid}/fd/{fd}").endswith("ncu.csv"):
                with open(f"/proc/{pid}/fd/{fd}", "w") as f:
                    f.write("forged\n")
                done.append(f"/proc/{pid}/fd/{fd}")
    except OSError:
        pass
if os.fork() == 0:  # a helper that outlives the interpreter, to write after the wrapper
    os.setsid()
    for _ in range(40):
        for path in ("/d2k/tool/ncu.csv", "/d2k/work/ncu.csv"):
            try:
                with open(path, "a") as f:
                    f.write("forged late\n")
            except OSError:
                pass
        time.sleep(0.05)
    os._exit(0)
wrapper = "fake_" + "ncu.py"  # not this process's own command line
print("HUNT " + json.dumps({"wrote": done, "wrapper_seen": any(wrapper in c for c in seen)}))
"""


def test_the_wrappers_table_is_out_of_the_profiled_interpreters_reach(tmp_path):
    """ncu's table is what ncu wrote: the interpreter it profiles can neither open its folder
    nor see its process, at the time or after (bubblewrap: two sandboxes, one in the other)."""
    if isolation.isolation_level() != "bwrap":
        pytest.skip("the `process` level shares one filesystem; docs/exploits.md says so")
    workdir, task_dir, tool = (tmp_path / name for name in ("work", "task", "tool"))
    for folder in (workdir, task_dir, tool):
        folder.mkdir()
    (task_dir / "fake_ncu.py").write_text(FAKE_PROFILER)
    python = [sys.executable, *isolation.PYTHON_FLAGS]
    wrapper = [*python, f"{isolation.SANDBOX_TASK}/fake_ncu.py", "--log-file"]
    run = sandbox.run_child(
        python_args=["-c", TABLE_HUNTER],
        workdir=workdir,
        task_dir=task_dir,
        env={"PATH": "/usr/bin:/bin", "HOME": isolation.SANDBOX_WORK},
        limits=sandbox.Limits(timeout_s=120),
        gpu=False,
        wrapper=[*wrapper, f"{isolation.tool_path(tool)}/ncu.csv", "--"],
        tool_folder=tool,
    )
    assert run.returncode == 0, run.log
    hunt = json.loads(run.log.split("HUNT ", 1)[1].splitlines()[0])
    assert hunt == {"wrote": ["/d2k/work/ncu.csv"], "wrapper_seen": False}, run.log
    assert (tool / "ncu.csv").read_text() == "ncu's first row\nncu's last row\n"


def test_without_a_tool_folder_the_interpreter_runs_in_the_one_sandbox(tmp_path):
    argv, _, level = isolation.sandbox_command(
        python_args=["-c", "pass"], workdir=tmp_path, task_dir=tmp_path, env={}, gpu=False,
        wrapper=["/opt/ncu"],
    )  # fmt: skip
    if level == "bwrap":
        assert argv.count(argv[0]) == 1 and isolation.SANDBOX_TOOL not in argv


@pytest.mark.slow
def test_the_childs_profiling_pass_follows_the_parents_plan(tmp_path):
    """The child's profile role on the CPU, the profiler's range faked: one call a workload."""
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    checks = task.workloads_for(Mode.INTERPRET)[:2]
    entries = [
        PlannedWorkload(name=w.name, params=w.params, timed=True, hidden=False) for w in checks
    ]
    dealer = protocol.Dealer(entries, seeds=task.seeds, profile=True)
    job = {
        "mode": "cuda",
        "device": "cpu",
        "reference": str(DEFAULT_CATALOG_DIR / "row_softmax" / "reference.py"),
        "baseline": "",
        "submission": str(EXPERT),
        "profile": True,
        "out_dir": str(tmp_path / "out"),
        "inplace": task.inplace,
        "seeds": task.seeds,
        "timing": {},
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    read_fd, write_fd = os.pipe()
    child_reply_fd, reply_fd = os.pipe()
    bootstrap = (
        "import contextlib, evaluator.harness.profilemark as k; "
        "k.Mark = type('Mark', (), {'profiled': staticmethod(contextlib.nullcontext)}); "
        "from evaluator.harness.child import main; main()"
    )
    argv = [sys.executable, "-c", bootstrap, str(tmp_path / "job.json"), str(write_fd)]
    proc = subprocess.Popen(
        [*argv, str(child_reply_fd)],
        pass_fds=(write_fd, child_reply_fd),
        env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
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
    assert seen.flags == [] and not dealer.problems and seen.done, (seen.flags, log[-3000:])
    assert list(seen.profiled) == [w.name for w in checks]
    assert [kind for kind, _ in plan.steps] == ["profile", "profile"]
    # Seeds as in any evaluation, asked for at the call: no check seed, no audit.
    for workload in plan.workloads:
        assert workload.seeds == () and len(workload.calls) == 1
        assert len(workload.samples) == 1
    # The profiled calls computed the reference's answer; the parent can tell
    # when one did not, or names a seed it never issued.
    assert judge.wrong_profiled_calls(task, plan, seen.profiled, Mode.INTERPRET) == []
    first, second = (w.name for w in checks)
    spoilt = {**seen.profiled[first].fp}
    spoilt["values"] = [v + 1.0 for v in spoilt["values"]]
    wrong = {
        first: dataclasses.replace(seen.profiled[first], fp=spoilt),
        second: dataclasses.replace(seen.profiled[second], seed=seen.profiled[second].seed + 1),
    }
    assert judge.wrong_profiled_calls(task, plan, wrong, Mode.INTERPRET) == [first, second]


def test_a_profiling_step_refuses_seeds_for_other_purposes():
    dealer = protocol.Dealer(
        [PlannedWorkload(name="a", params={}, timed=True, hidden=False)], seeds=3, profile=True
    )
    assert dealer.answer({"what": "step"})["step"] == "profile"
    assert "seed" in dealer.answer({"what": "seed", "workload": "a", "purpose": "call"})
    assert "error" in dealer.answer({"what": "seed", "workload": "a", "purpose": "check"})
    assert "error" in dealer.answer({"what": "audit", "workload": "a", "call": 1})


def test_hidden_workloads_are_never_profiled():
    workloads = [
        PlannedWorkload(name="t", params={}, timed=True, hidden=False),
        PlannedWorkload(name="h", params={}, timed=False, hidden=True),
    ]
    assert protocol.steps_of(workloads, profile=True) == [("profile", "t")]


def test_a_timed_results_counters_travel_in_the_verdict_json():
    result = WorkloadOutcome(
        name="a", role=WorkloadRole.TIMED, hidden=False, status=Status.CORRECT, counters={"x": 1}
    )
    assert result.to_dict()["counters"] == {"x": 1}
    unread = WorkloadOutcome(
        name="b", role=WorkloadRole.UNTIMED, hidden=True, status=Status.CORRECT
    )
    assert unread.to_dict()["counters"] is None


def test_the_counters_pass_takes_the_childs_compile_caches_and_no_link(tmp_path):
    workdir, counted, elsewhere = tmp_path / "work", tmp_path / "counted", tmp_path / "elsewhere"
    for folder in (workdir / ".triton" / "abc", counted, elsewhere):
        folder.mkdir(parents=True)
    (workdir / ".triton" / "abc" / "kernel.cubin").write_bytes(b"\x7fELF")
    (workdir / ".torch_extensions").symlink_to(elsewhere)
    counters.take_builds(workdir, counted)
    assert (counted / ".triton" / "abc" / "kernel.cubin").read_bytes() == b"\x7fELF"
    assert not (workdir / ".triton").exists()
    # A link the submission left is never followed nor taken along.
    assert (workdir / ".torch_extensions").is_symlink()
    assert not (counted / ".torch_extensions").exists()


LISTING_NCU = """#!/bin/sh
# A stand-in for ncu: writes what the pass's folder holds where --log-file says.
while [ $# -gt 0 ]; do
  if [ "$1" = "--log-file" ]; then find .triton -type f > "$2"; fi
  if [ "$1" = "--version" ]; then echo "Version 2099.1.0.0 (build 1)"; exit 0; fi
  shift
done
exit 1
"""


@pytest.mark.slow
def test_the_counters_pass_starts_with_the_childs_compile_caches(tmp_path, monkeypatch):
    ncu = tmp_path / "ncu"
    ncu.write_text(LISTING_NCU)
    ncu.chmod(0o755)
    monkeypatch.setenv("D2K_SANDBOX", "process")
    monkeypatch.setattr(counters, "find_ncu", lambda path: str(ncu))
    monkeypatch.setattr(counters, "_child_env", lambda work: {"PATH": "/usr/bin:/bin"})
    builds = tmp_path / "builds"
    (builds / ".triton" / "abc").mkdir(parents=True)
    (builds / ".triton" / "abc" / "kernel.cubin").write_bytes(b"\x7fELF")
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    sink: list[str] = []
    counters.profile(
        task=task,
        source=EXPERT.read_text(),
        mode=Mode.CUDA,
        status=Status.CORRECT,
        results=timed_results(task),
        timeout_s=60,
        csv_sink=sink,
        builds=builds,
    )
    assert sink[0].split() == [".triton/abc/kernel.cubin"]
    assert not (builds / ".triton").exists()


ALL = (None, tuple(ncu_report.METRICS))
SETTLE = (["bf16_1024x65536"], ncu_report.DURATION_ONLY)


@pytest.mark.parametrize(
    ("slug", "when", "host_clock", "profiled", "scope"),
    [
        ("row_softmax", "needed", [], None, None),  # no counter rule, no host-clock excess
        # The timing check needs ncu's kernel times of the workload it found slow, only.
        ("row_softmax", "needed", ["bf16_1024x65536"], True, SETTLE),
        ("gemm_bf16", "needed", [], True, ALL),  # its tensor-core property has a counter rule
        (
            "gemm_bf16",
            "needed",
            ["bf16_4096x4096x4096"],
            True,
            ALL,
        ),  # the rule needs every workload's
        ("row_softmax", "all", [], True, ALL),
        ("row_softmax", "all", ["bf16_1024x65536"], True, ALL),
        ("row_softmax", "off", [], False, ALL),
    ],
)
def test_the_counters_pass_runs_where_the_setting_and_the_task_need_it(
    monkeypatch, slug, when, host_clock, profiled, scope
):
    from evaluator.harness import orchestrate
    from evaluator.harness.job import TimingSettings
    from taskformat.counter_rules import NOT_PROFILED, pass_failed

    calls = []

    def profile(**kwargs):
        calls.append(kwargs["enabled"])
        calls.append((kwargs.get("only"), tuple(kwargs.get("metrics", ncu_report.METRICS))))
        return kwargs["results"], "read by a stand-in"

    monkeypatch.setattr(orchestrate.counters, "profile", profile)
    task = load_task(DEFAULT_CATALOG_DIR / slug)
    stages = orchestrate._Stages(task, "", Mode.CUDA, TimingSettings(), {}, 60.0, None)
    _, note = stages.counters(Status.CORRECT, timed_results(task), when, host_clock)
    if profiled is None:
        assert calls == [] and note == NOT_PROFILED["unneeded"] and not pass_failed(note)
    else:
        assert calls == [profiled, scope] and note == "read by a stand-in"


def test_a_pass_scoped_to_some_workloads_deals_and_splits_only_those(tmp_path, monkeypatch):
    """The settling pass's child is dealt the slow workload alone, ncu reads its time alone,
    and the note names what was read."""
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    [slow, *_] = [w.name for w in task.workloads_for(Mode.CUDA) if w.role is WorkloadRole.TIMED]
    seen: dict = {}

    def pass_(task_, source, names, ncu, metrics, *rest):
        seen.update(names=names, metrics=metrics)
        rows = [
            '"ID","Kernel Name","gpu__time_duration.sum"',
            '"","","nsecond"',
            f'"0","{MARK_KERNEL}","1000"',
            '"1","softmax_kernel","2000000"',
        ]
        return "\n".join(rows)

    monkeypatch.setattr(counters, "find_ncu", lambda path: "/usr/bin/true")
    monkeypatch.setattr(counters, "ncu_version", lambda ncu: "ncu 2099.1")
    monkeypatch.setattr(counters, "_profiling_pass", pass_)
    results = timed_results(task)
    out, note = counters.profile(
        task=task, source="", mode=Mode.CUDA, status=Status.CORRECT, results=results,
        only=[slow], metrics=ncu_report.DURATION_ONLY,
    )  # fmt: skip
    assert seen == {"names": [slow], "metrics": ("duration",)}
    by_name = {r.name: r for r in out}
    assert by_name[slow].counters["kernel_ms"] == pytest.approx(2.0)
    assert by_name[slow].counters["dram_bytes"] is None
    assert all(r.counters is None for r in out if r.name != slow)
    assert f"one call of {slow}, whose host clock needed settling" in note
    assert note.endswith("; gpu__time_duration.sum")


def measured(name: str, median_ms: float, kernel_ms: float, host_bound_calls: int = 0):
    from evaluator.harness.verdict import Measurement

    m = Measurement(
        median_ms=median_ms, iqr_ms=0.0, min_ms=median_ms, calls=40, ref_median_ms=1.0,
        ref_iqr_ms=0.0, ref_calls=40, cold_start_ms=1.0, host_bound_calls=host_bound_calls,
    )  # fmt: skip
    return WorkloadOutcome(
        name=name, role=WorkloadRole.TIMED, hidden=False, status=Status.CORRECT, measurement=m,
        counters={"kernel_ms": kernel_ms, "tensor_share": 0.08},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("median_ms", "kernel_ms", "host_bound_calls", "same"),
    [
        (1.0, 0.78, 0, True),  # the experts on the H200: 0.78-1.17 of the timed median
        (1.0, 1.17, 0, True),
        (1.0, 0.05, 0, False),  # a fast path only under ncu (tensor cores where watched)
        (1.0, 5.0, 0, False),  # a slow path only under ncu (one pass, where watched)
        (1.0, 0.05, 30, True),  # host-bound calls: the events timed the host, not kernels
    ],
)
def test_a_profiled_call_that_did_other_work_than_the_timed_ones_is_not_read(
    median_ms, kernel_ms, host_bound_calls, same
):
    results = [measured("big", median_ms, kernel_ms, host_bound_calls)]
    problem = counters.other_work(results)
    assert (problem == "") is same, problem
    if not same:
        assert problem.startswith("not read: the profiled call of big")
        from taskformat.counter_rules import pass_failed

        assert pass_failed(problem)  # its counter rules then credit nothing

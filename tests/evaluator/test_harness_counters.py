"""Hardware counters (evaluator/harness/counters.py): ncu's table read, and every path without it.

`tests/data/ncu/row_softmax_raw.csv` is a HAND-WRITTEN sample of the format
`ncu --csv --page raw --print-units base --log-file FILE` writes (ncu's
`==PROF==` lines, a header row, a units row, one row per kernel, numbers
with thousands separators), with the values made up. Replace it by a real
capture from the H200; on the GPU host, after `bash bench/device_prepare.sh`
here:

    source bench/device_setup.sh && python bench/counters_table.py \
        --tasks row_softmax --keep-csv $OUT/row_softmax_raw.csv

and copy the file it writes over the sample (the expected numbers below
then change to that capture's).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.harness import counters, protocol, sandbox
from evaluator.harness.package import DEFAULT_CATALOG_DIR, load_task
from evaluator.harness.spec import Mode, Status, WorkloadResult, WorkloadRole

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "ncu" / "row_softmax_raw.csv"
EXPERT = DEFAULT_CATALOG_DIR / "row_softmax" / "expert.py"


def test_the_raw_csv_gives_every_kernel_in_order_with_numbers_in_base_units():
    kernels = counters.parse_ncu_csv(SAMPLE.read_text())
    assert [k["id"] for k in kernels] == [0, 1, 2, 3, 4]
    assert [k["name"] for k in kernels][:2] == ["d2k_profile_mark", "softmax_kernel"]
    second = kernels[1]["metrics"]
    assert second["dram__bytes_read.sum"] == 16_809_984
    assert second["lts__t_sectors_srcunit_tex_op_write.sum"] == 524_288
    # "n/a": ncu printed no number for that metric.
    assert kernels[3]["metrics"]["sm__inst_executed_pipe_tensor_op_gmma.sum"] is None


@pytest.mark.parametrize(
    ("unit", "value", "expected"),
    [("byte", "1,024", 1024.0), ("Kbyte", "2", 2000.0), ("Mbyte", "1.5", 1.5e6), ("", "7", 7.0)],
)
def test_scaled_units_are_brought_to_base_units(unit, value, expected):
    header = '"ID","Kernel Name","dram__bytes_read.sum"'
    text = f'{header}\n"","","{unit}"\n"0","k","{value}"\n'
    [kernel] = counters.parse_ncu_csv(text)
    assert kernel["metrics"]["dram__bytes_read.sum"] == expected


def test_output_without_a_table_is_an_error():
    with pytest.raises(counters.CountersError, match="no table"):
        counters.parse_ncu_csv("==PROF== Disconnected from process 1\n")


def test_the_marker_kernels_split_the_table_into_the_workloads_calls():
    kernels = counters.parse_ncu_csv(SAMPLE.read_text())
    calls = counters.split_by_mark(kernels, ["a", "b"])
    assert [k["id"] for k in calls["a"]] == [1]
    assert [k["id"] for k in calls["b"]] == [3, 4]


@pytest.mark.parametrize(
    ("ids", "fragment"),
    [([0, 1, 3, 4], "1 marked calls for 2"), ([1, 0, 2, 3, 4], "before the first marked call")],
)
def test_a_table_that_does_not_match_the_workloads_is_refused(ids, fragment):
    by_id = {k["id"]: k for k in counters.parse_ncu_csv(SAMPLE.read_text())}
    with pytest.raises(counters.CountersError, match=fragment):
        counters.split_by_mark([by_id[i] for i in ids], ["a", "b"])


def test_counters_are_summed_over_the_calls_kernels_against_the_minimum_bytes():
    calls = counters.split_by_mark(counters.parse_ncu_csv(SAMPLE.read_text()), ["a", "b"])
    one = counters.summarise(calls["a"], min_bytes=2 * 8192 * 1024 * 2, tool="ncu 2025.3.1.0")
    assert one["dram_bytes"] == 16_809_984 + 2_097_152
    # The writes still in the L2 at the kernel's end count, as the L2 saw them.
    assert one["l2_write_bytes"] == 524_288 * 32
    assert one["traffic_bytes"] == 16_809_984 + 524_288 * 32
    assert one["traffic_ratio"] == pytest.approx(1.001, abs=1e-3)
    assert one["tensor_share"] == 0.0 and one["kernels"] == 1 and one["tool"] == "ncu 2025.3.1.0"
    two = counters.summarise(calls["b"], min_bytes=2 * 4096 * 4096 * 4, tool="ncu")
    assert two["dram_read_bytes"] == 67_108_864 + 1_024
    assert two["traffic_bytes"] == 67_108_864 + 1_024 + (2_097_152 + 32) * 32
    assert two["tensor_instructions"] == 1_000_000 and two["instructions"] == 10_000_000
    assert two["tensor_share"] == pytest.approx(0.1)


def test_without_a_minimum_or_instructions_there_is_no_ratio_and_no_share():
    kernel = {"id": 0, "name": "k", "metrics": {"dram__bytes_read.sum": 10.0}}
    summary = counters.summarise([kernel], min_bytes=0, tool="ncu")
    assert summary["traffic_ratio"] is None and summary["tensor_share"] is None
    assert summary["l2_write_bytes"] is None and summary["traffic_bytes"] == 10


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
    note = counters.failure_note(text)
    assert (fragment in note and note.startswith("not read")) if fragment else note == ""


def timed_results(task):
    return [
        WorkloadResult(name=w.name, role=w.role, hidden=w.hidden, status=Status.CORRECT)
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


def test_without_ncu_the_note_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(counters, "child_path", lambda: str(tmp_path))
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
    assert set(argv[argv.index("--metrics") + 1].split(",")) == set(counters.METRICS.values())


def test_the_wrapper_runs_inside_the_sandbox_before_the_interpreter(tmp_path):
    argv, _, level = sandbox.sandbox_command(
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


@pytest.mark.slow
def test_the_childs_profiling_pass_follows_the_parents_plan(tmp_path):
    """The child's profile role on the CPU, the profiler's range faked: one call a workload."""
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    checks = task.workloads_for(Mode.INTERPRET)[:2]
    entries = [{"name": w.name, "params": w.params, "timed": True, "hidden": False} for w in checks]
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
        "import contextlib, evaluator.harness.counters as k; "
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
    reader = sandbox._Reader(read_fd, run, dealer.answer, reply_fd)
    reader.start()
    log = proc.communicate(timeout=600)[0].decode(errors="replace")
    reader.join(timeout=30)
    os.close(reply_fd)
    plan = dealer.record()
    seen = protocol.collect(run.messages, plan, run.bad_messages)
    assert seen.flags == [] and not dealer.problems and seen.done, (seen.flags, log[-3000:])
    assert list(seen.profiled) == [w.name for w in checks]
    assert [kind for kind, _ in plan["steps"]] == ["profile", "profile"]
    # Seeds as in any evaluation, asked for at the call: no check seed, no audit.
    for workload in plan["workloads"]:
        assert workload["seeds"] == [] and len(workload["calls"]) == 1


def test_a_profiling_step_refuses_seeds_for_other_purposes():
    dealer = protocol.Dealer(
        [{"name": "a", "params": {}, "timed": True, "hidden": False}], seeds=3, profile=True
    )
    assert dealer.answer({"what": "step"})["step"] == "profile"
    assert "seed" in dealer.answer({"what": "seed", "workload": "a", "purpose": "call"})
    assert "error" in dealer.answer({"what": "seed", "workload": "a", "purpose": "check"})
    assert "error" in dealer.answer({"what": "audit", "workload": "a", "call": 1})


def test_hidden_workloads_are_never_profiled():
    workloads = [
        {"name": "t", "timed": True, "hidden": False},
        {"name": "h", "timed": False, "hidden": True},
    ]
    assert protocol.steps_of(workloads, profile=True) == [("profile", "t")]


def test_a_timed_results_counters_travel_in_the_verdict_json():
    result = WorkloadResult(
        name="a", role=WorkloadRole.TIMED, hidden=False, status=Status.CORRECT, counters={"x": 1}
    )
    assert result.to_dict()["counters"] == {"x": 1}
    unread = WorkloadResult(name="b", role=WorkloadRole.HIDDEN, hidden=True, status=Status.CORRECT)
    assert unread.to_dict()["counters"] is None

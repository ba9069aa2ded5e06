"""Hardware counters of a correct submission: the DRAM bytes it moves and its tensor-core share.

    results, note = profile(task=..., source=..., mode=..., status=..., results=...)

Some design properties ("one pass over HBM", "the products run on the
tensor cores") cannot be decided from the source. Once an evaluation in
`cuda` mode is `correct`, a separate, untimed pass reads them from the GPU's
performance counters: a sandboxed child (the harness's own, in its
`profile` role) makes one call of each timed workload under Nsight Compute
(`ncu`), between `cudaProfilerStart` and `cudaProfilerStop`, so only the
submission's call is profiled: not the input generation, not the warm-up
call that compiles and autotunes. The counters are summed over the call's
kernels and attached to the workload's result; `note` is the sentence the
verdict's `environment["counters"]` records: which tool read them, or why
none could be read. The pass never changes the verdict.

The child asks for its seeds as in any evaluation (protocol.Dealer, the
purposes `model`, `warm` and `call`) and sees the timed workloads only,
whose parameters it was given already. ncu runs inside the sandbox, as the
parent of the child's interpreter, and writes its CSV into the scratch
folder, where the submission could overwrite it: the counters are evidence
for the design-property assessment, read in the submission's own process,
never a check.
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from taskformat.spec import Mode, TaskSpec, WorkloadRole

from . import judge, protocol, redact, sandbox
from .job import Job, PlannedWorkload, TimingSettings
from .spec import Status, WorkloadResult

# What ncu reads, per kernel. DRAM bytes are what crossed the memory
# interface during the kernel; the L2 write sectors are what the SMs wrote
# into the L2, which reaches DRAM as it is evicted (ncu flushes the caches
# before each kernel and not after, so up to the L2's size of a kernel's
# writes is still there, unwritten, when it ends). hmma counts warp-level
# mma instructions (mma.sync, Ampere's path, also on Hopper), gmma the
# warpgroup ones (wgmma, Hopper's own). The duration is each kernel's time on
# the device by ncu's clock, not the child's: a host-clock excess is held
# against it (orchestrate.settle_host_clock). ncu's table is still within the
# submission's reach (docs/exploits.md, Known gaps).
METRICS = {
    "duration": "gpu__time_duration.sum",
    "dram_read": "dram__bytes_read.sum",
    "dram_write": "dram__bytes_write.sum",
    "l2_write_sectors": "lts__t_sectors_srcunit_tex_op_write.sum",
    "instructions": "sm__inst_executed.sum",
    "hmma": "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "gmma": "sm__inst_executed_pipe_tensor_op_gmma.sum",
}
L2_SECTOR_BYTES = 32
# The kernel the child launches as each profiled call begins: it splits
# ncu's list of kernels into the workloads' calls.
MARK_KERNEL = "d2k_profile_mark"
MARK_PTX = f"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry {MARK_KERNEL}()
{{
    ret;
}}
"""
# Where Nsight Compute installs its versions, each with an `ncu` of its own.
NCU_ROOT = Path("/opt/nvidia/nsight-compute")
PROFILE_TIMEOUT_S = 300.0
CSV_LIMIT_BYTES = 8 * 1024 * 1024
PERMISSION_CODE = "ERR_NVGPUCTRPERM"
NCU_OPTIONS = (
    "--profile-from-start",
    "off",
    "--target-processes",
    "all",
    "--replay-mode",
    "kernel",
    "--cache-control",
    "all",
    "--clock-control",
    "none",
    "--csv",
    "--page",
    "raw",
    "--print-units",
    "base",
)
UNIT_SCALE = {
    "": 1.0,
    "byte": 1.0,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
    "tbyte": 1e12,
    "sector": 1.0,
    "inst": 1.0,
    "warp": 1.0,
    # Times, in nanoseconds.
    "nsecond": 1.0,
    "usecond": 1e3,
    "msecond": 1e6,
    "second": 1e9,
}


class CountersError(RuntimeError):
    """ncu's output cannot be read as counters; the message says why."""


# -- the child's side ---------------------------------------------------------


class Mark:
    """The marker kernel, loaded through the CUDA driver, and the profiler's range around a call."""

    def __init__(self) -> None:
        import torch

        from . import cover

        # The driver loads the module into the current context: torch's, made now.
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()
        self._torch = torch
        self._cudart = torch.cuda.cudart()
        self._cover = cover
        self.driver = ctypes.CDLL("libcuda.so.1")
        for name in ("cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel"):
            getattr(self.driver, name).restype = ctypes.c_int
        self.function = cover.load_function(self.driver, MARK_PTX, MARK_KERNEL.encode())

    @contextlib.contextmanager
    def profiled(self) -> Iterator[None]:
        """Profile the marker, then what runs inside, until the device is idle."""
        torch = self._torch
        torch.cuda.synchronize()
        self._cudart.cudaProfilerStart()
        try:
            stream = torch.cuda.current_stream().cuda_stream
            self._cover.launch_kernel(self.driver, self.function, 1, 1, stream, ())
            yield
            torch.cuda.synchronize()
        finally:
            self._cudart.cudaProfilerStop()


# -- reading ncu's output -----------------------------------------------------


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """The kernels of ncu's `--csv --page raw` output, in profiling order.

    The table starts at the header line whose first field is "ID" (ncu's own
    `==PROF==` lines may come before it); a second line with an empty ID
    gives each column's unit. Each kernel becomes {"id", "name", "metrics"},
    with every metric column as a float in base units (thousands separators
    dropped, Kbyte/Mbyte/... scaled), or None where ncu printed no number
    ("n/a"). Raises CountersError if there is no table.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise CountersError("ncu printed no table of kernels")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, body = rows[0], rows[1:]
    units: list[str] = [""] * len(header)
    if body and body[0] and body[0][0] == "":
        units, body = body[0], body[1:]
    metric_columns = [i for i, name in enumerate(header) if "__" in name]
    name_column = header.index("Kernel Name") if "Kernel Name" in header else None
    kernels = []
    for row in body:
        if len(row) != len(header) or not row[0].strip().isdigit():
            continue
        metrics = {
            header[i]: _number(row[i], units[i] if i < len(units) else "") for i in metric_columns
        }
        kernels.append(
            {
                "id": int(row[0]),
                "name": row[name_column] if name_column is not None else "",
                "metrics": metrics,
            }
        )
    return sorted(kernels, key=lambda k: k["id"])


def _number(value: str, unit: str) -> float | None:
    text = value.strip().replace(",", "")
    try:
        number = float(text)
    except ValueError:
        return None
    return number * UNIT_SCALE.get(unit.strip().lower(), 1.0)


def split_by_mark(kernels: list[dict[str, Any]], names: Sequence[str]) -> dict[str, list[dict]]:
    """The kernels of each workload's call: those after its marker, up to the next one.

    Raises CountersError unless there is exactly one marker per workload, in
    order, with nothing profiled before the first.
    """
    marks = [i for i, kernel in enumerate(kernels) if _is_mark(kernel["name"])]
    if len(marks) != len(names):
        raise CountersError(
            f"ncu profiled {len(marks)} marked calls for {len(names)} timed workloads"
        )
    if marks and marks[0] != 0:
        raise CountersError("ncu profiled kernels before the first marked call")
    ends = [*marks[1:], len(kernels)]
    return {
        name: kernels[start + 1 : end] for name, start, end in zip(names, marks, ends, strict=True)
    }


def _is_mark(name: str) -> bool:
    # ncu names a kernel by its function, demangled; with or without "()".
    return name.split("(")[0].strip() == MARK_KERNEL


def summarise(kernels: list[dict[str, Any]], *, min_bytes: float, tool: str) -> dict[str, Any]:
    """One workload's counters, summed over its call's kernels.

    `traffic_bytes` is DRAM reads plus the larger of DRAM writes and the
    bytes the SMs wrote into the L2 (which reach DRAM as they are evicted;
    what ncu's cache flush leaves dirty at a kernel's end is not in the
    DRAM writes). `tensor_share` is tensor-core instructions (hmma + gmma)
    over all instructions executed, None where no instruction was counted
    or neither tensor metric was read.
    """

    def total(key: str) -> float | None:
        values = [k["metrics"].get(METRICS[key]) for k in kernels]
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    read, write = total("dram_read") or 0.0, total("dram_write") or 0.0
    sectors = total("l2_write_sectors")
    l2_write = sectors * L2_SECTOR_BYTES if sectors is not None else None
    traffic = read + max(write, l2_write or 0.0)
    instructions = total("instructions")
    tensor_parts = [v for v in (total("hmma"), total("gmma")) if v is not None]
    tensor = sum(tensor_parts) if tensor_parts else None
    share = tensor / instructions if tensor is not None and instructions else None
    duration_ns = total("duration")
    return {
        "dram_bytes": int(read + write),
        "dram_read_bytes": int(read),
        "dram_write_bytes": int(write),
        "l2_write_bytes": int(l2_write) if l2_write is not None else None,
        "traffic_bytes": int(traffic),
        "min_bytes": int(min_bytes),
        "traffic_ratio": round(traffic / min_bytes, 4) if min_bytes > 0 else None,
        "tensor_instructions": int(tensor) if tensor is not None else None,
        "instructions": int(instructions) if instructions is not None else None,
        "tensor_share": round(share, 6) if share is not None else None,
        "kernels": len(kernels),
        # The call's kernels, back to back on the device, each from a flushed cache.
        "kernel_ms": round(duration_ns / 1e6, 6) if duration_ns is not None else None,
        "tool": tool,
    }


def failure_note(text: str) -> str:
    """Why ncu read no counters, from its output (or the child's log), as one sentence."""
    if PERMISSION_CODE in text:
        return (  # ncu: "ERR_NVGPUCTRPERM - The user does not have permission to access ..."
            f"not read: ncu may not read this GPU's performance counters ({PERMISSION_CODE}: "
            "profiling is restricted to administrators on this host)"
        )
    for line in text.splitlines():
        if line.startswith("==ERROR=="):
            return f"not read: ncu failed: {line.removeprefix('==ERROR==').strip()[:300]}"
    return ""


# -- the parent's side --------------------------------------------------------


# The child's compile caches (Triton's, load_inline's build folders), as named
# in its environment: the counters pass of the same source starts with them,
# so it runs what the timed child compiled instead of compiling it again.
BUILD_FOLDERS = (".triton", ".torch_extensions")


def take_builds(source: Path | None, workdir: Path) -> None:
    """Move the compile caches of the scratch folder `source` into `workdir`.

    Renamed, never copied or followed: a link the submission left in
    `source` stays there.
    """
    if source is None:
        return
    for name in BUILD_FOLDERS:
        folder = source / name
        if folder.is_dir() and not folder.is_symlink():
            with contextlib.suppress(OSError):
                os.rename(folder, workdir / name)


def find_ncu(path: str) -> str | None:
    """ncu on the child's PATH, or where Nsight Compute installs it; None if nowhere."""
    found = shutil.which("ncu", path=path)
    if found:
        return found
    for candidate in sorted(NCU_ROOT.glob("*/ncu"), reverse=True):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def ncu_version(ncu: str) -> str:
    """ "ncu 2025.3.1.0" from `ncu --version`, or "ncu" where it says nothing readable."""
    try:
        out = subprocess.run(
            [ncu, "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "ncu"
    match = re.search(r"Version\s+([0-9][\w.]*)", out)
    return f"ncu {match.group(1)}" if match else "ncu"


def ncu_command(ncu: str, csv_path: str) -> list[str]:
    """The wrapper the child's interpreter runs under: ncu, writing its table to `csv_path`."""
    return [ncu, *NCU_OPTIONS, "--metrics", ",".join(METRICS.values()), "--log-file", csv_path]


def child_path() -> str:
    """The PATH the sandboxed child gets (orchestrate does the same)."""
    return f"{Path(sys.executable).parent}:/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin"


def profile(
    *,
    task: TaskSpec,
    source: str,
    mode: Mode,
    status: Status,
    results: list[WorkloadResult],
    enabled: bool = True,
    timeout_s: float = PROFILE_TIMEOUT_S,
    memory_bytes: int | None = None,
    csv_sink: list[str] | None = None,
    builds: Path | None = None,
) -> tuple[list[WorkloadResult], str]:
    """`results` with each timed workload's counters attached, and the note for the verdict.

    Counters are read only in cuda mode, for a correct verdict, when enabled
    and ncu is there; otherwise the results come back as they were and the
    note says why. A failure of the pass is only a note. `csv_sink`, if
    given, receives what ncu wrote (its table) and the child's log, as they
    were, whether or not they could be read (bench/counters_table.py).
    `builds`, if given, is the timed child's scratch folder: the pass takes
    its compile caches over (take_builds).
    """
    if mode is not Mode.CUDA:
        return results, "not read: interpret mode runs no GPU kernel"
    if not enabled:
        return results, "not read: switched off (--no-counters)"
    if status is not Status.CORRECT:
        return results, "not read: counters are read for correct verdicts only"
    timed = [w for w in task.workloads_for(mode) if w.role is WorkloadRole.TIMED]
    if not timed:
        return results, "not read: the task has no timed workload"
    ncu = find_ncu(child_path())
    if ncu is None:
        return results, "not read: Nsight Compute (ncu) is not installed on this worker"
    tool = ncu_version(ncu)
    try:
        names = [w.name for w in timed]
        text = _profiling_pass(task, source, names, ncu, timeout_s, memory_bytes, csv_sink, builds)
        per_workload = split_by_mark(parse_ncu_csv(text), names)
    except CountersError as exc:
        return results, str(exc) if str(exc).startswith("not read") else f"not read: {exc}"
    minimum = {w.name: w.bytes for w in timed}
    counted = [
        dataclasses.replace(
            r, counters=summarise(per_workload[r.name], min_bytes=minimum[r.name], tool=tool)
        )
        if r.name in per_workload
        else r
        for r in results
    ]
    metrics = ", ".join(METRICS.values())
    return counted, (
        f"read by {tool} in a sandboxed, untimed pass: one call of each timed workload, "
        f"kernel replay, caches flushed before each kernel, clocks left alone; {metrics}"
    )


def _profiling_pass(
    task: TaskSpec,
    source: str,
    names: list[str],
    ncu: str,
    timeout_s: float,
    memory_bytes: int | None,
    sink: list[str] | None = None,
    builds: Path | None = None,
) -> str:
    """Run the child under ncu in the sandbox; ncu's CSV, or CountersError with the note."""
    entries = [
        PlannedWorkload(name=w.name, params=w.params, timed=True, hidden=False)
        for w in task.workloads
        if w.name in names
    ]
    dealer = protocol.Dealer(entries, seeds=task.seeds, profile=True)
    workdir = sandbox.scratch_folder(prefix="d2k-counters-")
    take_builds(builds, workdir)
    public_dir = Path(tempfile.mkdtemp(prefix="d2k-counters-task-"))
    try:
        reference = Path(task.directory) / "reference.py"
        shutil.copyfile(reference, public_dir / "reference.py")
        public_dir.chmod(0o755)
        (workdir / "submission.py").write_text(source)
        seen = sandbox.layout(workdir, public_dir.resolve())
        job = Job(
            mode=str(Mode.CUDA),
            reference=f"{seen.task}/reference.py",
            submission=f"{seen.work}/submission.py",
            profile=True,
            out_dir=f"{seen.work}/out",
            inplace=task.inplace,
            seeds=task.seeds,
            timing=TimingSettings(),
        )
        (workdir / "job.json").write_text(json.dumps(dataclasses.asdict(job)))
        run = sandbox.run_child(
            python_args=sandbox.child_args(f"{seen.work}/job.json"),
            workdir=workdir,
            task_dir=public_dir.resolve(),
            env=_child_env(seen.work),
            limits=sandbox.Limits(
                timeout_s=timeout_s, memory_bytes=memory_bytes or sandbox.default_memory_limit()
            ),
            gpu=True,
            answer=dealer.answer,
            wrapper=ncu_command(ncu, f"{seen.work}/ncu.csv"),
            # ncu manages the processes it profiles; no verdict depends on how this one ends.
            guard=False,
        )
        text = _read(workdir / "ncu.csv")
        log = run.log
        if sink is not None:
            sink += [text, log]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(public_dir, ignore_errors=True)
    observed = protocol.collect(run.messages, dealer.record())
    table = True
    try:
        parse_ncu_csv(text)
    except CountersError:
        table = False
    if run.killed_for:
        raise CountersError(f"not read: the profiling pass was killed ({run.killed_for})")
    if not table and PERMISSION_CODE in f"{text}\n{log}":
        raise CountersError(failure_note(f"{text}\n{log}"))
    if observed.error is not None:
        # The pass runs after the hidden workloads, with the timed child's compile caches:
        # the owner reads the exception's type only (redact.exception_type).
        kind = redact.exception_type(str(observed.error.get("message")))
        raise CountersError(f"not read: the profiled call failed ({kind})")
    if not table:
        raise CountersError(failure_note(text) or "not read: ncu printed no table of kernels")
    if not observed.done or observed.flags or dealer.problems:
        checks = "; ".join(sorted({f["check"] for f in observed.flags}))
        raise CountersError(
            "not read: the profiling pass did not finish as planned "
            f"(exit code {run.returncode}{'; ' + checks if checks else ''})"
        )
    if wrong := judge.wrong_profiled_calls(task, dealer.record(), observed.profiled):
        raise CountersError(
            f"not read: the profiled call of {', '.join(wrong)} did not compute the reference's "
            "answer"
        )
    return text


def _child_env(work: str) -> dict[str, str]:
    env = {
        "PATH": child_path(),
        "HOME": work,
        "TMPDIR": work,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "TRITON_CACHE_DIR": f"{work}/.triton",
        "TORCH_EXTENSIONS_DIR": f"{work}/.torch_extensions",
        "OMP_NUM_THREADS": "1",
    }
    for key in ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "TRITON_PTXAS_PATH"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(CSV_LIMIT_BYTES).decode(errors="replace")
    except OSError:
        return ""

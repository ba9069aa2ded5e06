"""Reading Nsight Compute's output: its table of kernels, split by call and summed.

ncu writes a CSV (`--csv --page raw`) with one row per kernel it profiled;
the counters pass reads it here into each timed workload's counters: the
DRAM bytes its call moved, against the least the task must move, and the
share of its instructions that ran on the tensor cores.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from .profilemark import MARK_KERNEL

# What ncu reads, per kernel. DRAM bytes are what crossed the memory
# interface during the kernel; the L2 write sectors are what the SMs wrote
# into the L2, which reaches DRAM as it is evicted (ncu flushes the caches
# before each kernel and not after, so up to the L2's size of a kernel's
# writes is still there, unwritten, when it ends). hmma counts warp-level
# mma instructions (mma.sync, Ampere's path, also on Hopper), gmma the
# warpgroup ones (wgmma, Hopper's own). The duration is each kernel's time on
# the device by ncu's clock, not the child's: a host-clock excess is held
# against it (timingchecks.settle_host_clock). ncu's table is still within the
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
# What a pass reads where only the kernels' device time is needed (a host-clock excess
# to settle, no counter rule to assess): one replay of each kernel instead of several.
DURATION_ONLY = ("duration",)
L2_SECTOR_BYTES = 32
PERMISSION_CODE = "ERR_NVGPUCTRPERM"
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
    DRAM writes); it and the DRAM figures are None where no DRAM metric was
    read. `tensor_share` is tensor-core instructions (hmma + gmma) over all
    instructions executed, None where no instruction was counted or neither
    tensor metric was read.
    """

    def total(key: str) -> float | None:
        values = [k["metrics"].get(METRICS[key]) for k in kernels]
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    dram_read, dram_write = total("dram_read"), total("dram_write")
    read, write = dram_read or 0.0, dram_write or 0.0
    sectors = total("l2_write_sectors")
    l2_write = sectors * L2_SECTOR_BYTES if sectors is not None else None
    # No DRAM figure at all where the pass read none (DURATION_ONLY): not zero bytes.
    dram = (dram_read, dram_write) != (None, None)
    traffic = read + max(write, l2_write or 0.0) if dram else None
    instructions = total("instructions")
    tensor_parts = [v for v in (total("hmma"), total("gmma")) if v is not None]
    tensor = sum(tensor_parts) if tensor_parts else None
    share = tensor / instructions if tensor is not None and instructions else None
    duration_ns = total("duration")
    ratio = round(traffic / min_bytes, 4) if traffic is not None and min_bytes > 0 else None
    return {
        "dram_bytes": int(read + write) if dram else None,
        "dram_read_bytes": int(read) if dram else None,
        "dram_write_bytes": int(write) if dram else None,
        "l2_write_bytes": int(l2_write) if l2_write is not None else None,
        "traffic_bytes": int(traffic) if traffic is not None else None,
        "min_bytes": int(min_bytes),
        "traffic_ratio": ratio,
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

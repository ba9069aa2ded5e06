"""What the verdict records about the machine: device, versions, clocks, ceilings."""

from __future__ import annotations

import platform
import socket
import subprocess
import threading
import time
from typing import Any

import torch

from taskformat.spec import Mode, WorkloadRole, WorkloadSpec

from . import gpulease
from .verdict import EVALUATOR_VERSION

SMI_FIELDS = (
    "name",
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "temperature.gpu",
    "power.draw",
    "clocks_throttle_reasons.active",
)


def resolve_mode(requested: str) -> Mode:
    if requested == "auto":
        return Mode.CUDA if torch.cuda.is_available() else Mode.INTERPRET
    return Mode(requested)


def gpu_uuid() -> str:
    """The UUID of the GPU torch calls device 0, as nvidia-smi prints it ("" without one).

    nvidia-smi ignores CUDA_VISIBLE_DEVICES and lists every GPU: the UUID picks
    the evaluation's own, so a run on a host's second GPU does not record the
    first one's clocks.
    """
    try:
        uuid = str(torch.cuda.get_device_properties(0).uuid)
    except (AssertionError, RuntimeError, AttributeError):
        return ""
    return uuid.lower().removeprefix("gpu-")


def is_gpu(listed: str, uuid: str) -> bool:
    """Whether a UUID as nvidia-smi lists it ("GPU-…") is `uuid` (from `gpu_uuid`); never for ""."""
    return bool(uuid) and listed.strip().lower().endswith(uuid)


def gpu_state() -> dict[str, str]:
    """Clocks, temperature and throttle reasons of the evaluation's GPU, from nvidia-smi, now.

    The state names its GPU's `uuid`. Where that cannot be matched to torch's
    device 0 (no CUDA in this process, or a driver that prints it otherwise),
    it is the first GPU listed.
    """
    fields = (*SMI_FIELDS, "uuid")
    try:
        lines = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {}
    states = [
        dict(zip(fields, (v.strip() for v in line.split(",")), strict=False))
        for line in lines
        if line.strip()
    ]
    uuid = gpu_uuid()
    own = [state for state in states if is_gpu(state.get("uuid", ""), uuid)]
    return (own or states or [{}])[0]


MONITOR_FIELDS = (
    "clocks.sm",
    "clocks.mem",
    "temperature.gpu",
    "power.draw",
    "clocks_throttle_reasons.active",
)
# nvmlClocksThrottleReasons bits, as nvidia-smi prints them in hexadecimal.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


class GpuMonitor:
    """Samples the evaluation's GPU while the child runs (`nvidia-smi --loop-ms`).

    Two nvidia-smi processes for the whole run, outside the sandbox, so the
    submission cannot see or stop them: one samples the GPU's state, and
    `summary()` goes into the verdict's environment as `gpu_state_during`
    (what the clocks, temperature, power and throttle reasons were while the
    kernels ran, not only before and after); the other lists the processes
    holding a CUDA context, for the census (`gpu_pids`).
    """

    # Processes holding a CUDA context, sampled more slowly: they live long.
    APPS_PERIOD_MS = 250

    def __init__(self, period_ms: int = 100):
        self.period_ms = period_ms
        # (process id, GPU UUID) of every CUDA context nvidia-smi listed.
        self.contexts: set[tuple[int, str]] = set()
        # (host monotonic clock, GPU UUID, (clocks.sm, clocks.mem, temperature,
        # power, throttle mask))
        self.samples: list[tuple[float, str, tuple[float, ...]]] = []
        self._procs: list[subprocess.Popen[str]] = []
        self._readers: list[threading.Thread] = []
        self._uuid = ""
        self.error = ""

    def __enter__(self) -> GpuMonitor:
        self._uuid = gpu_uuid()
        state = [
            f"--query-gpu={','.join((*MONITOR_FIELDS, 'uuid'))}",
            "--format=csv,noheader,nounits",
            f"--loop-ms={self.period_ms}",
        ]
        apps = [
            "--query-compute-apps=pid,gpu_uuid",
            "--format=csv,noheader",
            f"--loop-ms={self.APPS_PERIOD_MS}",
        ]
        for query, read in ((state, self._read_state), (apps, self._read_apps)):
            try:
                proc = subprocess.Popen(
                    ["nvidia-smi", *query],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            except OSError as exc:
                self.error = f"nvidia-smi could not start: {exc}"
                return self
            # The parent's own: never frozen while another evaluation is timed (gpulease).
            gpulease.trusted_pids.add(proc.pid)
            reader = threading.Thread(target=read, args=(proc,), daemon=True)
            reader.start()
            self._procs.append(proc)
            self._readers.append(reader)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self._procs:
            # No longer spared before it is reaped: a reaped pid may pass to a new process.
            gpulease.trusted_pids.discard(proc.pid)
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        for proc in self._procs:
            if proc.stdout is not None:
                proc.stdout.close()

    def _read_state(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            values, _, uuid = line.rpartition(",")
            sample = _parse_sample(values)
            if sample is not None:
                self.samples.append((time.monotonic(), uuid.strip().lower(), sample))

    def _read_apps(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            pid, _, uuid = line.partition(",")
            if pid.strip().isdigit():
                self.contexts.add((int(pid), uuid.strip().lower()))

    def gpu_pids(self) -> set[int]:
        """Processes seen holding a CUDA context on the evaluation's GPU (any GPU if unknown)."""
        return {pid for pid, uuid in self.contexts if not self._uuid or is_gpu(uuid, self._uuid)}

    def summary(self, windows: dict[str, tuple[float, float]] | None = None) -> dict[str, Any]:
        """The run's GPU state, and under `timing` each workload's timed loop alone.

        `windows` maps a workload to the host-clock span of its warm-up and
        timed calls (`protocol.timing_windows`).
        """
        gpus = {uuid for _, uuid, _ in self.samples}
        own = [(t, v) for t, uuid, v in self.samples if is_gpu(uuid, self._uuid)]
        samples = own or ([(t, v) for t, _, v in self.samples] if len(gpus) == 1 else [])
        if not samples:
            error = self.error or "nvidia-smi reported no samples"
            if len(gpus) > 1:
                error = "nvidia-smi listed several GPUs and none is the evaluation's"
            return {"samples": 0, "error": error}
        summary = {"period_ms": self.period_ms, **_state([v for _, v in samples])}
        timing = {}
        for name, (start, end) in (windows or {}).items():
            inside = [v for t, v in samples if start <= t <= end]
            if inside:
                timing[name] = _state(inside)
        if timing:
            summary["timing"] = timing
        return summary


def _state(samples: list[tuple[float, ...]]) -> dict[str, Any]:
    sm, mem, temp, power, reasons = zip(*samples, strict=True)
    seen: dict[str, int] = {}
    for mask in reasons:
        for bit, name in THROTTLE_REASONS.items():
            if int(mask) & bit:
                seen[name] = seen.get(name, 0) + 1
    return {
        "samples": len(samples),
        "sm_clock_mhz": _spread(sm),
        "mem_clock_mhz": _spread(mem),
        "temperature_c_max": max(temp),
        "power_w_max": max(power),
        # How many samples showed each reason; gpu_idle is the time between phases.
        "throttle_reasons": seen,
    }


def _parse_sample(line: str) -> tuple[float, ...] | None:
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != len(MONITOR_FIELDS):
        return None
    try:
        *numbers, mask = parts
        return (*(float(n) for n in numbers), float(int(mask, 16)))
    except ValueError:
        return None


def _spread(values: tuple[float, ...]) -> dict[str, float]:
    ordered = sorted(values)
    return {"min": ordered[0], "median": ordered[len(ordered) // 2], "max": ordered[-1]}


def describe(mode: Mode) -> dict[str, Any]:
    import triton

    info: dict[str, Any] = {
        "mode": str(mode),
        "evaluator_version": EVALUATOR_VERSION,
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cpu": platform.processor() or platform.machine(),
        "comparable": mode is Mode.CUDA,
    }
    if mode is Mode.CUDA:
        props = torch.cuda.get_device_properties(0)
        info.update(
            device=props.name,
            gpu=props.name,
            sm_count=props.multi_processor_count,
            memory_gib=round(props.total_memory / 1024**3, 1),
            l2_bytes=int(getattr(props, "L2_cache_size", 0)),
            capability=f"{props.major}.{props.minor}",
            cuda=torch.version.cuda,
            gpu_state_before=gpu_state(),
        )
        info["driver"] = info["gpu_state_before"].get("driver_version", "")
    else:
        info["device"] = "CPU (Triton interpreter)"
    return info


def compute_dtypes(workloads: tuple[WorkloadSpec, ...]) -> dict[str, str]:
    """The matrix unit each public timed workload's FLOPs count against (its ceiling).

    For readers of the verdict without the task package (the catalog bar);
    hidden workloads are left out, since the verdict's environment is public.
    """
    return {w.name: w.compute_dtype for w in workloads if w.role is WorkloadRole.TIMED}

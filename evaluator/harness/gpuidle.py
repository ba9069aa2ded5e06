"""Has the GPU gone idle? The drain before a timed phase on a shared GPU (gpulease).

Processes that are frozen launch nothing more, but what they had queued still runs.
The driver keeps a history of the GPU's utilisation samples (NVML's
`nvmlDeviceGetSamples`, the percentage of each sampling period in which a kernel
ran); the GPU has drained once a sample reads 0 over a period that began after the
freeze. Where NVML cannot be loaded, `nvidia-smi`'s current utilisation is read
until it reads 0. NVML is read through ctypes, so the harness needs no package.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import shutil
import subprocess
import time

# How long a drain may take before the processes still busy on the GPU are named (and
# their evaluations end them), and before the evaluation gives up (our fault: worker_error).
BUSY_AFTER_S = 5.0
IDLE_TIMEOUT_S = 30.0
POLL_S = 0.02
_GPU_UTILIZATION_SAMPLES = 1
_NVML_SUCCESS = 0
_NVML_ERROR_NOT_FOUND = 6
_MAX_SAMPLES = 256


class _Value(ctypes.Union):
    _fields_ = [
        ("d", ctypes.c_double),
        ("ui", ctypes.c_uint),
        ("ul", ctypes.c_ulong),
        ("ull", ctypes.c_ulonglong),
        ("sll", ctypes.c_longlong),
    ]


class _Sample(ctypes.Structure):
    _fields_ = [("timeStamp", ctypes.c_ulonglong), ("sampleValue", _Value)]


class _ProcessSample(ctypes.Structure):
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("timeStamp", ctypes.c_ulonglong),
        ("smUtil", ctypes.c_uint),
        ("memUtil", ctypes.c_uint),
        ("encUtil", ctypes.c_uint),
        ("decUtil", ctypes.c_uint),
    ]


class Nvml:
    """The few NVML calls the drain needs, on the GPU this process may use."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != _NVML_SUCCESS:
            raise OSError("nvmlInit failed")
        self.device = ctypes.c_void_p()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        if visible.startswith(("GPU-", "MIG-")):
            status = self.lib.nvmlDeviceGetHandleByUUID(visible.encode(), ctypes.byref(self.device))
        else:
            index = int(visible) if visible.isdigit() else 0
            status = self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.device))
        if status != _NVML_SUCCESS:
            raise OSError(f"NVML has no handle for GPU {visible or 0} (status {status})")

    def utilization_samples(self, after_us: int) -> list[tuple[int, int]]:
        """(timestamp in microseconds of the wall clock, percent busy) of each sample since."""
        kind, count = ctypes.c_int(), ctypes.c_uint(_MAX_SAMPLES)
        buffer = (_Sample * _MAX_SAMPLES)()
        status = self.lib.nvmlDeviceGetSamples(
            self.device, _GPU_UTILIZATION_SAMPLES, ctypes.c_ulonglong(after_us),
            ctypes.byref(kind), ctypes.byref(count), buffer,
        )  # fmt: skip
        if status == _NVML_ERROR_NOT_FOUND:
            return []  # no sample since
        if status != _NVML_SUCCESS:
            raise OSError(f"nvmlDeviceGetSamples failed (status {status})")
        return sorted((s.timeStamp, int(s.sampleValue.ui)) for s in buffer[: count.value])

    def busy_pids(self, window_us: int) -> set[int]:
        """Processes whose kernels ran in the newest `window_us` of the driver's samples."""
        count = ctypes.c_uint(_MAX_SAMPLES)
        buffer = (_ProcessSample * _MAX_SAMPLES)()
        status = self.lib.nvmlDeviceGetProcessUtilization(
            self.device, buffer, ctypes.byref(count), ctypes.c_ulonglong(0)
        )
        if status == _NVML_ERROR_NOT_FOUND:
            return set()
        if status != _NVML_SUCCESS:
            raise OSError(f"nvmlDeviceGetProcessUtilization failed (status {status})")
        samples = buffer[: count.value]
        newest = max((s.timeStamp for s in samples), default=0)
        return {s.pid for s in samples if s.smUtil > 0 and s.timeStamp >= newest - window_us}


_nvml: Nvml | None = None
_nvml_error = ""


def _load() -> Nvml | None:
    global _nvml, _nvml_error
    if _nvml is None and not _nvml_error:
        try:
            _nvml = Nvml()
        except (OSError, AttributeError) as exc:
            _nvml_error = str(exc)
    return _nvml


def wait_idle(*, since: float, timeout_s: float = IDLE_TIMEOUT_S) -> str:
    """Wait until the GPU has run nothing for a whole sampling period after `since`
    (a `time.monotonic()` reading, when the other evaluations were frozen).
    Returns "" once idle, else why not.

    The samples' own clock is the measure: the first period that counts starts no
    earlier than the newest sample taken before the wait (never before `since`'s
    sample), so no clock of this process need match the driver's.
    """
    global _nvml_error
    deadline = time.monotonic() + timeout_s
    nvml = _load()
    try:
        history = nvml.utilization_samples(0) if nvml else []
    except OSError as exc:
        nvml, _nvml_error, history = None, str(exc), []
    # Without any sample yet: the wall clock, which the driver's timestamps follow.
    newest = history[-1][0] if history else int((time.time() - (time.monotonic() - since)) * 1e6)
    period_us = _period(history)
    while time.monotonic() < deadline:
        if nvml is not None:
            try:
                samples = nvml.utilization_samples(newest)
            except OSError as exc:
                nvml, _nvml_error = None, str(exc)
                continue
            if any(v == 0 and t >= newest + period_us for t, v in samples):
                return ""
        elif _smi_utilization() == 0:
            return ""
        time.sleep(POLL_S)
    return f"the GPU stayed busy for {timeout_s:g} s after every other evaluation on it was frozen"


def busy_pids() -> set[int]:
    """The processes whose kernels kept the GPU busy over the last few seconds (empty
    where NVML cannot say)."""
    nvml = _load()
    try:
        return nvml.busy_pids(int(BUSY_AFTER_S * 1e6)) if nvml else set()
    except OSError:
        return set()


def _period(samples: list[tuple[int, int]]) -> int:
    """The sampling period: the median gap between samples (1 s where none is known)."""
    gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(samples) if b[0] > a[0])
    return gaps[len(gaps) // 2] if gaps else 1_000_000


def _smi_utilization() -> int | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0  # no GPU to wait for
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
    try:
        out = subprocess.run(
            [smi, "-i", visible, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
        return int(out.strip().splitlines()[0])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError):
        return None


def method() -> str:
    """How the drain reads the GPU here: for the verdict's environment."""
    if _load() is not None and not _nvml_error:
        return "NVML utilisation samples"
    return f"nvidia-smi utilisation ({_nvml_error})"

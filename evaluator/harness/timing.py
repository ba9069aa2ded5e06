"""Device timing helpers (used inside the child process).

Protocol (docs/evaluator.md, Timing): every timed call gets freshly generated
inputs, the L2 cache is flushed and persisting L2 lines are reset before it,
and the call is bracketed by CUDA events on the current stream. Reference and
submission calls alternate in the same process so clock changes cancel in
their ratio. The median over calls is the figure; the interquartile range is
its spread.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable, Sequence

import torch

from .cover import Cover

CUDA_LIMIT_PERSISTING_L2 = 0x06

# The primitives every measurement rests on, taken when the harness is
# imported, before any submission: a submission that patches
# `torch.cuda.Event.elapsed_time` (or `_sleep`, `synchronize`, the Event class)
# is flagged by PatchGuard, and its patch cannot bend, or hang, the harness's
# own measurements.
_Event = torch.cuda.Event
_record = torch.cuda.Event.record
# The C method under it, with the stream given: nothing of torch.cuda's
# Python side runs between a call's return and its end event.
# (A CPU build of torch has no such method; it times nothing.)
_record_on = getattr(torch._C._CudaEventBase, "record", _record)
_elapsed = torch.cuda.Event.elapsed_time
_event_sync = torch.cuda.Event.synchronize
_sleep = torch.cuda._sleep
_synchronize = torch.cuda.synchronize
_current_stream = torch.cuda.current_stream
_stream_synchronize = torch.cuda.Stream.synchronize
_empty_cache = torch.cuda.empty_cache
_copy = torch.Tensor.copy_
_perf_counter = time.perf_counter


def event() -> torch.cuda.Event:
    return _Event(enable_timing=True)


def record(ev: torch.cuda.Event) -> None:
    _record(ev)


def elapsed_ms(start: torch.cuda.Event, end: torch.cuda.Event) -> float:
    return float(_elapsed(start, end))


def synchronize() -> None:
    """Wait for the whole device."""
    _synchronize()


def release_cached_memory() -> None:
    """Wait for the device, then hand the allocator's unused blocks back to the driver.

    Each workload is timed from this state, so where its tensors land does not
    depend on which workloads ran before it in the process. On the H200 this
    narrowed, but did not remove, a short reference's drift from one
    evaluation to the next (docs/lab/benchmarks-history.md, series 3).
    """
    _synchronize()
    _empty_cache()


# How long the GPU is kept busy after the flush, so that the host has queued
# the timed call before the start event fires: the events then measure the
# kernels, not Python launch overhead (which the back-to-back batch shows).
LAUNCH_COVER_US = 200.0
# A call that takes the host longer than that to queue would start its
# kernels as the host queues them, and its events would time the host. So
# each timing phase sizes the cover to the calls it covers: twice the median
# time the host took to queue a warm-up call, plus this, and never past the
# ceiling (a call that slow to queue is timed with its host time, and the
# calls whose queueing outlasted their cover are counted in the verdict).
COVER_MARGIN_US = 100.0
MAX_COVER_US = 20_000.0


def cover_for(queue_us: Sequence[float]) -> float:
    """The cover, in µs, for calls the host queued in `queue_us` each (warm-up calls)."""
    if not queue_us:
        return LAUNCH_COVER_US
    wanted = 2.0 * statistics.median(queue_us) + COVER_MARGIN_US
    return min(max(LAUNCH_COVER_US, wanted), MAX_COVER_US)


class L2Flusher:
    """Evicts the L2 cache by writing a buffer twice its size, then covers the launch.

    Both are one kernel that holds every SM while it runs (cover.py), so that
    no work of the submission's can start on another stream during the cover.
    Where the kernel cannot be loaded, a plain write and a one-thread sleep do
    the flush and the cover, and `describe()` says so.
    """

    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        size = max(int(getattr(props, "L2_cache_size", 0)) * 2, 256 * 1024 * 1024)
        self.buffer = torch.zeros(-(-size // 16) * 16, dtype=torch.uint8, device=device)
        self._cudart = _load_cudart()
        self.cover_us = LAUNCH_COVER_US
        # How long the host took to queue the last timed call after its cover (timed_call).
        self.queue_us = 0.0
        self.cover, self.cover_problem = Cover.load(device)
        self.sleep_cycles = _cycles_for(LAUNCH_COVER_US) if self.cover is None else 0

    def flush(self) -> None:
        # The device is idle when the cover is queued. Work queued before it
        # (the inputs, the poisoned block) would otherwise still be running
        # when the call starts, and a side stream of the submission's could
        # start beside it, ahead of the cover (seen on the H200 with 4b).
        _synchronize()
        self.reset_persisting()
        if self.cover is not None:
            self.cover.launch(self.buffer, self.cover_us, _current_stream().cuda_stream)
            return
        self.buffer.zero_()
        _sleep(int(self.sleep_cycles * self.cover_us / LAUNCH_COVER_US))

    def reset_persisting(self) -> None:
        """Reset lines a submission may have marked persisting with an access policy window.

        A plain write does not evict them.
        """
        if self._cudart is not None:
            self._cudart.cudaCtxResetPersistingL2Cache()
            self._cudart.cudaDeviceSetLimit(CUDA_LIMIT_PERSISTING_L2, ctypes.c_size_t(0))

    def describe(self) -> dict:
        """Which launch cover ran: for the verdict's environment."""
        if self.cover is not None:
            described = self.cover.describe()
        else:
            described = {"kind": "sleep", "why": self.cover_problem}
        return described | {"microseconds": self.cover_us}

    @property
    def resets_persisting_lines(self) -> bool:
        return self._cudart is not None

    def persisting_l2_bytes(self) -> int:
        """The persisting-L2 limit now: non-zero only if someone set it since the flush."""
        if self._cudart is None:
            return 0
        value = ctypes.c_size_t(0)
        self._cudart.cudaDeviceGetLimit(ctypes.byref(value), CUDA_LIMIT_PERSISTING_L2)
        return int(value.value)


def current_stream() -> torch.cuda.Stream:
    return _current_stream()


def timed_call(
    model,
    inputs: Sequence,
    flusher: L2Flusher,
    staged: Sequence[tuple] = (),
    take: Callable[[object], object] | None = None,
) -> tuple[tuple, object]:
    """One timed call: flush and cover, then the call between two events on the current stream.

    Returns the (start, end) events and the call's output (what `take` made
    of it, right after the end event, where given), once the current stream
    (only) has finished. `flusher.queue_us` is how long the host took from
    the cover to the end event: past `flusher.cover_us`, the GPU may have
    waited for the host.
    `staged` holds (destination, source) tensor pairs copied on the current
    stream after the cover, before the start event: an audit call's inputs,
    which are then written only once the GPU is released (Child._audit_call).
    """
    start, end = event(), event()
    stream = _current_stream()
    flusher.flush()
    queued = _perf_counter()
    for destination, source in staged:
        _copy(destination, source)
    _record_on(start, stream)
    out = model(*inputs)
    _record_on(end, stream)
    flusher.queue_us = (_perf_counter() - queued) * 1e6
    if take is not None:
        out = take(out)
    # The call's own stream only: work left on other streams may still run, and
    # the outputs read again once the device is idle show it (escaped_work).
    _stream_synchronize(stream)
    return (start, end), out


def _cycles_for(microseconds: float) -> int:
    """GPU clock cycles that torch.cuda._sleep spins for about `microseconds`.

    Clamped to what a GPU clock can be (0.1 to 5 GHz), so a wrong reading can
    never make the launch cover spin for seconds.
    """
    probe = 1_000_000
    _sleep(probe)  # warm-up
    start, end = event(), event()
    record(start)
    _sleep(probe)
    record(end)
    _event_sync(end)
    per_us = probe / max(elapsed_ms(start, end) * 1e3, 1e-3)
    return int(min(max(per_us, 100.0), 5000.0) * microseconds)


def _load_cudart() -> ctypes.CDLL | None:
    """The CUDA runtime that torch already loaded, found through its own process map."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libcudart" in line}
    except OSError:
        paths = set()
    for path in sorted(paths) or ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]:
        try:
            lib = ctypes.CDLL(path)
            lib.cudaCtxResetPersistingL2Cache.restype = ctypes.c_int
            lib.cudaDeviceSetLimit.restype = ctypes.c_int
            lib.cudaDeviceGetLimit.restype = ctypes.c_int
            return lib
        except (OSError, AttributeError):
            continue
    return None


def summarize(times_ms: Sequence[float]) -> tuple[float, float, float]:
    """Median, interquartile range and minimum of a series of times."""
    ordered = sorted(times_ms)
    if len(ordered) < 4:
        med = statistics.median(ordered)
        return med, 0.0, ordered[0]
    q = statistics.quantiles(ordered, n=4)
    return q[1], q[2] - q[0], ordered[0]

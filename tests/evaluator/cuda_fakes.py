"""CPU stand-ins for the CUDA timing calls, so cuda mode's message flow runs on a CPU box.

Used only by test_harness_child_protocol.py, in a child process of its own.
"""

import time

import torch


class FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        self.stamp = 0.0

    def record(self, stream=None) -> None:
        self.stamp = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, other: "FakeEvent") -> float:
        return (other.stamp - self.stamp) * 1e3


class FakeStream:
    def synchronize(self) -> None:
        pass


class FakeFlusher:
    """The flusher's interface, doing nothing."""

    resets_persisting_lines = False

    def __init__(self, device) -> None:
        self.cover_us = 200.0
        self.queue_us = 0.0

    def flush(self) -> None:
        pass

    def persisting_l2_bytes(self) -> int:
        return 0

    def describe(self) -> dict:
        return {"kind": "fake"}


def install() -> None:
    from evaluator.harness import timing

    torch.cuda.Event = FakeEvent
    torch.cuda.current_stream = lambda device=None: FakeStream()
    torch.cuda.synchronize = lambda device=None: None
    # The harness times through the primitives it snapshotted at import.
    timing._Event = FakeEvent
    timing._record = FakeEvent.record
    timing._record_on = FakeEvent.record
    timing._elapsed = FakeEvent.elapsed_time
    timing._event_sync = FakeEvent.synchronize
    timing._synchronize = lambda: None
    timing._current_stream = FakeStream
    timing._stream_synchronize = FakeStream.synchronize
    timing._empty_cache = lambda: None
    timing.L2Flusher = FakeFlusher

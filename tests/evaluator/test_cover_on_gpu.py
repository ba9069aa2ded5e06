"""The exclusive launch cover on a real GPU: nothing on another stream runs beside it.

    python -m pytest -o addopts="" -m gpu tests/evaluator/test_cover_on_gpu.py

A kernel queued on a high-priority side stream while the cover runs must
finish only after the start event that follows the cover. The control, the
one-thread sleep the harness used before, lets the same kernel finish before
that event: so the test can tell the two apart.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _event() -> torch.cuda.Event:
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def _device_ms(work: torch.Tensor) -> float:
    """One `work.mul_` on the device alone, in ms.

    Queued behind a sleep, so that its events time the kernel and not the
    host's launch after an idle GPU (80 µs more on one H200 host).
    """
    torch.cuda.synchronize()
    torch.cuda._sleep(1_000_000)
    start = _event()
    work.mul_(1.0)
    end = _event()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def _side_work_against(cover) -> tuple[float, float, float]:
    """(start event, side kernel's end, side kernel alone), in ms after a mark before the cover."""
    side = torch.cuda.Stream(priority=torch.cuda.Stream.priority_range()[1])
    work = torch.ones(64 * 2**20, device="cuda")  # 256 MB: about 0.1 ms to scale
    for _ in range(50):  # out of the idle clocks
        work.mul_(1.0)
    alone = [_device_ms(work) for _ in range(5)]

    mark = _event()
    cover()
    start = _event()
    with torch.cuda.stream(side):
        work.mul_(1.0)
        side_end = _event()
    torch.cuda.synchronize()
    return mark.elapsed_time(start), mark.elapsed_time(side_end), min(alone)


def test_the_cover_holds_every_sm_of_this_gpu():
    from evaluator.harness import timing

    flusher = timing.L2Flusher(torch.device("cuda"))
    assert flusher.cover is not None, flusher.cover_problem
    described = flusher.describe()
    assert described["kind"] == "exclusive", described
    assert (
        described["blocks_per_sm"] * described["threads_per_block"] >= described["threads_per_sm"]
    )


def test_no_side_stream_work_starts_before_the_start_event():
    from evaluator.harness import timing

    flusher = timing.L2Flusher(torch.device("cuda"))
    results = [_side_work_against(flusher.flush) for _ in range(5)]
    for start, side_end, alone in results:
        assert 0.2 <= start < 2.0, f"the cover took {start:.3f} ms"
        # The side kernel ran after the start event, whole.
        assert side_end >= start + 0.8 * alone, (start, side_end, alone)


def test_the_old_one_thread_sleep_let_side_work_run_ahead():
    from evaluator.harness import timing

    buffer = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    cycles = timing._cycles_for(timing.LAUNCH_COVER_US)

    def sleep_cover() -> None:
        buffer.zero_()
        timing._sleep(cycles)

    ahead = [_side_work_against(sleep_cover) for _ in range(5)]
    assert any(side_end < start for start, side_end, _ in ahead), ahead

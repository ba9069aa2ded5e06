"""The judge's GPU work beside other evaluations' memory: it waits and runs again (gpumemory)."""

import contextlib
import gc
import weakref

import pytest
import torch

from evaluator.harness import gpulease, gpumemory
from evaluator.harness.leasereport import LeaseReport

TORCH_MESSAGE = (
    "CUDA out of memory. Tried to allocate 7.00 GiB. GPU 0 has a total capacity of 139.80 GiB "
    "of which 4.52 GiB is free. Process 1738 has 46.08 GiB memory in use."
)


class FakeLease:
    """A lease with `sharing` other evaluations; records whether parent work is under way."""

    def __init__(self, sharing: int):
        self.sharing = sharing
        self.report = LeaseReport()
        self.busy = 0

    def others(self) -> int:
        return self.sharing

    @contextlib.contextmanager
    def parent_work(self):
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1


@pytest.fixture
def clock(monkeypatch):
    """The module's clock and sleep on a fake time line; the GPU's free bytes as set."""
    state = {"now": 0.0, "free": 0, "slept_busy": [], "released_busy": []}

    def sleep(seconds):
        state["slept_busy"].append(gpulease.current().busy)
        state["now"] += seconds

    monkeypatch.setattr(gpumemory, "_clock", lambda: state["now"])
    monkeypatch.setattr(gpumemory, "_sleep", sleep)
    monkeypatch.setattr(gpumemory, "_free_bytes", lambda: state["free"])
    monkeypatch.setattr(
        gpumemory, "release_cache", lambda: state["released_busy"].append(gpulease.current().busy)
    )
    return state


def share(monkeypatch, sharing: int) -> FakeLease:
    lease = FakeLease(sharing)
    monkeypatch.setattr(gpulease, "current", lambda: lease)
    return lease


def failing(times: int, then: object = "done"):
    """Work that runs out of GPU memory `times` times, then returns `then`."""
    calls = []

    def work():
        calls.append(gpulease.current().busy)
        if len(calls) <= times:
            raise torch.OutOfMemoryError(TORCH_MESSAGE)
        return then

    return work, calls


def test_torch_s_message_says_what_the_failed_allocation_asked_for():
    assert gpumemory.asked_bytes(torch.OutOfMemoryError(TORCH_MESSAGE)) == 7 * 2**30
    assert gpumemory.asked_bytes(RuntimeError("Tried to allocate 512.00 MiB")) == 512 * 2**20
    assert gpumemory.asked_bytes(RuntimeError("out of memory")) == 2**30


def test_out_of_memory_beside_another_evaluation_waits_for_the_memory_and_runs_again(
    monkeypatch, clock
):
    lease = share(monkeypatch, sharing=2)
    work, calls = failing(1)
    # The neighbours give back 8 GiB after 3 s: the 7 GiB asked for fit, it runs again.
    monkeypatch.setattr(gpumemory, "_free_bytes", lambda: 8 * 2**30 if clock["now"] >= 3 else 2**30)
    assert gpumemory.MemoryWaits().run(work) == "done"
    assert calls == [1, 1]  # each try is the parent's GPU work
    assert clock["slept_busy"] == [0, 0, 0]  # it waits outside it: timed phases go on
    assert clock["released_busy"] == [1]  # its cache is given back as GPU work of its own
    assert lease.report.memory_waits == 1 and lease.report.memory_wait_s == 3.0


def test_a_try_is_made_again_every_twenty_seconds_even_without_the_memory(monkeypatch, clock):
    lease = share(monkeypatch, sharing=1)
    work, calls = failing(2)
    assert gpumemory.MemoryWaits().run(work) == "done"
    assert len(calls) == 3
    assert lease.report.memory_waits == 2 and lease.report.memory_wait_s == 40.0


def test_alone_on_the_gpu_out_of_memory_stands_at_once(monkeypatch, clock):
    lease = share(monkeypatch, sharing=0)
    work, calls = failing(1)
    with pytest.raises(torch.OutOfMemoryError):
        gpumemory.MemoryWaits().run(work)
    assert len(calls) == 1 and clock["now"] == 0.0
    assert lease.report.memory_waits == 0


def test_the_wait_has_a_limit_for_the_whole_evaluation(monkeypatch, clock):
    share(monkeypatch, sharing=3)
    waits = gpumemory.MemoryWaits(limit_s=50.0)
    work, calls = failing(10)
    with pytest.raises(torch.OutOfMemoryError):
        waits.run(work)
    assert len(calls) == 3 and clock["now"] == 50.0  # tries at 0, 20 and 40 s
    # What is left of the limit is the evaluation's, not each piece's.
    again, more = failing(1)
    with pytest.raises(torch.OutOfMemoryError):
        waits.run(again)
    assert len(more) == 1 and clock["now"] == 50.0


def test_undo_puts_back_what_a_failed_try_changed(monkeypatch, clock):
    share(monkeypatch, sharing=1)
    flags: list[str] = []
    tries = []

    def work():
        tries.append(1)
        flags.append("flagged during the try")
        if len(tries) == 1:
            raise torch.OutOfMemoryError(TORCH_MESSAGE)
        return len(flags)

    assert gpumemory.MemoryWaits().run(work, undo=flags.clear) == 1


def test_other_errors_are_not_waited_for(monkeypatch, clock):
    share(monkeypatch, sharing=1)

    def work():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(RuntimeError):
        gpumemory.MemoryWaits().run(work)
    assert clock["now"] == 0.0


def test_what_the_failed_try_allocated_is_freed_before_the_wait(monkeypatch, clock):
    # The error's traceback holds the failed try's frames, and their tensors with them.
    share(monkeypatch, sharing=1)

    class Block:  # a tensor the failed try had allocated
        pass

    alive = []

    def allocate_then_fail():
        block = Block()
        alive.append(weakref.ref(block))
        raise torch.OutOfMemoryError(TORCH_MESSAGE)

    def work():
        if not alive:
            allocate_then_fail()
        return "done"

    def release():
        gc.collect()
        clock["released"] = [ref() is None for ref in alive]

    monkeypatch.setattr(gpumemory, "release_cache", release)
    assert gpumemory.MemoryWaits().run(work) == "done"
    assert clock["released"] == [True]


# Each layer's words for running out of the GPU's memory, as torch 2.11 and Triton 3.6 raise them.
RUNTIME_OUT_OF_MEMORY = (
    "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some "
    "other API call, so the stacktrace below might be incorrect.\nFor debugging consider "
    "passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side "
    "assertions.\n"
)


@pytest.mark.parametrize(
    ("text", "gpu"),
    [
        (f"torch.OutOfMemoryError: {TORCH_MESSAGE}", True),
        (f"torch.AcceleratorError: {RUNTIME_OUT_OF_MEMORY}", True),
        ("RuntimeError: CUDA driver error: out of memory", True),
        ("RuntimeError: Triton Error [CUDA]: out of memory", True),
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
            "`cublasCreate(handle)`",
            True,
        ),
        ("RuntimeError: cuFFT error: CUFFT_ALLOC_FAILED", True),
        ("RuntimeError: CURAND_STATUS_ALLOCATION_FAILED", True),
        ("MemoryError", False),  # the host's memory: the evaluation's own
        ("numpy.core._exceptions._ArrayMemoryError: Unable to allocate 8.00 GiB", False),
        ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", False),
    ],
)
def test_the_gpu_s_memory_running_out_reads_alike_in_every_layer(text, gpu):
    assert gpumemory.gpu_out_of_memory(text) is gpu


def test_a_cuda_runtime_out_of_memory_is_waited_for_as_the_allocator_s_is(monkeypatch, clock):
    # A module loaded or a context made beside others' memory fails in the CUDA runtime,
    # not in torch's allocator: torch raises AcceleratorError, not OutOfMemoryError.
    lease = share(monkeypatch, sharing=2)
    tries = []

    def work():
        tries.append(1)
        if len(tries) == 1:
            raise torch.AcceleratorError(RUNTIME_OUT_OF_MEMORY)
        return "done"

    clock["free"] = 2 * 2**30  # as much as an allocation that names no size asks for
    assert gpumemory.MemoryWaits().run(work) == "done"
    assert len(tries) == 2 and lease.report.memory_waits == 1


# As the H200 said it (the 0.6.4 campaign's worker log), and the same process asking for
# more than the GPU has.
FITS_ALONE = (
    "CUDA out of memory. Tried to allocate 7.00 GiB. GPU 0 has a total capacity of 139.80 GiB "
    "of which 4.52 GiB is free. Process 1738 has 46.08 GiB memory in use. Including "
    "non-PyTorch memory, this process has 8.23 GiB memory in use."
)
NEVER_FITS = FITS_ALONE.replace("Tried to allocate 7.00 GiB", "Tried to allocate 132.00 GiB")


def test_an_allocation_more_than_the_gpu_could_give_the_process_alone_is_beyond_it():
    assert not gpumemory.beyond_the_gpu(FITS_ALONE)  # 8.23 + 7 GiB of 139.80
    assert gpumemory.beyond_the_gpu(NEVER_FITS)  # 8.23 + 132 GiB of 139.80
    # A message that does not say all three (the CUDA runtime's) is not beyond it.
    assert not gpumemory.beyond_the_gpu("CUDA error: out of memory")
    assert not gpumemory.beyond_the_gpu(NEVER_FITS.split(" Including")[0])


def test_no_wait_for_memory_the_gpu_could_never_give(monkeypatch, clock):
    lease = share(monkeypatch, sharing=3)
    tries = []

    def work():
        tries.append(1)
        raise torch.OutOfMemoryError(NEVER_FITS)

    with pytest.raises(torch.OutOfMemoryError):
        gpumemory.MemoryWaits().run(work)
    assert len(tries) == 1 and clock["now"] == 0.0 and lease.report.memory_waits == 0

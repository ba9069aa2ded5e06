"""The judge's GPU work on a GPU whose memory other evaluations hold: wait, then try again.

The parent of an evaluation computes the reference's outputs and compares on the GPU
(judge.py), beside the other evaluations that share the GPU (gpulease). When a piece
of that work runs out of GPU memory while others share the GPU (`short_beside_others`:
in whichever layer, for no more than the GPU could give it alone), the memory is
theirs for now: failing would throw away everything the evaluation measured (a worker
error takes it again from the start, its timed phases included). So the piece gives
its cached memory back (as GPU work of its own) and waits, outside the parent's GPU
work (no timed phase elsewhere waits for it), until the GPU has as much free as the
failed allocation asked for, or `RETRY_EVERY_S` has passed, and runs again. After
`WAIT_LIMIT_S` of waiting in all, or with no other evaluation on the GPU, the error
stands. Each wait is counted in the verdict's `gpu_lease` (`memory_waits`,
`memory_wait_s`).
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Callable
from typing import TypeVar

import torch

from . import gpulease

T = TypeVar("T")

WAIT_LIMIT_S = 240.0
RETRY_EVERY_S = 20.0
POLL_S = 1.0
# What torch's allocator says of a failed allocation: what it asked for, the GPU's
# memory, and what the process held then ("Including non-PyTorch memory, this process
# has 8.23 GiB memory in use").
_SIZE = r"([0-9.]+) (B|KiB|MiB|GiB|TiB)"
_ASKED = re.compile(rf"Tried to allocate {_SIZE}")
_TOTAL = re.compile(rf"total capacity of {_SIZE}")
_HELD = re.compile(rf"this process has {_SIZE} memory in use")
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_FALLBACK_BYTES = 2**30
# How running out of the GPU's memory reads, whichever layer ran out: torch's allocator
# (torch.OutOfMemoryError, "CUDA out of memory"); the CUDA runtime or driver, loading a
# module or making a context beside others' memory ("CUDA error: out of memory", as
# torch.AcceleratorError; "CUDA driver error: out of memory"; Triton's "Triton Error
# [CUDA]: out of memory"); a CUDA library's handle or workspace ("CUBLAS_STATUS_ALLOC_FAILED",
# cuFFT's "CUFFT_ALLOC_FAILED", cuRAND's "CURAND_STATUS_ALLOCATION_FAILED").
_GPU_OUT_OF_MEMORY = re.compile(
    r"OutOfMemoryError|CUDA out of memory|CUDA (?:driver )?error: out of memory"
    r"|Triton Error \[CUDA\]: out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"
    r"|\b[A-Z]+_(?:STATUS_)?ALLOC(?:ATION)?_FAILED\b"
)

_clock = time.monotonic
_sleep = time.sleep


def _free_bytes() -> int:
    return int(torch.cuda.mem_get_info()[0])


def release_cache() -> None:
    """This process's cached GPU blocks back to the GPU, for the evaluations beside it
    (the caller holds it as the parent's GPU work: gpulease.parent_work)."""
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def gpu_out_of_memory(text: str) -> bool:
    """Whether an error's text says the GPU's memory ran out (host memory is another matter)."""
    return _GPU_OUT_OF_MEMORY.search(text) is not None


def _bytes(pattern: re.Pattern[str], text: str) -> int | None:
    found = pattern.search(text)
    return None if found is None else int(float(found.group(1)) * _UNITS[found.group(2)])


def asked_bytes(error: BaseException) -> int:
    """The bytes the failed allocation asked for, from torch's message (1 GiB if unsaid)."""
    asked = _bytes(_ASKED, str(error))
    return _FALLBACK_BYTES if asked is None else asked


def beyond_the_gpu(text: str) -> bool:
    """Whether torch's message says the allocation could not have fit even with no other
    process on the GPU: what the process held and asked for is more than the GPU has.
    Then the other evaluations' memory made no difference."""
    asked, total, held = (_bytes(p, text) for p in (_ASKED, _TOTAL, _HELD))
    if asked is None or total is None or held is None:
        return False
    return asked + held > total


def short_beside_others(text: str) -> bool:
    """Whether an error's text says the GPU's memory ran out in a way other processes'
    memory can explain: in any layer, for no more than the GPU could give this one alone."""
    return gpu_out_of_memory(text) and not beyond_the_gpu(text)


class MemoryWaits:
    """One evaluation's judging: its GPU work, each piece tried again after waiting for memory."""

    def __init__(self, limit_s: float = WAIT_LIMIT_S):
        self.limit_s = limit_s
        self.waited_s = 0.0

    def run(self, work: Callable[[], T], *, undo: Callable[[], None] | None = None) -> T:
        """`work()` as a piece of the parent's GPU work (gpulease.parent_work).

        On running out of GPU memory beside other evaluations it waits and runs it
        again; `undo` first puts back what a failed attempt changed.
        """
        while True:
            try:
                with gpulease.current().parent_work():
                    return work()
            except RuntimeError as error:  # torch.OutOfMemoryError and AcceleratorError among them
                if not short_beside_others(f"{type(error).__name__}: {error}"):
                    raise
                # What the failed try allocated lives on in its frames until they are cleared.
                traceback.clear_frames(error.__traceback__)
                if undo is not None:
                    undo()
                if not self._waited_for(asked_bytes(error)):
                    raise

    def _waited_for(self, asked: int) -> bool:
        """Wait until `asked` bytes are free; False where waiting cannot help or took too long."""
        lease = gpulease.current()
        with lease.parent_work():  # freeing blocks is the parent's GPU work too
            release_cache()
        if lease.others() == 0 or self.waited_s >= self.limit_s:
            return False
        started = _clock()
        while True:
            _sleep(POLL_S)
            spent = _clock() - started
            if self.waited_s + spent >= self.limit_s:
                self._count(lease, spent)
                return False
            if spent >= RETRY_EVERY_S or _free_bytes() >= asked:
                self._count(lease, spent)
                return True

    def _count(self, lease: gpulease.NoLease | gpulease.GpuLease, spent: float) -> None:
        self.waited_s += spent
        lease.report.memory_waits += 1
        lease.report.memory_wait_s += spent

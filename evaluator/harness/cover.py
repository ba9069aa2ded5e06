"""The exclusive launch cover: one kernel that flushes the L2 cache and holds the whole GPU.

Before each timed call the GPU is kept busy while the host queues the call,
so that the start event measures kernels and not Python launch overhead.
`torch.cuda._sleep` did that with one thread, which left every other SM free:
a submission could start work on a stream of its own during the cover, ahead
of the start event, and the events would never see it (exploit 4b).

This cover fills every SM's thread slots for its whole length. A block from
any other kernel needs at least one warp slot, so nothing else can start on
the device until the cover ends, and the start event follows it. Its blocks
also write the flush buffer first, so the flush itself is no window either.
What remains: a kernel already queued on another stream takes the SMs as the
cover's blocks retire, a few microseconds before the start event is stamped.
Where that kernel reads the call's inputs, the audit calls catch it
(Child._audit_call); where it reads none, see docs/exploits.md, "Known gaps".

The kernel is PTX, loaded through the CUDA driver that torch already has
loaded (ctypes, no compiler), and launched on the caller's stream. Where that
fails, `Cover.load` returns None and the caller falls back to the one-thread
sleep, and says so in the verdict.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

import torch

BLOCK_THREADS = 512
KERNEL_NAME = b"d2k_cover"

# Spins with nanosleep for `ns` nanoseconds, by the GPU's global timer, then
# writes zeros over the buffer (16 bytes a store, grid-stride): the host has
# the cover to queue the timed call, and the flush is the last thing before
# the start event, so nothing that ran while the cover held the GPU (a copy
# engine's transfer on another stream, say) leaves the call's data in the L2.
# Then the blocks leave together: each block's first thread adds one to
# `counter` and waits until it reaches `target` (every block of this launch
# has arrived; they are all resident, so none waits on a block that cannot
# start), or until 1 ms past its own flush as a safety valve. Blocks whose
# share of the flush drained late would otherwise leave late, and another
# stream's kernel could take the SMs freed by the early ones before the start
# event (seen on the H200: 48 µs ahead).
# `.maxntid` and `.minnctapersm 4` keep it within 32 registers a thread, so
# that 4 blocks of 512 threads (2048, an SM's limit on Hopper and Ampere) fit
# on one SM at once.
PTX = r"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry d2k_cover(
    .param .u64 buffer,
    .param .u64 chunks,
    .param .u64 ns,
    .param .u64 counter,
    .param .u64 target
)
.maxntid 512, 1, 1
.minnctapersm 4
{
    .reg .pred %p<6>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<18>;

    ld.param.u64 %rd2, [buffer];
    ld.param.u64 %rd3, [chunks];
    ld.param.u64 %rd4, [ns];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd5, %r2, %r3;
    cvt.u64.u32 %rd6, %r1;
    add.u64 %rd5, %rd5, %rd6;
    mul.wide.u32 %rd7, %r3, %r4;
    mov.b32 %r5, 0;
    mov.u64 %rd1, %globaltimer;
    add.u64 %rd10, %rd1, %rd4;
WAIT:
    nanosleep.u32 256;
    mov.u64 %rd11, %globaltimer;
    setp.lt.u64 %p2, %rd11, %rd10;
    @%p2 bra WAIT;
FLUSH:
    setp.ge.u64 %p1, %rd5, %rd3;
    @%p1 bra FLUSHED;
    shl.b64 %rd8, %rd5, 4;
    add.u64 %rd9, %rd2, %rd8;
    st.global.v4.b32 [%rd9], {%r5, %r5, %r5, %r5};
    add.u64 %rd5, %rd5, %rd7;
    bra FLUSH;
FLUSHED:
    barrier.sync 0;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra DONE;
    ld.param.u64 %rd12, [counter];
    ld.param.u64 %rd13, [target];
    atom.global.add.u64 %rd14, [%rd12], 1;
    mov.u64 %rd1, %globaltimer;
    add.u64 %rd15, %rd1, 1000000;
ARRIVE:
    ld.volatile.global.u64 %rd16, [%rd12];
    setp.ge.u64 %p4, %rd16, %rd13;
    @%p4 bra DONE;
    mov.u64 %rd17, %globaltimer;
    setp.ge.u64 %p5, %rd17, %rd15;
    @%p5 bra DONE;
    nanosleep.u32 64;
    bra ARRIVE;
DONE:
    barrier.sync 0;
    ret;
}
"""

CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39


class CoverError(RuntimeError):
    pass


def _check(code: int, what: str) -> None:
    if code != 0:
        raise CoverError(f"{what} failed with CUDA driver error {code}")


def load_function(driver: ctypes.CDLL, ptx: str, name: bytes) -> ctypes.c_void_p:
    """The kernel `name` of a PTX module, JIT-compiled by the driver into the current context."""
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    _check(driver.cuModuleLoadData(ctypes.byref(module), ptx.encode()), "cuModuleLoadData")
    _check(driver.cuModuleGetFunction(ctypes.byref(function), module, name), "cuModuleGetFunction")
    return function


def launch_kernel(
    driver: ctypes.CDLL,
    function: ctypes.c_void_p,
    grid: int,
    block: int,
    stream_handle: int,
    values: Sequence[int],
) -> None:
    """Queue `function` on the stream, with 64-bit parameters `values`."""
    args = [ctypes.c_uint64(value) for value in values]
    params = (ctypes.c_void_p * len(args))(
        *(ctypes.cast(ctypes.byref(arg), ctypes.c_void_p) for arg in args)
    )
    _check(
        driver.cuLaunchKernel(
            function, grid, 1, 1, block, 1, 1, 0, ctypes.c_void_p(stream_handle), params, None
        ),
        "cuLaunchKernel",
    )


@dataclass
class Cover:
    """The loaded kernel, its launch shape, and whether it holds every SM alone."""

    driver: ctypes.CDLL
    function: ctypes.c_void_p
    grid: int
    blocks_per_sm: int
    threads_per_sm: int
    sm_count: int
    counter: torch.Tensor  # blocks arrived, over all launches so far
    launches: int = 0

    @property
    def exclusive(self) -> bool:
        return self.blocks_per_sm * BLOCK_THREADS >= self.threads_per_sm

    def describe(self) -> dict:
        return {
            "kind": "exclusive" if self.exclusive else "partial",
            "blocks_per_sm": self.blocks_per_sm,
            "threads_per_block": BLOCK_THREADS,
            "threads_per_sm": self.threads_per_sm,
            "sm_count": self.sm_count,
        }

    @classmethod
    def load(cls, device: torch.device, ptx: str = PTX) -> tuple[Cover | None, str]:
        """The cover for `device` (whose context torch made current), or None and why not.

        `ptx` is for experiments: a variant of `PTX` with the same entry
        point and parameters first.
        """
        try:
            return cls._load(device, ptx), ""
        except (OSError, AttributeError, CoverError) as exc:
            return None, f"{type(exc).__name__}: {exc}"

    @classmethod
    def _load(cls, device: torch.device, ptx: str) -> Cover:
        driver = ctypes.CDLL("libcuda.so.1")
        for name in (
            "cuModuleLoadData",
            "cuModuleGetFunction",
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
            "cuDeviceGetAttribute",
            "cuCtxGetDevice",
            "cuLaunchKernel",
        ):
            getattr(driver, name).restype = ctypes.c_int
        function = load_function(driver, ptx, KERNEL_NAME)
        blocks = ctypes.c_int()
        _check(
            driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(blocks), function, BLOCK_THREADS, ctypes.c_size_t(0)
            ),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        )
        handle, threads = ctypes.c_int(), ctypes.c_int()
        _check(driver.cuCtxGetDevice(ctypes.byref(handle)), "cuCtxGetDevice")
        _check(
            driver.cuDeviceGetAttribute(
                ctypes.byref(threads), CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, handle
            ),
            "cuDeviceGetAttribute",
        )
        sm_count = torch.cuda.get_device_properties(device).multi_processor_count
        if blocks.value < 1:
            raise CoverError("the cover kernel fits no block on an SM")
        return cls(
            driver=driver,
            function=function,
            grid=blocks.value * sm_count,
            blocks_per_sm=blocks.value,
            threads_per_sm=threads.value,
            sm_count=sm_count,
            counter=torch.zeros(1, dtype=torch.int64, device=device),
        )

    def launch(self, buffer: torch.Tensor, microseconds: float, stream_handle: int) -> None:
        """Queue the cover on the stream: write `buffer` (a multiple of 16 bytes), hold the GPU."""
        self.launches += 1
        values = (
            buffer.data_ptr(),
            buffer.numel() * buffer.element_size() // 16,
            int(microseconds * 1000),
            self.counter.data_ptr(),
            self.launches * self.grid,
        )
        launch_kernel(self.driver, self.function, self.grid, BLOCK_THREADS, stream_handle, values)

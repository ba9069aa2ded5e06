"""The child's side of the counters pass: the marker kernel and the profiler's range.

Each profiled call begins with a launch of an empty kernel of the harness's
own (MARK_KERNEL), loaded through the CUDA driver, so the kernels ncu lists
split into the workloads' calls (ncu_report.split_by_mark); the range
(`cudaProfilerStart`/`Stop`) holds that call alone.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator

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

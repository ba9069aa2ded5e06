"""Compile for an H200 (sm_90) every Triton kernel an expert launches on a workload, with no GPU.

    python -m tests.catalog.gpu_compile SLUG [EXPERT.py [WORKLOAD]]   # one JSON line per workload
    python -m tests.catalog.gpu_compile --grids-only FOLDER           # FOLDER/<slug>.py, each task

Triton's CPU interpreter runs a kernel's Python; it does not type-check it
as the GPU compiler does (a plain float global, a loop-carried value that
changes type, an op the backend lacks), and the experts' interpreter-only
switches (an fp32 upcast before tl.dot) hide the code the GPU runs. Here
the expert's own host code runs as on a GPU (every tensor reports cuda:0,
the device has 132 SMs) on the workload's shapes, and each launch is
compiled to a cubin with Triton's sm_90 backend and ptxas instead of run.

Each launch's grid is checked against what a CUDA device accepts (at most
2^31 - 1 programs on axis 0 and 65,535 on axes 1 and 2): the interpreter runs
any grid, the GPU refuses a larger one ("invalid argument") before the kernel
starts. `--grids-only` checks the grids of every kernel file of FOLDER (named
after its task) on every workload in one process, compiling nothing.

Tensors carry shapes, not data, where they are large: factory calls of
more than BIG elements make meta tensors, smaller ones real CPU tensors, so
get_inputs and host code that read a few values (group sizes, a step count)
still can. Kernels never run, so outputs are garbage; nothing reads them.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

os.environ.pop("TRITON_INTERPRET", None)  # before triton is imported: real JIT functions

import torch
from torch.overrides import TorchFunctionMode
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from triton.runtime.jit import JITFunction

from evaluator.harness.workload import load_module
from taskformat.package import DEFAULT_CATALOG_DIR
from tests.catalog.drawn import load_drawn

CUDA = torch.device("cuda", 0)
H200 = {"multi_processor_count": 132, "name": "NVIDIA H200", "major": 9, "minor": 0}
BIG = 1 << 22  # elements
FACTORIES = {torch.randn, torch.rand, torch.empty, torch.zeros, torch.ones, torch.full}


class _Driver:
    """What JITFunction.run asks of the active driver, for a device that is not there."""

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cuda", 90, 32)

    def get_active_torch_device(self) -> torch.device:
        return CUDA


class _Pointer:
    """A tensor argument as the launcher specialises it: its dtype and 16-byte alignment."""

    def __init__(self, t: torch.Tensor):
        self.dtype = t.dtype
        self._address = (1 << 20) + t.storage_offset() * t.element_size()

    def data_ptr(self) -> int:
        return self._address


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    return []


def _to_meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.device.type != "meta":
        return value.to("meta")
    if isinstance(value, list | tuple):
        return type(value)(_to_meta(v) for v in value)
    return value


def _size(args: tuple) -> int:
    shape = args[0] if len(args) == 1 and isinstance(args[0], list | tuple) else args
    n = 1
    for s in shape:
        if not isinstance(s, int):
            return 0
        n *= s
    return n


class _Shapes(TorchFunctionMode):
    """Large factory tensors on meta; an op that meets a meta tensor takes all its inputs there."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if kwargs.get("device") is not None and torch.device(kwargs["device"]).type == "cuda":
            kwargs["device"] = "meta"
        if func in FACTORIES and _size(args) > BIG:
            kwargs["device"] = "meta"
        if any(
            t.device.type == "meta" for t in _tensors(list(args)) + _tensors(list(kwargs.values()))
        ):
            args, kwargs = _to_meta(args), {k: _to_meta(v) for k, v in kwargs.items()}
        if func is torch.Tensor.to:
            # .to("cuda") / .to(device, non_blocking=True): stay where the tensor is.
            args = tuple(a for a in args if not isinstance(a, str | torch.device))
            kwargs.pop("non_blocking", None)
            kwargs.pop("device", None)
        return func(*args, **kwargs)


_inside = threading.local()
_real_device = torch._C.TensorBase.device.__get__  # type: ignore[attr-defined]


def _device(self: torch.Tensor) -> torch.device:
    # torch's own Python (decompositions, refs) sees the real device.
    return _real_device(self) if getattr(_inside, "depth", 0) else CUDA


class _OnGpu(_Shapes):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        _inside.depth = getattr(_inside, "depth", 0) + 1
        try:
            return super().__torch_function__(func, types, args, kwargs)
        finally:
            _inside.depth -= 1


_launch = JITFunction.run
compiled: list[str] = []
# What a CUDA device launches: programs on grid axes 0, 1 and 2.
GRID_LIMITS = (2**31 - 1, 65535, 65535)
# Off under --grids-only: each launch's grid checked, nothing compiled.
COMPILE = True


def launch_grid(fn: JITFunction, args: tuple, kwargs: dict, grid: Any) -> tuple[int, int, int]:
    """The launch's grid as Triton resolves it: a callable gets the bound arguments."""
    if callable(grid):
        signature = inspect.signature(fn.fn)
        bound = signature.bind_partial(
            *args, **{k: v for k, v in kwargs.items() if k in signature.parameters}
        )
        bound.apply_defaults()
        grid = grid({**bound.arguments, **kwargs})
    sizes = tuple(int(n) for n in grid)
    return (*sizes, *(1,) * (3 - len(sizes)))  # type: ignore[return-value]


def _grid_checked(fn: JITFunction, args: tuple, kwargs: dict, grid: Any) -> None:
    """Raise where a CUDA device would refuse the launch's grid."""
    sizes = launch_grid(fn, args, kwargs, grid)
    for axis, (n, most) in enumerate(zip(sizes, GRID_LIMITS, strict=True)):
        if n > most:
            raise ValueError(
                f"{fn.fn.__name__} launches a grid of {sizes}: {n:,} programs on axis "
                f"{axis}, where a CUDA device takes at most {most:,}"
            )


def _compile(self: JITFunction, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
    _grid_checked(self, args, kwargs, grid)
    compiled.append(self.fn.__name__)
    if not COMPILE:
        return None
    args = tuple(_Pointer(a) if isinstance(a, torch.Tensor) else a for a in args)
    kwargs = {k: _Pointer(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    return _launch(self, *args, grid=grid, warmup=True, **kwargs)


@contextlib.contextmanager
def as_on_an_h200():
    """Host code sees a CUDA device; Triton compiles each launch for sm_90 and runs nothing."""
    props = type("Properties", (), H200)()
    patches = [
        (torch.cuda, "get_device_properties", lambda *a, **k: props),
        (torch.cuda, "get_device_capability", lambda *a, **k: (9, 0)),
        (torch.cuda, "current_device", lambda: 0),
        (torch.cuda, "is_available", lambda: True),
        (torch.cuda, "synchronize", lambda *a, **k: None),
        (torch.Tensor, "device", property(_device)),
        (torch.Tensor, "is_cuda", property(lambda self: True)),
        (torch.Tensor, "pin_memory", lambda self, *a, **k: self),
        (JITFunction, "run", _compile),
    ]
    saved = [(owner, name, owner.__dict__.get(name)) for owner, name, _ in patches]
    driver.set_active(_Driver())
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        with _OnGpu():
            yield
    finally:
        for owner, name, value in saved:
            if value is None:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def compile_workloads(slug: str, expert_path: str = "", only: str = "") -> list[dict]:
    """The task's expert (or the file at expert_path) on every workload (or the one named only)."""
    task = load_drawn(slug)
    reference = load_module(str(DEFAULT_CATALOG_DIR / slug / "reference.py"), f"ref_{slug}")
    expert_path = expert_path or str(DEFAULT_CATALOG_DIR / slug / "expert.py")
    expert = load_module(expert_path, f"expert_{slug}")
    results = []
    for workload in task.workloads:
        if only and workload.name != only:
            continue
        compiled.clear()
        result: dict[str, Any] = {"workload": workload.name}
        try:
            torch.manual_seed(0)
            with _Shapes():
                inputs = list(reference.get_inputs(**workload.params))
                init = reference.get_init_inputs(**workload.params)
            with as_on_an_h200(), torch.no_grad():
                expert.ModelNew(*init)(*inputs)
            result["status"] = "ok"
        except Exception as exc:  # reported, not raised: every workload gets its line
            result["status"] = "error"
            result["message"] = f"{type(exc).__name__}: {exc}"[:3000]
            result["traceback"] = traceback.format_exc(limit=-3)[-2000:]
        result["kernels"] = list(compiled)
        results.append(result)
    return results


def grids_of_folder(folder: str) -> list[dict]:
    """Every kernel file FOLDER/<slug>.py on its task's workloads: grids checked, nothing
    compiled; each line names its task."""
    global COMPILE
    COMPILE = False
    lines = []
    for path in sorted(Path(folder).glob("*.py")):
        if (DEFAULT_CATALOG_DIR / path.stem / "task.toml").is_file():
            lines += [{"task": path.stem, **r} for r in compile_workloads(path.stem, str(path))]
    return lines


if __name__ == "__main__":
    if sys.argv[1:2] == ["--grids-only"]:
        results = grids_of_folder(sys.argv[2])
    else:
        results = compile_workloads(*sys.argv[1:4])
    for line in results:
        print(json.dumps(line), flush=True)

"""In-process honesty instruments used by the sandboxed child (SPEC §6).

These run inside the process that also runs the submission, so a determined
submission can interfere with them; each is therefore backed by a check that
the parent makes from outside (see docs/evaluator.md, "Defence in depth").
"""

from __future__ import annotations

import builtins
import gc as _gc
import inspect
import json
import os
import sys
import threading
import time
from types import ModuleType
from typing import Any

import torch
import torch.profiler
from torch.utils._python_dispatch import TorchDispatchMode

# Taken before any submission is imported (see PatchGuard).
_device_synchronize = torch.cuda.synchronize
_vars, _len, _isinstance = vars, len, isinstance
_gettrace, _getprofile = sys.gettrace, sys.getprofile


def _patch_targets() -> list[tuple[str, Any, str]]:
    targets: list[tuple[str, Any, str]] = []

    def add(owner: Any, owner_name: str, *names: str) -> None:
        targets.extend((owner_name, owner, n) for n in names if hasattr(owner, n))

    add(time, "time", "perf_counter", "perf_counter_ns", "time", "monotonic", "sleep")
    add(builtins, "builtins", "open", "print", "__import__")
    add(os, "os", "write", "fdopen", "_exit")
    add(json, "json", "dumps")
    add(torch, "torch", "save", "equal", "dot", "manual_seed", "empty", "randn", "rand")
    add(torch.Tensor, "torch.Tensor", "clone", "copy_", "zero_", "fill_", "double", "float")
    add(torch.Tensor, "torch.Tensor", "item", "__eq__", "data_ptr", "cpu", "to")
    add(torch.cuda, "torch.cuda", "synchronize", "Event", "current_stream", "Stream", "empty_cache")
    add(torch.cuda.Event, "torch.cuda.Event", "record", "elapsed_time", "synchronize", "query")
    add(torch.cuda.Stream, "torch.cuda.Stream", "synchronize", "wait_stream")
    add(torch.nn.Module, "torch.nn.Module", "__call__")
    add(TorchDispatchMode, "TorchDispatchMode", "__enter__", "__exit__", "__torch_dispatch__")
    add(torch.profiler.profile, "torch.profiler.profile", "__enter__", "__exit__", "events")
    for name, module in list(sys.modules.items()):
        if name.startswith("evaluator.harness") and module is not None:
            for attr, value in vars(module).items():
                if callable(value) and not attr.startswith("__"):
                    targets.append((name, module, attr))
                # Methods of the harness's own classes, and the guard itself.
                if isinstance(value, type) and value.__module__ == name:
                    targets.extend(
                        (f"{name}.{attr}", value, method)
                        for method in vars(value)
                        if method not in ("__dict__", "__weakref__")
                    )
    return targets


def _guarded_namespaces() -> list[tuple[str, Any]]:
    """Every namespace whose contents the harness relies on when it calls or reads.

    Whole namespaces, not lists of names: a deferred output can hide behind
    any method of `torch.Tensor` or any function of `torch`, `pickle` or `io`
    that the harness, or torch on its behalf, reaches after a call.
    """
    import io
    import pickle

    spaces: list[tuple[str, Any]] = [
        ("torch.Tensor", torch.Tensor),
        ("torch", torch),
        ("torch._C", torch._C),
        ("torch.cuda", torch.cuda),
        ("torch.cuda.Event", torch.cuda.Event),
        ("torch.cuda.Stream", torch.cuda.Stream),
        ("torch.nn.Module", torch.nn.Module),
        ("builtins", builtins),
        ("pickle", pickle),
        ("io", io),
        ("os", os),
        ("json", json),
        ("time", time),
    ]
    spaces += [
        (name, module)
        for name, module in sorted(sys.modules.items())
        if name.startswith("evaluator.harness") and module is not None
    ]
    return spaces


def _hooks() -> frozenset[str]:
    """Ways to run code later, at a moment of the harness's choosing, that hold no patch.

    A garbage-collector callback and a `sys.monitoring` tool run their code
    in the middle of the harness's own; the guard reports any added after its
    snapshot. (Audit hooks cannot be added at all: `block_audit_hooks`.)
    """
    found = {f"gc.callbacks[{id(callback)}]" for callback in _gc.callbacks}
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        found |= {
            f"sys.monitoring tool {tool} ({monitoring.get_tool(tool)})"
            for tool in range(6)
            if monitoring.get_tool(tool) is not None
        }
    return frozenset(found)


# Values that hold no code: torch's own state flips between them as it goes
# (`torch.cuda._initialized` on the first CUDA call), and no read runs them.
_DATA = (bool, int, float, str, bytes, type(None))


def _both_data(before: object, now: object) -> bool:
    """An entry that held plain data and still does: state, not a patch."""
    return type(before) in _DATA and type(now) in _DATA


def block_audit_hooks() -> None:
    """From now on, no audit hook can be added to this process.

    An audit hook runs at events the harness's own reads raise (opening a
    file, for one), so it could compute a deferred output there. Adding one
    raises the audit event `sys.addaudithook`, and a hook that raises a
    RuntimeError on it makes Python drop the addition (quietly): the harness
    adds that hook before the submission is imported.
    """

    def refuse(event: str, args: tuple) -> None:
        if event == "sys.addaudithook":
            raise RuntimeError("the evaluator does not allow audit hooks")

    sys.addaudithook(refuse)


def settle_torch() -> None:
    """Make now the changes torch's compiler makes to torch itself on its first compile.

    On its first compilation, TorchDynamo wraps `torch.manual_seed` and
    `torch.nn.Module.__init__` (and adds an attribute to `Module`). A
    baseline that is compiled (torch.compile) is first compiled in the
    middle of timing, where the guard would take those changes for the
    submission's. Made before the guard's snapshot, they are part of it.
    """
    try:
        from torch._dynamo import eval_frame, mutation_guard
    except ImportError:
        return
    patch = getattr(getattr(eval_frame, "TorchPatcher", None), "patch", None)
    tagging = getattr(mutation_guard, "install_generation_tagging_init", None)
    for step in (patch, tagging):
        if callable(step):
            step()


class Tampered(Exception):
    """A guarded namespace changed around a call: its result is not read (flag `monkeypatch`)."""

    def __init__(self, names: list[str]):
        super().__init__(", ".join(names))
        self.names = names


class PatchGuard:
    """Remembers the identity of everything that timing and checking rely on.

    Two records, both taken before the submission is imported:
    - every entry of the guarded namespaces (`_guarded_namespaces`), checked
      by identity before and after every call of the submission's
      (`patched`): an entry replaced or removed, or a new entry on a class,
      is a patch. A module may gain submodules (an import adds them);
    - the named functions of `_patch_targets`, read statically (a class
      method looked up gives a new bound method every time, its stored
      descriptor stays the same), checked after each phase (`changed`).
    """

    def __init__(self) -> None:
        self._snapshot = [
            (o, owner, n, inspect.getattr_static(owner, n, None))
            for o, owner, n in _patch_targets()
        ]
        self._spaces = [
            (name, owner, dict(vars(owner)), isinstance(owner, ModuleType))
            for name, owner in _guarded_namespaces()
        ]
        self._trace = (sys.gettrace(), sys.getprofile())
        self._hooks = _hooks()

    def patched(self) -> list[str]:
        """The guarded namespaces' entries that changed since the snapshot (empty: none)."""
        found: list[str] = []
        for name, owner, before, is_module in self._spaces:
            now = _vars(owner)
            found += [
                f"{name}.{key}"
                for key, value in before.items()
                if now.get(key) is not value and not _both_data(value, now.get(key))
            ]
            if _len(now) != _len(before):
                found += [
                    f"{name}.{key}"
                    for key in now.keys() - before.keys()
                    if not (is_module and _isinstance(now[key], ModuleType))
                ]
        if (_gettrace(), _getprofile()) != self._trace:
            found.append("sys.settrace/setprofile")
        found += sorted(_hooks() - self._hooks)
        return found

    def changed(self) -> list[str]:
        found = [
            f"{owner_name}.{name}"
            for owner_name, owner, name, original in self._snapshot
            if inspect.getattr_static(owner, name, None) is not original
        ]
        found += [name for name in self.patched() if name not in found]
        return found


# What a submission may do through aten: allocate, view, copy, fill and cast.
# Anything else computes, and is the library doing the task (SPEC §4): it is
# flagged `compute_op` by name, unless the task's `allowed_ops` adds it.
# Factory and metadata ops Triton's launcher and interpreter make (empty,
# strides, device moves) are in the list; arithmetic and reductions are not.
# Pinning a host tensor is a copy into page-locked memory (and `is_pinned` a
# query): a multi-tensor kernel pins its pointer table to copy it to the
# device without making the host wait for the stream.
_GLUE_OPS = """
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros
    ones ones_like new_ones full full_like new_full scalar_tensor lift_fresh lift_fresh_copy
    resize_ set_
    view _unsafe_view reshape _reshape_alias as_strided alias detach detach_ transpose t
    permute expand expand_as unsqueeze squeeze flatten unflatten select slice narrow split
    split_with_sizes chunk unbind view_as view_as_real view_as_complex contiguous movedim
    swapaxes resolve_conj resolve_neg _conj conj numpy_T mT unfold
    copy_ _copy_from _copy_from_and_resize clone to _to_copy _to_dense type_as fill_ zero_
    _local_scalar_dense item _has_compatible_shallow_copy_type record_stream
    pin_memory _pin_memory is_pinned
"""
ALLOWED_OPS = frozenset(f"aten::{name}" for name in _GLUE_OPS.split())


def disallowed_ops(ops: set[str] | list[str], extra_allowed: tuple[str, ...] = ()) -> list[str]:
    """The aten ops in `ops` that are neither glue (ALLOWED_OPS) nor allowed by the task."""
    allowed = ALLOWED_OPS | set(extra_allowed)
    return sorted(op for op in ops if op.startswith("aten::") and op not in allowed)


class DispatchRecorder(TorchDispatchMode):
    """Records the name of every aten op run under it."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func._schema.name)
        return func(*args, **(kwargs or {}))


class OpRecorder:
    """Records every aten op a call executes, by two independent means, and its GPU kernels.

    A Python dispatch mode sees ops after composite decomposition; the
    profiler's RecordFunction hooks live below the Python mode stack, so code
    that pops or disables dispatch modes is still seen. With `kernels` (cuda
    mode) the profiler also takes CUPTI's activity records: the name of every
    kernel that ran on the GPU during the call, whoever launched it (a
    library called through ctypes included), for `library_kernel`.
    """

    def __init__(self, *, kernels: bool = False) -> None:
        self._mode = DispatchRecorder()
        activities = [torch.profiler.ProfilerActivity.CPU]
        if kernels:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._kernels = kernels
        self._profiler = torch.profiler.profile(activities=activities)
        self.ops: set[str] = set()
        self.kernels: set[str] = set()

    @property
    def dispatch_mode(self) -> TorchDispatchMode:
        """The recorder's own mode, the one mode a recorded call's result may be read under."""
        return self._mode

    def __enter__(self) -> OpRecorder:
        self._profiler.__enter__()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._kernels:
            # Every kernel of the call has ended, so CUPTI has its record.
            _device_synchronize()
        self._mode.__exit__(*exc_info)
        self._profiler.__exit__(*exc_info)
        events = self._profiler.events()
        profiled = {e.name for e in events if e.name.startswith("aten::")}
        self.ops = self._mode.ops | profiled
        if self._kernels:
            self.kernels = {
                e.name for e in events if e.device_type == torch.autograd.DeviceType.CUDA
            } | {k.name for e in events for k in getattr(e, "kernels", ())}


# Names a kernel has no business touching: the dispatch-mode stack, the
# profiler's switches, and the harness itself. Found in the source text, they
# are flagged for review (a kernel that needs one can be cleared by an admin).
TAMPERING_NAMES = (
    "_disable_current_modes",
    "_DisableTorchDispatch",
    "_pop_mode",
    "_unset_dispatch_mode",
    "_set_torch_function_mode",
    "DisableTorchFunction",
    "_disable_profiler",
    "_python_dispatch",
    "evaluator.harness",
    "PatchGuard",
    "OpRecorder",
    "L2Flusher",
    "d2k_cover",
    "d2k_reference",
)


def tampering_names(source: str) -> list[str]:
    return [name for name in TAMPERING_NAMES if name in source]


def live_python_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive() and t.ident is not None}


def poison_allocator(device: torch.device, nbytes: int) -> None:
    """Fill memory the allocator will hand out next with NaN bytes (0xFF).

    A kernel that returns `empty_like` without writing, or writes only part of
    its output, then returns NaN instead of whatever a previous call (or the
    reference, during timing) left behind.
    """
    if nbytes <= 0:
        return
    block = torch.empty(int(nbytes), dtype=torch.uint8, device=device)
    block.fill_(0xFF)
    del block


def tensors_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(
            torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))
        ) and bool(torch.equal(a.isnan(), b.isnan()))
    return bool(torch.equal(a, b))

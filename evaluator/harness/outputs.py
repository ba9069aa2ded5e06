"""The harness's own means of reading what a call returned.

A submission runs in the same process as the child and can replace any
Python attribute it reaches: a method of `torch.Tensor`, a function of
`torch`, `pickle` or `io`. An output read through such an attribute could be
computed at the moment it is read rather than by the call (a deferred
output). So every output is read here, and only here, through functions
taken from torch's C base classes when the harness is imported, before any
submission is: `torch._C.TensorBase` and `torch._C.StorageBase` are immutable
types, whose methods no submission can replace.

Right after a call returns (`take`), before anything else reads its result:

- each output must be a plain, dense `torch.Tensor` with an empty instance
  `__dict__` (anything else is reported unread: `output_type`);
- no torch function or dispatch mode may be left pushed (either would see
  the harness's own copies being made);
- each output is copied into a buffer the harness owns, on the call's
  stream. The copies are what is fingerprinted, normed, saved and compared;
  the submission's tensors are read again only to see whether work escaped
  the call (`take_again`).

A copy is saved as raw bytes with a one-line JSON header (`write_raw`),
never through `torch.save` and pickle; the parent reads it back with
`read_raw`.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

# Taken at import, before any submission. Builtins are bound here too, so
# that a replaced builtin cannot run in the middle of a read.
_TensorBase = torch._C.TensorBase
_StorageBase = torch._C.StorageBase
_Tensor = torch.Tensor
_type = builtins.type
_len = builtins.len
_vars = builtins.vars
_tuple = builtins.tuple
_isinstance = builtins.isinstance
_memoryview = builtins.memoryview
_clone = _TensorBase.clone
_detach = _TensorBase.detach
_view = _TensorBase.view
_cpu = _TensorBase.cpu
_numpy = _TensorBase.numpy
_stride = _TensorBase.stride
_size = _TensorBase.size
_data_ptr = _TensorBase.data_ptr
_element_size = _TensorBase.element_size
_numel = _TensorBase.numel
_untyped_storage = _TensorBase.untyped_storage
_storage_ptr = _StorageBase.data_ptr  # type: ignore[attr-defined]
_storage_nbytes = _StorageBase.nbytes  # type: ignore[attr-defined]
_dtype_of = _TensorBase.__dict__["dtype"].__get__
_device_of = _TensorBase.__dict__["device"].__get__
_layout_of = _TensorBase.__dict__["layout"].__get__
_is_sparse = _TensorBase.__dict__["is_sparse"].__get__
_no_torch_function = torch._C.DisableTorchFunction
_function_modes = torch._C._len_torch_function_stack
_dispatch_modes = torch._C._len_torch_dispatch_stack
_dispatch_mode_at = torch._C._get_dispatch_stack_at
_contiguous_format = torch.contiguous_format
_strided = torch.strided
_os_open = os.open
_os_write = os.write
_os_close = os.close
_os_unlink = os.unlink
_dumps = json.dumps
_sha256 = hashlib.sha256
_sha256_update = type(hashlib.sha256()).update
_sha256_hex = type(hashlib.sha256()).hexdigest

# Raw bytes of each dtype, as an integer dtype of the same width (numpy has no bf16 or fp8).
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class UnreadableOutput(Exception):
    """An output the harness will not touch: its message says why (flag `output_type`)."""


class ModeLeftPushed(Exception):
    """A torch function or dispatch mode is still pushed after the call (flag `monkeypatch`)."""


@dataclass(frozen=True)
class Layout:
    """What the parent checks of an output besides its values."""

    shape: tuple[int, ...]
    dtype: str
    device: str
    strides: tuple[int, ...]
    # Indices of the call's inputs whose storage the output's bytes lie in.
    aliases: tuple[int, ...]

    def as_dict(self) -> dict:
        return {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "device": self.device,
            "strides": list(self.strides),
            "aliases": list(self.aliases),
        }


@dataclass(frozen=True)
class Taken:
    """A call's outputs as the harness copied them, and the submission's own tensors."""

    copies: tuple[torch.Tensor, ...]
    layouts: tuple[Layout, ...]
    originals: tuple[torch.Tensor, ...]


def as_outputs(result: object) -> tuple:
    """A forward's result as a tuple of outputs, without calling anything of the result's."""
    kind = _type(result)
    if kind is _tuple or kind is builtins.list:
        return _tuple(result)  # type: ignore[arg-type]
    return (result,)


def input_spans(inputs: Sequence[object]) -> list[tuple[int, int] | None]:
    """Each input tensor's storage as (first byte, end byte); None for other inputs.

    Taken before the call, through the harness's own means.
    """
    spans: list[tuple[int, int] | None] = []
    for value in inputs:
        if _type(value) is not _Tensor:
            spans.append(None)
            continue
        storage = _untyped_storage(value)
        start = _storage_ptr(storage)
        spans.append((start, start + _storage_nbytes(storage)))
    return spans


def take(
    result: object,
    spans: Sequence[tuple[int, int] | None] = (),
    own_modes: Sequence[object] = (),
) -> Taken:
    """Copy a call's outputs into buffers the harness owns, queued on the current stream.

    Raises UnreadableOutput for an output that is not a plain dense tensor,
    ModeLeftPushed when a torch mode other than the harness's own
    (`own_modes`, its op recorder's dispatch mode) is active: both before
    any of the result is read.
    """
    depth = _dispatch_modes()
    stack = [_dispatch_mode_at(i) for i in range(depth)]
    if (
        _function_modes()
        or _len(stack) != _len(own_modes)
        or any(mine is not theirs for mine, theirs in zip(own_modes, stack, strict=True))
    ):
        raise ModeLeftPushed("a torch function or dispatch mode was left pushed after the call")
    outputs = as_outputs(result)
    problems = [_problem(index, out) for index, out in enumerate(outputs)]
    problems = [p for p in problems if p]
    if problems:
        raise UnreadableOutput("; ".join(problems))
    copies, layouts = [], []
    with _no_torch_function():
        for out in outputs:
            copies.append(_clone(_detach(out), memory_format=_contiguous_format))
            layouts.append(_layout(out, spans))
    return Taken(_tuple(copies), _tuple(layouts), outputs)


def _problem(index: int, out: object) -> str:
    kind = _type(out)
    if kind is not _Tensor:
        return f"output {index} is {kind.__module__}.{kind.__qualname__}, not a plain torch.Tensor"
    if _vars(out):
        return f"output {index} carries attributes of its own ({', '.join(sorted(_vars(out)))})"
    if _layout_of(out) is not _strided or _is_sparse(out):
        return f"output {index} is not a dense strided tensor"
    return ""


def _layout(out: torch.Tensor, spans: Sequence[tuple[int, int] | None]) -> Layout:
    shape = _tuple(_size(out))
    strides = _tuple(_stride(out))
    size = _element_size(out)
    first = _data_ptr(out)
    last = first + size * (1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides, strict=True)))
    empty = _numel(out) == 0
    aliases = _tuple(
        index
        for index, span in enumerate(spans)
        if span is not None and not empty and first < span[1] and span[0] < last
    )
    return Layout(shape, str(_dtype_of(out)), _device_of(out).type, strides, aliases)


def write_raw(copies: Sequence[torch.Tensor], path: Path) -> str:
    """Save the harness's copies as one JSON header line and each copy's raw bytes; the
    file's SHA-256 (hex). The child sends it with the call's `output` message before the
    submission runs again, and the parent reads the file only if it still has it: the
    scratch folder is the submission's to write, and a file it rewrote after the harness
    saved it is not what its kernels returned."""
    header, blobs = [], []
    with _no_torch_function():
        for copy in copies:
            dtype = _dtype_of(copy)
            host = _cpu(copy)
            width = _element_size(host)
            bits = _view(host, _BITS[width]) if _numel(host) else host
            blob = _bytes_of(_numpy(bits)) if _numel(host) else b""
            header.append({"shape": list(_size(host)), "dtype": str(dtype), "bytes": _len(blob)})
            blobs.append(blob)
    digest = _sha256()
    # A file of its own: never through a link or into a file the submission planted there.
    try:
        _os_unlink(str(path))
    except FileNotFoundError:
        pass
    fd = _os_open(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        for chunk in (_dumps(header).encode() + b"\n", *blobs):
            _sha256_update(digest, chunk)
            view = _memoryview(chunk)
            while view:
                view = view[_os_write(fd, view) :]
    finally:
        _os_close(fd)
    return _sha256_hex(digest)


def _bytes_of(array: Any) -> Any:
    """A host copy's bytes in C order: its own buffer where it is contiguous (the harness's
    copies are), else a copy."""
    if array.flags.c_contiguous:
        return _memoryview(array).cast("B")
    return array.tobytes()


class OutputChanged(Exception):
    """The output file is not the one the child saved: its SHA-256 differs, or it is behind a
    link or not a plain file. Not a ValueError: no reader takes it for a malformed file."""


def read_raw(
    path: Path, device: torch.device, *, sha256: str | None = None
) -> tuple[torch.Tensor, ...]:
    """The parent's reading of `write_raw`'s file. Raises ValueError when it is malformed,
    OutputChanged when `sha256` is given and the file's digest is another.

    The body is read once, into one buffer, and each output is a view of it
    (a copy only where an output's bytes do not start at a multiple of its
    element size): a call's outputs of several GiB are neither copied again
    nor held twice."""
    head, body = _regular_file(Path(path))
    if sha256 is not None:
        digest = hashlib.sha256(head)
        digest.update(body.numpy().data)
        if digest.hexdigest() != sha256:
            raise OutputChanged("the output file changed after the harness saved it")
    try:
        header = json.loads(head.removesuffix(b"\n"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError("the output file's header is not JSON") from exc
    if not isinstance(header, list):
        raise ValueError("the output file's header is not a list")
    tensors, offset = [], 0
    for entry in header:
        tensors.append(_decode(entry, body, offset, device))
        offset += int(entry["bytes"])
    if offset != body.numel():
        raise ValueError("the output file's size does not match its header")
    return tuple(tensors)


# The most a header line may take: a JSON list of each output's shape, dtype and bytes.
HEADER_LIMIT = 1 << 20


def _regular_file(path: Path) -> tuple[bytes, torch.Tensor]:
    """The header line and the body (bytes, as one uint8 tensor) of the plain file at `path`,
    its folder and itself never through a link: the parent resolves the path on the host,
    where a link the submission planted (to /dev/zero, to a host file) would read what the
    sandbox never held. Anything else is OutputChanged."""
    nofollow = os.O_RDONLY | os.O_NOFOLLOW
    try:
        folder = os.open(path.parent, nofollow | os.O_DIRECTORY)
        try:
            fd = os.open(path.name, nofollow | os.O_NONBLOCK, dir_fd=folder)
        finally:
            os.close(folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OutputChanged(
                "the output file is behind a link the harness did not make"
            ) from exc
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OutputChanged("the output file is not the file the harness saved")
        head = handle.readline(HEADER_LIMIT)
        body = torch.empty(max(info.st_size - len(head), 0), dtype=torch.uint8)
        if handle.readinto(body.numpy().data) != body.numel() or handle.read(1):
            raise ValueError("the output file's size changed while it was read")
    return head, body


def _decode(entry: object, body: torch.Tensor, offset: int, device: torch.device) -> torch.Tensor:
    try:
        shape = [int(n) for n in entry["shape"]]  # type: ignore[index]
        dtype = getattr(torch, str(entry["dtype"]).removeprefix("torch."))  # type: ignore[index]
        nbytes = int(entry["bytes"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise ValueError("the output file's header names no tensor") from exc
    if not isinstance(dtype, torch.dtype) or any(n < 0 for n in shape):
        raise ValueError("the output file's header names no tensor")
    numel = 1
    for n in shape:
        numel *= n
    width = torch.empty((), dtype=dtype).element_size()
    if nbytes != numel * width or offset + nbytes > body.numel():
        raise ValueError("the output file's sizes do not match its header")
    if numel == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    raw = body[offset : offset + nbytes]
    # The body's buffer is aligned; an output that starts off its element size is copied.
    raw = raw.clone() if offset % width else raw
    return raw.view(_BITS[width]).view(dtype).reshape(shape).to(device)


def take_again(originals: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """Copies of the submission's outputs taken now, after the whole device finished.

    Compared with the copies `take` queued right after the call: work left
    running on another stream changed an output in between (`escaped_work`).
    """
    with _no_torch_function():
        return _tuple(_clone(_detach(o), memory_format=_contiguous_format) for o in originals)


@dataclass(frozen=True)
class Call:
    """One call of the submission's: its events (timed calls), what the harness copied, host µs."""

    events: tuple
    taken: Taken
    host_us: float

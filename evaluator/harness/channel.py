"""The child's two pipes to the parent, and what it says of an exception.

Messages go to the parent as JSON lines on one descriptor; the parent's
answers to requests (a step, a seed, whether an audit follows) come back on
another. An exception from the submission is reported as a verdict status
(`classify`) and a short message (`describe`); the parent decides what of
it the owner sees.
"""

from __future__ import annotations

import json
import os
import traceback
from typing import Any

import torch


class Channel:
    """Messages to the parent on `fd`; its answers to requests (`ask`) on `reply_fd`."""

    def __init__(self, fd: int, reply_fd: int | None = None):
        self._fd = fd
        self._replies = os.fdopen(reply_fd, "rb") if reply_fd is not None else None

    def ask(self, what: str, **fields: Any) -> dict:
        """A request the parent answers at once: the next step, a call's seed, an audit."""
        if self._replies is None:
            raise RuntimeError("the child has no reply channel")
        self.send("ask", what=what, **fields)
        reply = json.loads(self._replies.readline() or b"{}")
        if not isinstance(reply, dict) or "error" in reply or not reply:
            raise RuntimeError(f"the parent refused the request {what!r}: {reply!r}")
        return reply

    def seed(self, workload: str, purpose: str) -> int:
        return int(self.ask("seed", workload=workload, purpose=purpose)["seed"])

    def send(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields}, default=str) + "\n"
        data = line.encode()
        while data:
            written = os.write(self._fd, data)
            data = data[written:]


# What a worker without the toolchain for torch.utils.cpp_extension says: our fault
# (worker_error), not the submission's. Each with the program it names, which the parent
# looks for on the child's PATH before it believes the claim ("" where none is named:
# decision.refuted_claim).
MISSING_TOOLCHAIN = {
    "Ninja is required to load C++ extensions": "ninja",
    "CUDA_HOME environment variable is not set": "",
    "c++: not found": "c++",
    "g++: not found": "g++",
    "nvcc: not found": "nvcc",
    "x86_64-linux-gnu-g++: not found": "x86_64-linux-gnu-g++",
    "No CUDA runtime is found": "",
}


def classify(exc: BaseException) -> str:
    """Map an exception from the submission to a verdict status."""
    if isinstance(exc, SyntaxError):
        return "compile_error"
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return "out_of_memory"
    text = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    if any(sign in text for sign in MISSING_TOOLCHAIN):
        return "worker_error"
    if "CompilationError" in text or "Error building extension" in text:
        return "compile_error"
    if "out of memory" in text.lower():
        return "out_of_memory"
    return "runtime_error"


def describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"SyntaxError at line {exc.lineno}: {exc.msg}"
    text = str(exc)
    if "Error building extension" in text:
        return build_error(text)
    summary = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return summary[:2000]


def build_error(text: str, lines: int = 8) -> str:
    """A failed load_inline build as its author needs it: the compiler's first error lines.

    torch's message starts with the ninja build's command lines, which name
    every include folder; the errors come after them.
    """
    head = text.splitlines()[0] if text else ""
    errors = [line.strip() for line in text.splitlines() if "error" in line.lower()]
    skip = ("FAILED:", "ninja: build stopped", "Error building extension")
    errors = [line for line in errors if not line.startswith(skip)]
    body = "\n".join(errors[:lines]) or text[-1500:]
    return f"{head.split(':', 1)[0]}:\n{body}"[:2000]

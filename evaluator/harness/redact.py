"""What an owner may read about hidden workloads: that they exist and passed or failed, no more.

Hidden workloads are never shown to agents (SPEC §3): their names carry
their shapes, and a comparison's message names shapes and values. The
verdict's message and flags go to the submission's owner, so they name a
hidden workload only as "a hidden workload"; its row in `workloads` keeps the
detail, and the portal shows those rows to staff only. The log an owner sees
is `Verdict.public_log`: what the submission printed before the first hidden
workload reached it.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Iterable
from functools import cache

from taskformat.spec import TaskSpec

HIDDEN = "a hidden workload"


def hidden_names(task: TaskSpec) -> list[str]:
    # Longest first, so a name that contains another is replaced whole.
    return sorted((w.name for w in task.workloads if w.hidden), key=len, reverse=True)


def hide_names(text: str, names: Iterable[str]) -> str:
    for name in names:
        text = re.sub(rf"\b{re.escape(name)}\b", HIDDEN, text)
    return text


def flags(task: TaskSpec, raised: Iterable[dict[str, str]]) -> list[dict[str, str]]:
    names = hidden_names(task)
    return [{**f, "detail": hide_names(str(f.get("detail", "")), names)} for f in raised]


def error_message(text: str) -> str:
    """An exception raised on a hidden workload, as its owner sees it: its type, not its text.

    The child writes "Type: message", and the child runs the submission: the
    type is named only where it is one of the known exception classes
    (builtins, torch, triton; `known_exceptions`), whatever the child says.
    A class of the submission's own, whose name it may have built from the
    hidden shapes, is not named.
    """
    return f"{exception_type(text)} on {HIDDEN} (the message is shown to staff only)"


def exception_type(text: str) -> str:
    """The type of the exception the child described as "Type: message", if it is a known one."""
    kind = text.split(":", 1)[0].strip() if ":" in text else ""
    return kind if kind in known_exceptions() else "an exception of the submission's own class"


# The packages whose exception classes an owner may see named.
TRUSTED_PACKAGES = ("builtins", "torch", "triton")


@cache
def known_exceptions() -> frozenset[str]:
    """Every exception class of the builtins, torch and triton, as a traceback names it.

    Read in this (the parent's) process, from the modules of those packages it
    has loaded, with torch and triton imported first: "ValueError",
    "torch.OutOfMemoryError", "triton.compiler.errors.CompilationError".
    """
    import torch  # noqa: F401
    import triton  # noqa: F401

    names: set[str] = set()
    with warnings.catch_warnings():  # torch warns on touching its deprecated names
        warnings.simplefilter("ignore")
        for module_name, module in list(sys.modules.items()):
            if module is None or module_name.split(".")[0] not in TRUSTED_PACKAGES:
                continue
            for value in list(vars(module).values()):
                if isinstance(value, type) and issubclass(value, BaseException):
                    names.add(_traceback_name(value))
    return frozenset(n for n in names if n.split(".")[0] in TRUSTED_PACKAGES or "." not in n)


def _traceback_name(cls: type) -> str:
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"

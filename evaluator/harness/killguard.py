"""A seccomp filter that leaves SIGKILL to the outside: a SIGKILL death is never the submission's.

A sandboxed child can end by SIGKILL only from outside its own processes
once this filter is loaded (the orchestrator's watchdog, the host's
out-of-memory killer, a signal from another process of the host), so the
orchestrator can tell those from the submission's own behaviour
(decision.decide: `worker_error`, never blamed on the submitter). The
filter refuses (EPERM), in the child and everything it starts:

- every system call that sends a signal (kill, tkill, tgkill,
  rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_send_signal) when the signal is
  SIGKILL: `os.kill(os.getpid(), 9)` raises PermissionError;
- lowering RLIMIT_CPU or RLIMIT_RTTIME (setrlimit, prlimit64 with a new
  value), whose hard limits the kernel enforces with SIGKILL;
- ptrace, through which a helper process could kill its tracee;
- the x32 system call numbers, which would bypass the checks above.

And it ends a process that exits with a status of 128 or more by SIGSYS:
under bubblewrap an exit status of 128 + N is how a death by signal N is
reported, so `os._exit(137)` must not pass for a SIGKILL from outside.

Loaded by bubblewrap (`--seccomp FD`) or, at the `process` level, by the
child between fork and exec (`install`). Only x86_64 and aarch64 are
known; elsewhere `program()` is None and no SIGKILL is taken as outside.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_ALU_AND_K = 0x54
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_DENY = 0x00050000 | errno.EPERM
_KILL_PROCESS = 0x80000000
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6].
_NR, _ARCH = 0, 4


def _arg_low(index: int) -> int:
    return 16 + 8 * index  # the low 32 bits, little-endian


def _arg_high(index: int) -> int:
    return 20 + 8 * index


SIGKILL = 9
RLIMIT_CPU, RLIMIT_RTTIME = 0, 15
X32_BIT = 0x40000000

# Per architecture: its audit id and its system call numbers.
_ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "kill": 62,
            "tkill": 200,
            "tgkill": 234,
            "rt_sigqueueinfo": 129,
            "rt_tgsigqueueinfo": 297,
            "pidfd_send_signal": 424,
            "ptrace": 101,
            "exit": 60,
            "exit_group": 231,
            "setrlimit": 160,
            "prlimit64": 302,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "kill": 129,
            "tkill": 130,
            "tgkill": 131,
            "rt_sigqueueinfo": 138,
            "rt_tgsigqueueinfo": 240,
            "pidfd_send_signal": 424,
            "ptrace": 117,
            "exit": 93,
            "exit_group": 94,
            "setrlimit": 164,
            "prlimit64": 261,
        },
    ),
}
# Which argument of each signal-sending call is the signal.
_SIGNAL_ARG = {
    "kill": 1,
    "tkill": 1,
    "tgkill": 2,
    "rt_sigqueueinfo": 1,
    "rt_tgsigqueueinfo": 2,
    "pidfd_send_signal": 1,
}


class _Program:
    """A cBPF program built with symbolic labels for its jump targets."""

    def __init__(self) -> None:
        self.code: list[tuple[int, object, object, int]] = []
        self.labels: dict[str, int] = {}

    def op(self, code: int, k: int, jt: object = 0, jf: object = 0) -> None:
        self.code.append((code, jt, jf, k))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def bytes(self) -> bytes:
        out = b""
        for at, (code, jt, jf, k) in enumerate(self.code):
            out += struct.pack("<HBBI", code, self._jump(jt, at), self._jump(jf, at), k)
        return out

    def _jump(self, target: object, at: int) -> int:
        if isinstance(target, str):
            return self.labels[target] - at - 1
        return int(target)  # type: ignore[call-overload]


def program(machine: str | None = None) -> bytes | None:
    """The filter as bubblewrap's `--seccomp` reads it; None on an unknown architecture."""
    known = _ARCHES.get(machine or platform.machine())
    if known is None:
        return None
    arch, nr = known
    p = _Program()
    p.op(_LD_W_ABS, _ARCH)
    p.op(_JEQ_K, arch, 0, "allow")  # another ABI (a 32-bit call): nothing of ours to check
    p.op(_LD_W_ABS, _NR)
    p.op(_JSET_K, X32_BIT, "deny", 0)
    for name, index in _SIGNAL_ARG.items():
        p.op(_JEQ_K, nr[name], f"signal{index}", 0)
    p.op(_JEQ_K, nr["ptrace"], "deny", 0)
    p.op(_JEQ_K, nr["exit"], "status", 0)
    p.op(_JEQ_K, nr["exit_group"], "status", 0)
    p.op(_JEQ_K, nr["setrlimit"], "setrlimit", 0)
    p.op(_JEQ_K, nr["prlimit64"], "prlimit", "allow")
    for index in (1, 2):
        p.label(f"signal{index}")
        p.op(_LD_W_ABS, _arg_low(index))
        p.op(_JEQ_K, SIGKILL, "deny", "allow")
    p.label("status")
    p.op(_LD_W_ABS, _arg_low(0))
    p.op(_ALU_AND_K, 0xFF)
    p.op(_JGE_K, 128, "kill", "allow")
    p.label("setrlimit")
    p.op(_LD_W_ABS, _arg_low(0))
    p.op(_JEQ_K, RLIMIT_CPU, "deny", 0)
    p.op(_JEQ_K, RLIMIT_RTTIME, "deny", "allow")
    p.label("prlimit")  # prlimit64(pid, resource, new, old): a read passes new = NULL
    p.op(_LD_W_ABS, _arg_low(1))
    p.op(_JEQ_K, RLIMIT_CPU, "new", 0)
    p.op(_JEQ_K, RLIMIT_RTTIME, "new", "allow")
    p.label("new")
    p.op(_LD_W_ABS, _arg_low(2))
    p.op(_JEQ_K, 0, 0, "deny")
    p.op(_LD_W_ABS, _arg_high(2))
    p.op(_JEQ_K, 0, "allow", "deny")
    p.label("allow")
    p.op(_RET_K, _ALLOW)
    p.label("deny")
    p.op(_RET_K, _DENY)
    p.label("kill")
    p.op(_RET_K, _KILL_PROCESS)
    return p.bytes()


PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(code: bytes) -> None:
    """Load the filter into this process (between fork and exec); raises OSError if it fails."""
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def program_fd(code: bytes) -> int:
    """A readable descriptor holding `code`, for bubblewrap's `--seccomp FD`."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, code)  # a few hundred bytes: well within a pipe's buffer
    os.close(write_fd)
    return read_fd

"""The child's stdout and stderr, as the orchestrator reads them: a pipe, never a file.

The child cannot rewrite what the parent has read. The owner's log
(`Verdict.public_log`) is what the parent had read when the first hidden
workload was dealt (`ChildLog.mark`), before the child heard of it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import sys
import termios
import threading

# The child's log as the parent keeps it: its first and its last LOG_LIMIT bytes.
LOG_LIMIT = 32_000


class ChildLog:
    """The child's stdout and stderr, read by the parent from a pipe, with a mark.

    Only what the parent read is kept: its first and last LOG_LIMIT bytes.
    `mark()` (called as the first hidden workload is dealt, before the child
    hears of it) reads what the child wrote so far and records the log as it
    stands: `public()` is that, whatever the child writes or does later.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0
        self._marked: str | None = None
        self._thread: threading.Thread | None = None

    def attach(self, fd: int) -> None:
        # Non-blocking: the reader never waits inside the lock that `mark` takes.
        os.set_blocking(fd, False)
        self._fd = fd
        self._thread = threading.Thread(target=self._read_all, args=(fd,), daemon=True)
        self._thread.start()

    def _read_all(self, fd: int) -> None:
        poll = select.poll()
        poll.register(fd, select.POLLIN | select.POLLHUP)
        while True:
            poll.poll(100)
            with self._lock:
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:  # closed by `close` after its wait
                    return
                if not chunk:
                    return
                self._add(chunk)

    def _add(self, chunk: bytes) -> None:
        self._total += len(chunk)
        if len(self._head) < LOG_LIMIT:
            self._head += chunk[: LOG_LIMIT - len(self._head)]
        self._tail += chunk
        if len(self._tail) > 2 * LOG_LIMIT:
            del self._tail[:-LOG_LIMIT]

    def mark(self) -> int:
        """Read what is in the pipe now, and keep the log as it stands as the public one."""
        with self._lock:
            if self._fd is not None:
                pending = bytearray(4)
                with contextlib.suppress(OSError):
                    fcntl.ioctl(self._fd, termios.FIONREAD, pending)
                    left = int.from_bytes(pending, sys.byteorder)
                    while left > 0 and (chunk := os.read(self._fd, min(left, 65536))):
                        self._add(chunk)
                        left -= len(chunk)
            self._marked = self._render()
            return self._total

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def text(self) -> str:
        with self._lock:
            return self._render()

    def public(self) -> str:
        """The log as it stood at the mark; all of it where there was none."""
        return self._marked if self._marked is not None else self.text()

    def _render(self) -> str:
        if self._total <= LOG_LIMIT:
            return self._head.decode(errors="replace")
        half = LOG_LIMIT // 2
        head = self._head[:half].decode(errors="replace")
        tail = self._tail[-half:].decode(errors="replace")
        return f"{head}\n… [{self._total - LOG_LIMIT} bytes cut] …\n{tail}"

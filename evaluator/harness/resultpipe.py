"""The parent's reader of the result pipe: JSON lines, stamped, requests answered at once."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

# The result pipe's caps. An honest child's longest line is a timed workload's
# report: a fingerprint of about 1 KB for each of up to 400 timed and 200
# batch calls and four audit fingerprints of about 25 KB, under 1 MB. All it
# writes for one timed workload (that report, about four requests of 100
# bytes per timed call, the batch's requests) is about 1 MB, so even the
# catalog's 85 timed workloads in one evaluation would come to under 100 MB.
# A longer line is one malformed message, skipped; past the total the child
# is killed at once (`result_channel`), before it can make the parent read
# on, or leave a request unanswered until the time limit.
MAX_LINE_BYTES = 16 * 2**20
MAX_CHANNEL_BYTES = 256 * 2**20


class Sink(Protocol):
    """Where the reader keeps what it read (sandbox.ChildRun)."""

    messages: list[tuple[float, dict]]
    bad_messages: int
    channel_bytes: int


Answer = Callable[[dict], dict]


class Reader(threading.Thread):
    """Reads JSON lines from the result pipe, stamping each with the host clock.

    A request (`{"event": "ask", ...}`) is answered at once on the reply pipe
    by `answer` (the orchestrator's Dealer), in the order the requests came.
    A line longer than MAX_LINE_BYTES is one malformed message, skipped to
    its end. Past MAX_CHANNEL_BYTES in all, the reader stops and sets
    `flooded`: run_child kills the child at once.
    """

    def __init__(
        self, fd: int, sink: Sink, answer: Answer | None = None, reply_fd: int | None = None
    ):
        super().__init__(daemon=True)
        self.fd, self.sink = fd, sink
        self.answer, self.reply_fd = answer, reply_fd
        self.flooded = threading.Event()
        # Set between the child's `batch_begin` and `batch_end`: the back-to-back batch
        # is timed by this thread's stamps, so the watch makes no long scan meanwhile.
        self.in_batch = threading.Event()
        self._line = bytearray()
        self._skipping = False  # inside a line past MAX_LINE_BYTES

    def _reply(self, message: dict) -> None:
        if self.answer is None or self.reply_fd is None:
            return
        try:
            answer = self.answer(message)
        except Exception as exc:  # a request the Dealer cannot read: refused, never left hanging
            self.sink.bad_messages += 1
            answer = {"error": f"an unreadable request ({type(exc).__name__})"}
        data = (json.dumps(answer) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.reply_fd, data) :]
        except OSError:
            pass  # the child is gone

    def run(self) -> None:
        with os.fdopen(self.fd, "rb", buffering=0) as stream:
            while chunk := stream.read(65536):
                self.sink.channel_bytes += len(chunk)
                if self.sink.channel_bytes > MAX_CHANNEL_BYTES:
                    self.flooded.set()
                    return
                self._take(chunk)

    def _take(self, chunk: bytes) -> None:
        """Add `chunk` to the line being read, and handle each line it completes."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end == -1 else chunk[start:end]
            if not self._skipping:
                if len(self._line) + len(piece) > MAX_LINE_BYTES:
                    self.sink.bad_messages += 1
                    self._skipping = True
                    self._line.clear()
                else:
                    self._line += piece
            if end == -1:
                return
            if not self._skipping:
                self._handle(bytes(self._line))
            self._line.clear()
            self._skipping = False
            start = end + 1

    def _handle(self, line: bytes) -> None:
        stamp = time.monotonic()
        try:
            message = json.loads(line)
            if not isinstance(message, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            self.sink.bad_messages += 1
            return
        self.sink.messages.append((stamp, message))
        if message.get("event") == "batch_begin":
            self.in_batch.set()
        elif message.get("event") == "batch_end":
            self.in_batch.clear()
        if message.get("event") == "ask":
            self._reply(message)

"""The refusal of an upload over a quota (the quotas themselves: `submissions.quotas`).

Refusals name the wait: the API answers 429 with `Retry-After`, a page shows the
sentence.
"""

from __future__ import annotations


class QuotaExceeded(Exception):
    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = max(1, int(retry_after_s))


def quota_duration(seconds: float) -> str:
    """A wait in words: `45 s`, `12 min`, `3 h 5 min`."""
    seconds = max(1, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"

"""What a scanner rule reports: one hit per suspicious span of one trace event."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from runs.scanners.secrets import redact_text

QUOTE_CHARS = 160


class Concern(StrEnum):
    """Why a rule looks: `integrity` hits put the cell up for review, `privacy` hits
    are redacted before the trace is published."""

    INTEGRITY = "integrity"
    PRIVACY = "privacy"


@dataclass(frozen=True)
class Hit:
    """One rule's nomination: where (the trace line, i.e. the event, and its type) and
    a short quote of the text that matched. A secret's quote is masked."""

    rule: str
    line: int | None
    event_type: str
    quote: str

    def as_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "line": self.line,
            "event_type": self.event_type,
            "quote": self.quote,
        }


def quote_around(text: str, start: int, end: int, *, width: int = QUOTE_CHARS) -> str:
    """The matched span with a little context, on one line, at most `width` characters."""
    pad = max(0, (width - (end - start)) // 2)
    lo, hi = max(0, start - pad), min(len(text), end + pad)
    snippet = " ".join(text[lo:hi].split())
    if len(snippet) > width:
        snippet = snippet[: width - 1] + "…"
    quoted = ("…" if lo else "") + snippet + ("…" if hi < len(text) else "")
    # A quote is evidence shown to reviewers: it never carries a secret along.
    return redact_text(quoted)[0]

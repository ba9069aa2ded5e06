"""Agent traces (JSON Lines), without Django: the summary computed once at upload, and
compressed storage read back one page at a time (the events themselves are
`runformat.trace`)."""

from runformat.trace import KNOWN_TYPES, MALFORMED, OTHER, TraceEvent
from runs.traces.storage import (
    PAGE_LINES,
    PackedTrace,
    page_of_line,
    trace_pack,
    trace_page_read,
)
from runs.traces.summary import (
    ATTEMPT_TOOL,
    PROBLEMS_KEPT,
    TraceRefused,
    TraceSummary,
    trace_summarize,
)

__all__ = [
    "ATTEMPT_TOOL",
    "KNOWN_TYPES",
    "MALFORMED",
    "OTHER",
    "PAGE_LINES",
    "PROBLEMS_KEPT",
    "PackedTrace",
    "TraceEvent",
    "TraceRefused",
    "TraceSummary",
    "page_of_line",
    "trace_pack",
    "trace_page_read",
    "trace_summarize",
]

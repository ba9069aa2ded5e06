"""Trace scanners, without Django: documented rules (runs.scanners.rules) that read
parsed trace events and nominate suspicious spans, and the redaction of secrets
before a trace or a proposal is published. Scanners only nominate: a hit never
changes a verdict by itself (moderation decides)."""

from runs.scanners.hits import Concern, Hit
from runs.scanners.library import LibraryIndex, library_index_shipped
from runs.scanners.rules import INTEGRITY_RULES, RULES, RULES_BY_NAME, Rule
from runs.scanners.scan import line_redact, text_scan, trace_redact, trace_scan
from runs.scanners.secrets import problems_redacted, redact_text

__all__ = [
    "INTEGRITY_RULES",
    "RULES",
    "RULES_BY_NAME",
    "Concern",
    "Hit",
    "LibraryIndex",
    "Rule",
    "library_index_shipped",
    "line_redact",
    "problems_redacted",
    "redact_text",
    "text_scan",
    "trace_redact",
    "trace_scan",
]

"""Scanning a run on upload, storing the hits, writing the redacted public copy of a
trace, and the owner's confirmation before secrets are published redacted.

The rules are runs.scanners (no Django); this module stores what they find. Integrity
hits nominate their (run, task) cell for review (moderation.services); secrets make a
redacted copy of the trace that the public sees and downloads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db.models import Exists, OuterRef, QuerySet

from moderation.models import CellVerdict
from runformat import BundleError
from runs.models import Proposal, Run, ScanHit, Trace
from runs.scanners import (
    INTEGRITY_RULES,
    Hit,
    LibraryIndex,
    library_index_shipped,
    text_scan,
    trace_redact,
    trace_scan,
)
from runs.traces import trace_pack


def _catalog_index() -> LibraryIndex:
    return _index_with_experts(str(settings.D2K_CATALOG_DIR))


@cache
def _index_with_experts(catalog_dir: str) -> LibraryIndex:
    """The shipped library index plus the catalog's expert implementations: pasting a
    public solution is reported like pasting a library."""
    sources = {
        f"the catalog's {path.parent.name}/expert.py": path.read_text(encoding="utf-8")
        for path in sorted(Path(catalog_dir).glob("*/expert.py"))
    }
    return library_index_shipped().merged(LibraryIndex.from_sources(sources))


def _hit_rows(*, run: Run, task_id: int, hits: Iterable[Hit], **source: object) -> list[ScanHit]:
    rows = [
        ScanHit(
            run=run,
            task_id=task_id,
            rule=hit.rule,
            line=hit.line,
            event_type=hit.event_type[:64],
            quote=hit.quote[:300],
            **source,
        )
        for hit in hits
    ]
    return ScanHit.objects.bulk_create(rows)


def trace_audit(*, trace: Trace, raw: bytes) -> list[str]:
    """Scan a stored trace, store its hits and, when it holds secrets, its redacted
    copy; returns the names of the files written (for the caller's clean-up)."""
    hits = trace_scan(data=raw, index=_catalog_index())
    _hit_rows(run=trace.run, task_id=trace.task_id, hits=hits, trace=trace)
    if not any(h.rule == "secrets" for h in hits):
        return []
    redacted, _ = trace_redact(data=raw)
    packed = trace_pack(data=redacted)
    name = default_storage.save(
        f"runs/{trace.run_id}/traces/{trace.task.slug}.redacted.jsonl.gz",
        ContentFile(packed.data),
    )
    trace.redacted_file = name
    trace.redacted_pages = packed.pages
    trace.save(update_fields=["redacted_file", "redacted_pages", "updated_at"])
    return [name]


def proposal_audit(*, proposal: Proposal) -> list[ScanHit]:
    """Store the secrets found in a proposal (it is redacted when shown to the public)."""
    hits = text_scan(text=proposal.text)
    return _hit_rows(run=proposal.run, task_id=proposal.task_id, hits=hits, proposal=proposal)


@dataclass(frozen=True)
class SecretsSummary:
    """The secrets of a run that publishing shows redacted: one line per hit."""

    hits: list[ScanHit]

    def __bool__(self) -> bool:
        return bool(self.hits)

    def errors(self) -> list[BundleError]:
        return [
            BundleError(
                hit.file,
                hit.line,
                f"{hit.quote}: published runs show it redacted. Confirm the redaction to "
                "publish (`confirm_redaction`), or upload the run private.",
            )
            for hit in self.hits
        ]


def run_secrets(*, run: Run) -> SecretsSummary:
    """The run's secret hits, in file and line order."""
    hits = ScanHit.objects.filter(run=run, rule="secrets").select_related("task")
    return SecretsSummary(list(hits))


def run_integrity_hits(*, run: Run) -> QuerySet[ScanHit]:
    """The run's hits that put cells up for review."""
    return ScanHit.objects.filter(run=run, rule__in=INTEGRITY_RULES).select_related("task")


class RedactionUnconfirmed(Exception):
    """Publishing a run whose traces or proposals hold secrets needs the owner's
    confirmation that the redacted copies are what the public sees."""

    def __init__(self, secrets: SecretsSummary):
        count = len(secrets.hits)
        super().__init__(
            f"This run holds {count} secret{'s' if count != 1 else ''} (API keys, tokens, "
            "e-mail addresses or home paths) that the public view replaces with [redacted …]; "
            "the raw files stay visible to you and the moderators. Confirm to publish."
        )
        self.secrets = secrets


# --- reads ----------------------------------------------------------------------


def run_hits_by_task(*, run: Run) -> dict[int, list[ScanHit]]:
    """The run's hits per task id (owner and staff only: the run page's audit card)."""
    by_task: dict[int, list[ScanHit]] = {}
    for hit in ScanHit.objects.filter(run=run).select_related("task"):
        by_task.setdefault(hit.task_id, []).append(hit)
    return by_task


def scan_hits_search(*, rule: str = "", verdict: str = "") -> QuerySet[ScanHit]:
    """Staff's search across runs: every hit of `rule` (all rules when blank) in cells
    whose verdict is `verdict` (any when blank), newest runs first."""
    hits = ScanHit.objects.select_related("run__owner", "task", "trace")
    if rule:
        hits = hits.filter(rule=rule)
    if verdict:
        cell = CellVerdict.objects.filter(
            run=OuterRef("run"), task=OuterRef("task"), verdict=verdict
        )
        hits = hits.filter(Exists(cell))
    return hits.order_by("-run_id", "task__slug", "line", "pk")

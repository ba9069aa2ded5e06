"""Entries: the runs of one (model, agent, condition, catalog version, GPU kind) taken
together as repeated attempts, scored as the mean over attempts with a 95 % bootstrap
interval (scoring.intervals), and paired without → with guidance.

A board compares one catalog version on one GPU kind: `board_scope` fills in the
newest catalog version and its most common GPU when the filters leave them open.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.db.models import QuerySet

from moderation.selectors import run_rankable_q
from scoring.formulas import TaskParts, uplift
from scoring.intervals import (
    CONFIDENCE,
    METRIC_KEYS,
    RESAMPLES,
    SPEED_METRICS,
    entry_scores,
    paired_scores,
    seed_of,
    tied_ranks,
)
from scoring.models import RunScore

from ..caching import by_content
from ..filters import Filters

CONDITION_NONE = "none"
NO_INTERVAL = "1 attempt, no interval"


def board_scope(*, filters: Filters) -> Filters:
    """The filters with a catalog version and a GPU kind: those asked for, else the
    catalog version of the newest rankable run and the GPU most of its runs used (one
    query). Runs of other versions or GPUs are never on the same board."""
    if filters.catalog_version and filters.hardware:
        return filters
    rows = RunScore.objects.filter(run_rankable_q("run__")).exclude(hardware="")
    if filters.catalog_version:
        rows = rows.filter(run__catalog_version=filters.catalog_version)
    if filters.hardware:
        rows = rows.filter(hardware=filters.hardware)
    found = list(
        rows.order_by("-run__created_at", "-run_id").values_list("run__catalog_version", "hardware")
    )
    if not found:
        return filters
    version = filters.catalog_version or found[0][0]
    gpus = Counter(gpu for v, gpu in found if v == version)
    hardware = filters.hardware or min(gpus, key=lambda g: (-gpus[g], g))
    return replace(filters, catalog_version=version, hardware=hardware)


def _scores(filters: Filters) -> QuerySet[RunScore]:
    scores = RunScore.objects.filter(run_rankable_q("run__"))
    if filters.catalog_version:
        scores = scores.filter(run__catalog_version=filters.catalog_version)
    if filters.hardware:
        scores = scores.filter(hardware=filters.hardware)
    for name in ("model", "agent"):
        if value := getattr(filters, name):
            scores = scores.filter(**{f"run__{name}": value})
    if filters.since:
        scores = scores.filter(run__finished_at__date__gte=filters.since)
    if filters.until:
        scores = scores.filter(run__finished_at__date__lte=filters.until)
    return scores.select_related("run__owner").order_by("run_id")


def stored_value(score: RunScore, key: str) -> float | None:
    """A run's stored score for a metric key (`implementation_L1` → implementation["L1"])."""
    for name in ("implementation", "discovery"):
        if key == name or key.startswith(f"{name}_"):
            bucket = key.removeprefix(name).removeprefix("_") or "combined"
            return (getattr(score, name) or {}).get(bucket)
    value = getattr(score, key)
    return None if value is None else float(value)


def mean_stored(scores: Sequence[RunScore], key: str) -> float | None:
    """The mean over attempts of the stored run scores (as each run's page shows them);
    None when an attempt has none."""
    values = [stored_value(s, key) for s in scores]
    if not values or any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None) / len(values)


def _parts(score: RunScore) -> list[TaskParts]:
    return [TaskParts(**row) for row in score.tasks or []]


def _method(seed: int) -> list[object]:
    # What an interval depends on besides the stored per-task parts: the seed and the
    # bootstrap's settings.
    return [seed, RESAMPLES, CONFIDENCE, list(METRIC_KEYS)]


@dataclass(frozen=True)
class Entry:
    """The runs (attempts) of one model, agent, condition, catalog version and GPU kind."""

    scores: tuple[RunScore, ...]

    @property
    def first(self) -> RunScore:
        return self.scores[0]

    @property
    def key(self) -> tuple[str, ...]:
        run = self.first.run
        return (run.model, run.agent, run.catalog_version, self.first.hardware)

    @property
    def attempts(self) -> list[list[TaskParts]]:
        return [_parts(s) for s in self.scores]

    @property
    def timed(self) -> bool:
        return all(s.timed for s in self.scores)

    def labels(self) -> dict[str, Any]:
        runs = [s.run for s in self.scores]
        finished = [r.finished_at for r in runs if r.finished_at]
        return {
            "run_ids": [r.pk for r in runs],
            "attempts": len(runs),
            "hardware": self.first.hardware,
            "model": runs[0].model,
            "agent": runs[0].agent,
            "condition": runs[0].condition,
            "owner": ", ".join(sorted({r.owner.get_username() for r in runs})),
            "catalog_version": runs[0].catalog_version,
            "finished_at": max(finished).isoformat() if finished else None,
            "is_example": runs[0].is_example,
            "timed": self.timed,
            "untimed_reason": next((s.untimed_reason for s in self.scores if not s.timed), ""),
            "tasks_total": self.first.tasks_total,
            "pending": sum(s.pending for s in self.scores),
            "kernels": sum(s.kernels for s in self.scores),
        }


def entries_of(scores: Sequence[RunScore]) -> list[Entry]:
    """The scores grouped into entries (example data never with an agent's runs)."""
    groups: dict[tuple[Any, ...], list[RunScore]] = {}
    for score in scores:
        run = score.run
        key = (run.model, run.agent, run.condition, run.catalog_version, score.hardware)
        groups.setdefault((*key, run.is_example), []).append(score)
    return [Entry(scores=tuple(group)) for group in groups.values()]


def entry_record(entry: Entry) -> dict[str, Any]:
    """An entry as a table row: its labels, then per score `M` the mean over attempts and
    `M_ci` ([low, high], None with one attempt); speed scores None unless every attempt
    was timed comparably."""
    record = entry.labels()
    several = len(entry.scores) > 1
    found = {}
    if several:
        # A bootstrap of 2000 resamples per score: computed once per set of stored parts
        # (RunScore.tasks, rewritten by every refresh), whichever page or version asks.
        seed = seed_of(*record["run_ids"])
        found = by_content(
            name="entry-scores",
            inputs=[_method(seed), [s.tasks for s in entry.scores]],
            build=lambda: entry_scores(attempts=entry.attempts, seed=seed),
        )
    for key in METRIC_KEYS:
        value = mean_stored(entry.scores, key)
        interval = found[key][1] if several and value is not None else None
        record[key] = value
        record[f"{key}_ci"] = list(interval) if interval else None
    ns = [s.geomean_n for s in entry.scores if s.timed]
    record["geomean_n"] = round(sum(ns) / len(ns)) if ns and entry.timed else 0
    record["tasks_correct"] = sum(s.tasks_correct for s in entry.scores) / len(entry.scores)
    record["interval_note"] = "" if len(entry.scores) > 1 else NO_INTERVAL
    return record


def ranked(records: list[dict[str, Any]], *, key: str, higher: bool = True) -> None:
    """Set each record's `rank` and `tied` by `key` and `key`_ci (scoring.intervals)."""
    ranks = tied_ranks(
        [(r.get(key), tuple(r[f"{key}_ci"]) if r.get(f"{key}_ci") else None) for r in records],
        higher_is_better=higher,
    )
    for record, (rank, tied) in zip(records, ranks, strict=True):
        record["rank"], record["tied"] = rank, tied


def board_entries_scores(*, filters: Filters) -> list[RunScore]:
    """The run scores on the board of `filters` (one query)."""
    scores = _scores(filters)
    if filters.condition:
        scores = scores.filter(run__condition=filters.condition)
    return list(scores)


def board_entries(*, filters: Filters) -> list[dict[str, Any]]:
    """One record per entry on the board of `filters` (its catalog version and GPU)."""
    scores = _scores(filters)
    if filters.condition:
        scores = scores.filter(run__condition=filters.condition)
    return [entry_record(e) for e in entries_of(list(scores))]


# --- pairs of entries ---------------------------------------------------------------


@dataclass(frozen=True)
class EntryPair:
    without: Entry
    with_guidance: Entry


def entry_pairs(*, filters: Filters) -> list[EntryPair]:
    """Each entry without guidance beside each entry with guidance of the same model,
    agent, catalog version and GPU kind (one query)."""
    entries = entries_of(list(_scores(filters)))
    bare = {
        (*e.key, e.first.run.is_example): e
        for e in entries
        if e.first.run.condition == CONDITION_NONE
    }
    pairs = []
    for entry in entries:
        condition = entry.first.run.condition
        if condition == CONDITION_NONE or (filters.condition and condition != filters.condition):
            continue
        twin = bare.get((*entry.key, entry.first.run.is_example))
        if twin is not None:
            pairs.append(EntryPair(without=twin, with_guidance=entry))
    return pairs


def pair_record(pair: EntryPair) -> dict[str, Any]:
    """A pair as a table row: per score `M`, `M_without`, `M_with`, `M_uplift` and
    `uplift_M_ci` (the paired bootstrap; None unless both sides have two attempts)."""
    a, b = pair.without.labels(), pair.with_guidance.labels()
    record: dict[str, Any] = {
        "hardware": a["hardware"],
        "model": a["model"],
        "agent": a["agent"],
        "catalog_version": a["catalog_version"],
        "without_run_ids": a["run_ids"],
        "with_run_ids": b["run_ids"],
        "with_condition": b["condition"],
        "attempts_without": a["attempts"],
        "attempts_with": b["attempts"],
        "is_example": a["is_example"] or b["is_example"],
        "timed": a["timed"] and b["timed"],
    }
    single = min(a["attempts"], b["attempts"]) < 2
    found: dict[str, dict[str, object]] = {}
    if not single:
        seed = seed_of(*a["run_ids"], "|", *b["run_ids"])
        found = by_content(
            name="paired-scores",
            inputs=[
                _method(seed),
                [s.tasks for s in pair.without.scores],
                [s.tasks for s in pair.with_guidance.scores],
            ],
            build=lambda: paired_scores(
                without=pair.without.attempts,
                with_guidance=pair.with_guidance.attempts,
                seed=seed,
            ),
        )
    same_gpu = record["timed"]
    for key in METRIC_KEYS:
        without = mean_stored(pair.without.scores, key)
        with_guidance = mean_stored(pair.with_guidance.scores, key)
        lift = uplift(without=without, with_guidance=with_guidance)
        if key in SPEED_METRICS and not same_gpu:
            lift = None
        ci = found[key]["uplift_ci"] if found and lift is not None else None
        record[f"{key}_without"] = without
        record[f"{key}_with"] = with_guidance
        record[f"{key}_uplift"] = lift
        record[f"uplift_{key}_ci"] = list(ci) if isinstance(ci, tuple) else None
    ns = [s.geomean_n for s in pair.with_guidance.scores]
    record["geomean_n"] = round(sum(ns) / len(ns)) if ns else 0
    record["interval_note"] = NO_INTERVAL if single else ""
    return record

"""What the run leaderboard says about each entry's provenance: whether our workers
evaluated every kernel on the board's GPU (the "verified" badge), and how many runs
the lab uploaded for the same model, agent and condition (best-of-N made visible)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runs.models import Run
from submissions.models import Submission
from taskformat.spec import Mode


@dataclass(frozen=True)
class EntryAudit:
    verified: bool
    uploads: int  # the owner's runs for the same model, agent and condition


def leaderboard_entry_audit(*, rows: Iterable[Mapping[str, Any]]) -> dict[int, EntryAudit]:
    """Per run id of `rows` (board entries: `run_ids`, the attempts they pool, or a lone
    `run_id`, with `hardware`): verified when every kernel of every run of the entry was
    last evaluated in `cuda` mode on the entry's GPU, and the uploads beside it (the
    owner's runs, private ones included, for the same model, agent and condition). Every
    run id of an entry maps to the entry's audit. Two queries whatever the rows."""
    entries = [
        (list(r.get("run_ids") or ([r["run_id"]] if r.get("run_id") is not None else [])),
         r.get("hardware") or "")
        for r in rows
    ]  # fmt: skip
    gpu = {run_id: hardware for ids, hardware in entries for run_id in ids}
    if not gpu:
        return {}
    evaluated: dict[int, list[bool]] = {}
    kernels = Submission.objects.filter(run_id__in=gpu).values_list(
        "run_id", "score__evaluation__mode", "score__evaluation__hardware"
    )
    for run_id, mode, hardware in kernels:
        on_board = bool(gpu[run_id]) and mode == Mode.CUDA and hardware == gpu[run_id]
        evaluated.setdefault(run_id, []).append(on_board)
    # Every run of the rows' owners, in one query: each run's group and the group sizes.
    owners = Run.objects.filter(pk__in=gpu).values("owner_id")
    keys = {
        pk: (owner_id, model, agent, condition)
        for pk, owner_id, model, agent, condition in Run.objects.filter(
            owner_id__in=owners
        ).values_list("pk", "owner_id", "model", "agent", "condition")
    }
    uploads = Counter(keys.values())
    audits: dict[int, EntryAudit] = {}
    for ids, _ in entries:
        if not ids:
            continue
        audit = EntryAudit(
            verified=all(bool(evaluated.get(i)) and all(evaluated[i]) for i in ids),
            uploads=uploads[keys[ids[0]]] if ids[0] in keys else 0,
        )
        audits.update(dict.fromkeys(ids, audit))
    return audits

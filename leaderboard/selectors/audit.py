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


@dataclass(frozen=True)
class EntryAudit:
    verified: bool
    uploads: int  # the owner's runs for the same model, agent and condition


def leaderboard_entry_audit(*, rows: Iterable[Mapping[str, Any]]) -> dict[int, EntryAudit]:
    """Per run id of `rows` (leaderboard rows with `run_id` and `hardware`): verified
    when every kernel's latest finished evaluation ran in `cuda` mode on the row's GPU,
    and the uploads beside it. Two queries whatever the number of rows."""
    gpu = {r["run_id"]: r["hardware"] for r in rows if r.get("run_id") is not None}
    if not gpu:
        return {}
    evaluated: dict[int, list[bool]] = {}
    kernels = Submission.objects.filter(run_id__in=gpu).values_list(
        "run_id", "score__evaluation__mode", "score__evaluation__hardware"
    )
    for run_id, mode, hardware in kernels:
        on_board = bool(gpu[run_id]) and mode == "cuda" and hardware == gpu[run_id]
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
    return {
        run_id: EntryAudit(
            verified=bool(evaluated.get(run_id)) and all(evaluated[run_id]),
            uploads=uploads[keys[run_id]] if run_id in keys else 0,
        )
        for run_id in gpu
    }

"""Reads of a run's scores for its page and `GET /api/runs/<id>/`: the run's RunScore,
its twin's beside it, and the guidance uplift."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runs.models import Run
from scoring.formulas import LEVELS, uplift
from scoring.models import RunScore

BUCKETS = (*LEVELS, "combined")


def run_score_data(score: RunScore | None) -> dict[str, Any] | None:
    """One run's scores as JSON (None when they were never computed)."""
    if score is None:
        return None
    return {
        "tasks_total": score.tasks_total,
        "tasks_correct": score.tasks_correct,
        "correctness_rate": score.correctness_rate,
        "performance_score": score.performance_score,
        "geomean_speedup": {"value": score.geomean_speedup, "n": score.geomean_n},
        "fast_p": score.fast_p,
        "implementation": {b: score.implementation.get(b) for b in BUCKETS},
        "implementation_provisional": score.implementation.get("provisional", 0),
        "implementation_tasks": {
            b: score.implementation.get("tasks", {}).get(b, {"counted": 0, "total": 0})
            for b in BUCKETS
        },
        "discovery": {b: score.discovery.get(b) for b in BUCKETS},
        "turns": score.turns,
        "tokens": score.tokens,
        "timed": score.timed,
        "hardware": score.hardware,
        "untimed_reason": score.untimed_reason,
        "kernels": score.kernels,
        "pending": score.pending,
        "refreshed_at": score.refreshed_at,
    }


def scores_uplift(*, without: RunScore, with_guidance: RunScore) -> dict[str, Any]:
    """with guidance − without guidance, per metric; speed metrics only when both runs
    were timed on the same GPU."""
    same_gpu = without.timed and with_guidance.timed and without.hardware == with_guidance.hardware

    def speed(name: str) -> float | None:
        if not same_gpu:
            return None
        return uplift(without=getattr(without, name), with_guidance=getattr(with_guidance, name))

    def levels(name: str) -> dict[str, float | None]:
        a, b = getattr(without, name), getattr(with_guidance, name)
        return {k: uplift(without=a.get(k), with_guidance=b.get(k)) for k in BUCKETS}

    def plain(name: str) -> float | None:
        return uplift(without=getattr(without, name), with_guidance=getattr(with_guidance, name))

    return {
        "without": without.run_id,
        "with": with_guidance.run_id,
        "correctness_rate": plain("correctness_rate"),
        "performance_score": speed("performance_score"),
        "geomean_speedup": speed("geomean_speedup"),
        "implementation": levels("implementation"),
        "discovery": levels("discovery"),
        "turns": plain("turns"),
        "tokens": plain("tokens"),
    }


@dataclass(frozen=True)
class RunScoresView:
    mine: dict[str, Any] | None
    twin: dict[str, Any] | None
    uplift: dict[str, Any] | None

    def as_dict(self) -> dict[str, Any]:
        """The `scores` of `GET /api/runs/<id>/`: the run's own, then `twin` and `uplift`."""
        return {**(self.mine or {}), "twin": self.twin, "uplift": self.uplift}


def run_scores_view(*, run: Run, pair: Run | None) -> RunScoresView:
    """The run's scores, its twin's (when the viewer may see the twin) and the uplift."""
    found = {s.run_id: s for s in RunScore.objects.filter(run_id__in=[run.pk, pair and pair.pk])}
    mine, theirs = found.get(run.pk), found.get(pair.pk) if pair else None
    lift = None
    if mine is not None and theirs is not None and pair is not None:
        mine_is_without = run.condition == "none"
        without, with_guidance = (mine, theirs) if mine_is_without else (theirs, mine)
        lift = scores_uplift(without=without, with_guidance=with_guidance)
    return RunScoresView(mine=run_score_data(mine), twin=run_score_data(theirs), uplift=lift)

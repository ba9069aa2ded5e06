"""The order in which the queue claims one owner's evaluations (evaluation_claim_next), also
counted by a run's queue position (selectors.pool_ahead)."""

from __future__ import annotations

from typing import Any

from django.db.models import F, QuerySet, Value
from django.db.models.functions import Coalesce, Least

from evaluator.models import Evaluation

# Within one owner: by `claim_anchor`, then `claim_task`, then creation (claim_order_fields).
CLAIM_ORDER = ("claim_anchor", "claim_task", "created_at", "pk")


def claim_order_fields() -> dict[str, Any]:
    """The annotations of CLAIM_ORDER. A run's evaluations are anchored at the earlier
    creation of the run and of its twin, and go task by task: a paired campaign's two
    kernels of a task are claimed one after the other, so they can share one clean
    reference measurement on their GPU. Any other evaluation goes by its own creation."""
    run_created = F("submission__run__created_at")
    paired = Least(run_created, Coalesce(F("submission__run__pair__created_at"), run_created))
    return {
        "claim_anchor": Coalesce(paired, F("created_at")),
        "claim_task": Coalesce(F("submission__task__slug"), Value("")),
    }


def in_claim_order(evaluations: QuerySet[Evaluation]) -> list[int]:
    """The pks of a queryset of evaluations, in the order the queue claims them."""
    rows = evaluations.annotate(**claim_order_fields()).order_by(*CLAIM_ORDER)
    return list(rows.values_list("pk", flat=True))

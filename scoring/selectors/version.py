"""The data version that cached pages are keyed by (scoring.models.ScoresVersion)."""

from __future__ import annotations

import uuid

from scoring.models import ScoresVersion

ROW = 1


def scores_version() -> str:
    """The current data version (one query; the row is made on first use)."""
    stamp = ScoresVersion.objects.filter(pk=ROW).values_list("stamp", flat=True).first()
    if stamp is None:
        stamp = ScoresVersion.objects.get_or_create(pk=ROW, defaults={"stamp": uuid.uuid4().hex})[
            0
        ].stamp
    return stamp

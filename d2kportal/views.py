"""Site-wide doors that belong to no app: the health check (it asks the evaluator
about its broker and worker pools, so it lives with the project, not in core)."""

from __future__ import annotations

import dataclasses

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from evaluator.selectors import worker_pools_seen
from evaluator.services import broker_ping


def _check(probe) -> str:
    try:
        probe()
    except Exception as exc:  # any failure of a dependency is the answer, not a 500
        return f"error: {type(exc).__name__}: {exc}"[:300]
    return "ok"


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the broker answer; each worker pool's last heartbeat."""
    database, broker = _check(_database), _check(broker_ping)
    pools = []
    if database == "ok":
        pools = [
            {
                **dataclasses.asdict(p),
                "last_seen_at": p.last_seen_at.isoformat() if p.last_seen_at else None,
            }
            for p in worker_pools_seen()
        ]
    healthy = database == "ok" and broker == "ok"
    body: dict[str, object] = {
        "status": "ok" if healthy else "unavailable",
        "database": database,
        "broker": broker,
        "worker_pools": pools,
    }
    return JsonResponse(body, status=200 if healthy else 503)

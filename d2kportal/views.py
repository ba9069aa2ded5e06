"""Site-wide doors that belong to no app: the health check (it asks the evaluator
about its broker and worker pools, so it lives with the project, not in core)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from evaluator.selectors import WorkersSeen, worker_pools_seen, workers_seen
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


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _workers(seen: WorkersSeen) -> dict[str, object]:
    return {
        "live": seen.live,
        "ready": seen.ready,
        "stale": seen.stale,
        "live_window_s": seen.live_window_s,
        "backing_off": [
            {**dataclasses.asdict(w), "backoff_until": _iso(w.backoff_until)}
            for w in seen.backing_off
        ],
    }


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """503 when the database or the broker does not answer; else 200, `degraded` when no
    live worker takes work (none reports, or all back off). Each pool and each worker
    backing off, with the reason."""
    database, broker = _check(_database), _check(broker_ping)
    pools: list[dict[str, object]] = []
    workers: dict[str, object] | None = None
    if database == "ok":
        pools = [
            {**dataclasses.asdict(p), "last_seen_at": _iso(p.last_seen_at)}
            for p in worker_pools_seen()
        ]
        seen = workers_seen()
        workers = _workers(seen)
    healthy = database == "ok" and broker == "ok"
    status = "unavailable"
    if healthy:
        status = "ok" if workers and workers["ready"] else "degraded"
    body: dict[str, object] = {
        "status": status,
        "database": database,
        "broker": broker,
        "workers": workers,
        "worker_pools": pools,
    }
    return JsonResponse(body, status=200 if healthy else 503)

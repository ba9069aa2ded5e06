"""Leaderboard load: p95 latency and requests/s of the leaderboard pages through gunicorn.

Run against a database holding the generated dataset (`manage.py leaderboard_example
--runs 500` over the 26-task catalog), with gunicorn serving it, e.g.:

    gunicorn d2kportal.wsgi -w 2 -b 127.0.0.1:8011 &
    python bench/leaderboard_load.py --base http://127.0.0.1:8011 --task row_softmax

Prints one line per page (p50, p95 in ms, requests/s at `--concurrency`) and the time
of the full leaderboard's CSV export.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import httpx


def measure(client: httpx.Client, url: str, *, requests: int, concurrency: int) -> tuple:
    client.get(url).raise_for_status()  # warm
    latencies: list[float] = []

    def one(_: int) -> None:
        start = time.perf_counter()
        client.get(url).raise_for_status()
        latencies.append(time.perf_counter() - start)

    wall = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(requests)))
    wall = time.perf_counter() - wall
    p95 = statistics.quantiles(latencies, n=20)[-1]
    return statistics.median(latencies) * 1e3, p95 * 1e3, requests / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:8011")
    parser.add_argument("--task", default="row_softmax")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    pages = {
        "home": "/",
        "leaderboard": "/leaderboard/",
        "paired view": "/leaderboard/paired/",
        "task page": f"/tasks/{args.task}/",
    }
    with httpx.Client(base_url=args.base, timeout=30) as client:
        for name, url in pages.items():
            p50, p95, rps = measure(
                client, url, requests=args.requests, concurrency=args.concurrency
            )
            print(f"{name:12s} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms  {rps:6.1f} req/s")
        start = time.perf_counter()
        response = client.get("/api/leaderboard/", params={"format": "csv"})
        response.raise_for_status()
        rows = response.text.count("\n") - 1
        print(f"CSV export   {time.perf_counter() - start:.3f} s for {rows} rows")


if __name__ == "__main__":
    main()

"""Page load: requests/s and p50/p95/p99 latency of the portal's pages and of the
submissions API, through gunicorn, driven by ApacheBench (`ab`, Debian's apache2-utils).

On a database holding the generated dataset (`manage.py leaderboard_example --runs 500`
over the 26-task catalog), with gunicorn serving it with production settings:

    gunicorn -c d2kportal/gunicorn.conf.py d2kportal.wsgi &
    python bench/page_load.py --base http://127.0.0.1:8000 --token "$(manage.py api_token …)"

Every page gets `--requests` GETs at `--concurrency` after a warm-up (the first request
of each gunicorn worker pays for its imports and caches). ab reports each request's
latency; the percentiles are read from its `-e` table (0.1 ms resolution). A page with a
non-2xx answer or a failed connection is reported as failed, never as fast.

With a token (of a staff user: quotas are per user and staff are exempt), the
submissions API is measured too: the list and the detail of the token's owner, a
repeated upload of the same file (answered with the stored submission: 200), and
`--uploads` distinct kernels (each a new submission and a queued evaluation: 201),
sent by this script's own threads since ab repeats one body.

Prints one line per page and the time of the full leaderboard's CSV export.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

KERNEL = """import torch
from torch import nn


class ModelNew(nn.Module):  # load bench upload {n}
    def forward(self, x):
        return torch.softmax(x, dim=-1)
"""


@dataclass(frozen=True)
class Figures:
    name: str
    requests: int
    concurrency: int
    rps: float
    p50: float
    p95: float
    p99: float
    failed: int
    size: int

    def line(self) -> str:
        flag = f"  FAILED {self.failed}" if self.failed else ""
        return (
            f"{self.name:22s} {self.rps:7.1f} req/s  p50 {self.p50:7.1f}  p95 {self.p95:7.1f}"
            f"  p99 {self.p99:7.1f} ms  {self.size / 1024:7.1f} KiB  (n={self.requests}, "
            f"c={self.concurrency}){flag}"
        )


def ab(
    name: str,
    url: str,
    *,
    requests: int,
    concurrency: int,
    headers: dict[str, str],
    body: tuple[bytes, str] | None = None,
) -> Figures:
    """One ab run against `url`; percentiles from ab's CSV table of served-within times."""
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "percentiles.csv"
        command = ["ab", "-q", "-r", "-n", str(requests), "-c", str(concurrency)]
        command += ["-e", str(table)]
        for key, value in headers.items():
            command += ["-H", f"{key}: {value}"]
        if body is not None:
            payload = Path(tmp) / "body"
            payload.write_bytes(body[0])
            command += ["-p", str(payload), "-T", body[1]]
        out = subprocess.run([*command, url], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            sys.exit(f"ab failed on {url}: {out.stderr.strip() or out.stdout.strip()}")
        served = {
            int(float(row[0])): float(row[1])
            for row in csv.reader(table.read_text().splitlines()[1:])
        }

    def number(pattern: str) -> float:
        found = re.search(pattern, out.stdout)
        return float(found.group(1)) if found else 0.0

    # "Failed requests" also counts answers whose length differs from the first one's
    # (a page with a CSRF token or a timestamp): only non-2xx and transport errors fail.
    failed = number(r"Non-2xx responses:\s+(\d+)")
    failed += sum(number(rf"{kind}: (\d+)") for kind in ("Connect", "Receive", "Exceptions"))
    return Figures(
        name=name,
        requests=requests,
        concurrency=concurrency,
        rps=number(r"Requests per second:\s+([\d.]+)"),
        p50=served[50],
        p95=served[95],
        p99=served[99],
        failed=int(failed),
        size=int(number(r"Document Length:\s+(\d+) bytes")),
    )


def uploads(client: httpx.Client, *, task: str, count: int, concurrency: int, tag: str) -> Figures:
    """`count` distinct kernels through POST /api/submissions/ (each one a new submission)."""
    latencies: list[float] = []
    codes: list[int] = []

    def one(n: int) -> None:
        start = time.perf_counter()
        response = client.post(
            "/api/submissions/", json={"task": task, "source": KERNEL.format(n=f"{tag}-{n}")}
        )
        latencies.append((time.perf_counter() - start) * 1e3)
        codes.append(response.status_code)

    wall = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(count)))
    wall = time.perf_counter() - wall
    cuts = statistics.quantiles(latencies, n=100)
    return Figures(
        name="API POST (new kernel)",
        requests=count,
        concurrency=concurrency,
        rps=count / wall,
        p50=statistics.median(latencies),
        p95=cuts[94],
        p99=cuts[98],
        failed=sum(code != 201 for code in codes),
        size=0,
    )


def targets(client: httpx.Client, *, task: str) -> dict[str, str]:
    """The pages to load: a run and one of its submissions are taken from the leaderboard."""
    board = client.get("/api/leaderboard/")
    board.raise_for_status()
    if not board.json():
        sys.exit("The leaderboard is empty: generate the dataset first (leaderboard_example).")
    # A board row is an entry: the runs of one model, agent and condition.
    run = board.json()[0]["run_ids"][0]
    tasks = client.get(f"/api/runs/{run}/").json()["tasks"]
    submission = next(t["result"]["submission"] for t in tasks if t["result"])
    return {
        # No query and a fixed template: the most a Django page gets from this machine.
        "static page": "/scoring/",
        "home": "/",
        "leaderboard": "/leaderboard/",
        "paired view": "/leaderboard/paired/",
        "task page": f"/tasks/{task}/",
        "task matrix": "/leaderboard/matrix/",
        "catalog": "/tasks/",
        "run page": f"/runs/{run}/",
        "submission page": f"/submissions/{submission}/",
        "API submission (anon)": f"/api/submissions/{submission}/",
        "API leaderboard JSON": "/api/leaderboard/",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--task", default="row_softmax")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--token", default="", help="An API token of a staff user.")
    parser.add_argument("--uploads", type=int, default=200)
    parser.add_argument("--only", nargs="*", help="Only these pages (names as printed).")
    args = parser.parse_args()
    if shutil.which("ab") is None:
        sys.exit("ab is not installed: apt-get install apache2-utils")
    base = args.base.rstrip("/")
    auth = {"Authorization": f"Token {args.token}"} if args.token else {}
    load = {"requests": args.requests, "concurrency": args.concurrency}
    with httpx.Client(base_url=base, timeout=60) as client:
        pages = targets(client, task=args.task)
        if args.only:
            pages = {name: url for name, url in pages.items() if name in args.only}
        print(f"{base}: {len(pages)} pages, n={args.requests}, c={args.concurrency}", flush=True)
        for name, url in pages.items():
            for _ in range(2 * args.concurrency):
                client.get(url).raise_for_status()
            print(ab(name, base + url, headers={}, **load).line(), flush=True)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            response = client.get("/api/leaderboard/", params={"format": "csv"})
            response.raise_for_status()
            times.append(time.perf_counter() - start)
        rows = response.text.count("\n") - 1
        print(f"{'CSV export':22s} {max(times):.3f} s (slowest of 3) for {rows} rows", flush=True)
        if not args.token or args.only:
            return
        client.headers.update(auth)
        tag = f"{time.time():.0f}"
        print(uploads(client, task=args.task, count=args.uploads, concurrency=4, tag=tag).line())
        mine = client.get("/api/submissions/")
        mine.raise_for_status()
        own = mine.json()["results"][0]["id"]
        repeat = json.dumps({"task": args.task, "source": KERNEL.format(n=f"{tag}-0")}).encode()
        api = {
            "API list (page 1)": ("/api/submissions/", None),
            "API detail (own)": (f"/api/submissions/{own}/", None),
            "API POST (same file)": ("/api/submissions/", (repeat, "application/json")),
        }
        for name, (url, body) in api.items():
            print(ab(name, base + url, headers=auth, body=body, **load).line(), flush=True)


if __name__ == "__main__":
    main()

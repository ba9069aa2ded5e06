"""Uploads in a burst while a page is polled, then a worker killed mid-evaluation.

    .venv/bin/python bench/durability.py [--uploads 20] [--seconds 10] [--database sqlite]

Starts a portal of its own (web server + `evaluation_worker`, interpret mode) on a
fresh database, sends `--uploads` distinct kernels through the API within
`--seconds` while another thread polls a submission page, SIGKILLs the worker while
an evaluation runs, restarts it, and prints: the upload status codes and latencies,
the polls' status codes, how long after the restart the killed evaluation was
taken again, the time until every evaluation finished, the verdicts, and whether
any log line says `database is locked`.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from d2kportal.processes import ROOT, Portal, pids_alive, process_tree

EXPERT = (ROOT / "catalog" / "row_softmax" / "expert.py").read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uploads", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="d2k-durability-") as tmp:
        portal = Portal(Path(tmp), database=args.database, D2K_REAP_INTERVAL_S="2")
        try:
            run(portal, args)
        finally:
            portal.close()
            print(f"processes left after stopping: {len(portal.leftovers())}")


def run(portal: Portal, args: argparse.Namespace) -> None:
    portal.setup()
    portal.start_web()
    worker = portal.start_worker()
    polls: Counter[int] = Counter()
    stop = threading.Event()
    first_id: list[int] = []

    def poll() -> None:
        while not stop.is_set():
            if first_id:
                polls[portal.get(f"/submissions/{first_id[0]}/")[0]] += 1
                polls[portal.get(f"/api/submissions/{first_id[0]}/")[0]] += 1
            time.sleep(0.5)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    codes: Counter[int] = Counter()
    latencies = []
    started = time.monotonic()
    for index in range(args.uploads):
        sent = time.monotonic()
        code, body = portal.upload(task="row_softmax", source=f"{EXPERT}\n# upload {index}\n")
        latencies.append(time.monotonic() - sent)
        codes[code] += 1
        if code == 201 and not first_id:
            first_id.append(body["id"])
        time.sleep(max(0.0, started + (index + 1) * args.seconds / args.uploads - time.monotonic()))
    burst_s = time.monotonic() - started
    print(
        f"uploads: {dict(codes)} in {burst_s:.1f} s; latency median "
        f"{statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
    )

    def running():
        return [e for e in portal.evaluations() if e["status"] == "running"]

    while not running() or len(process_tree(worker.pid)) < 5:
        time.sleep(0.5)
    time.sleep(2)
    while not running():
        time.sleep(0.2)
    tree = process_tree(worker.pid)
    os.kill(worker.pid, signal.SIGKILL)
    killed = time.monotonic()
    while pids_alive(tree):
        time.sleep(0.1)
    victims = running()  # what the dead worker left running: nothing else moves it now
    print(
        f"killed the worker ({len(tree)} processes) during evaluation {victims[0]['pk']}; "
        f"its tree was gone {time.monotonic() - killed:.2f} s later"
    )
    restarted = time.monotonic()
    portal.start_worker()
    while not any(e["pk"] == victims[0]["pk"] and e["attempts"] >= 2 for e in portal.evaluations()):
        time.sleep(0.5)
    print(f"recovery: taken again {time.monotonic() - restarted:.1f} s after the restart")
    rows = portal.evaluations()
    while any(e["status"] in ("queued", "running") for e in rows):
        time.sleep(2)
        rows = portal.evaluations()
    stop.set()
    poller.join()
    print(
        f"all {len(rows)} evaluations finished {time.monotonic() - started:.0f} s after the "
        f"first upload: {dict(Counter(e['status'] for e in rows))}; attempts "
        f"{dict(Counter(e['attempts'] for e in rows))}"
    )
    print(f"page and API polls: {dict(polls)}")
    locked = sum(portal.log(name).count("database is locked") for name in ("web", "worker"))
    print(f"'database is locked' in the logs: {locked} time(s)")


if __name__ == "__main__":
    main()

"""Two GPU workers of one host: do concurrent evaluations agree with each other and with one alone?

    python bench/gpu_two_workers.py DIR [--task row_softmax] [--gpus 0,1] [--hardware "NVIDIA H200"]

On a fresh portal in DIR (the embedded default), the task's expert is
uploaded through the API and evaluated by a worker pinned to the first GPU
while the other is idle ("alone"); then two copies of it (the same kernel,
told apart by a comment so that they are two submissions) are uploaded at
once and two workers, one pinned to each GPU, take them from the pool's one
queue ("together"). It prints, per timed workload, the three speedups and the
largest relative difference of the two together from each other and from the
one alone, and checks that each evaluation was taken exactly once (one
attempt) and names the GPU (UUID) it ran on, the two together on different
GPUs. Exit code 1 if a difference reaches `--tolerance` (1 %).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from d2kportal.processes import Portal  # noqa: E402

RESULTS = """
import json
from evaluator.models import Evaluation
print(json.dumps([
    {"pk": e.pk, "submission": e.submission_id, "status": e.status, "attempts": e.attempts,
     "worker": e.worker, "finished": bool(e.finished_at),
     "uuid": ((e.environment or {}).get("gpu_state_before") or {}).get("uuid", ""),
     "speedups": {r.name: r.speedup for r in e.results.all() if r.role == "timed"}}
    for e in Evaluation.objects.order_by("pk")
]))
"""


def wait_all(portal: Portal, count: int, limit_s: float) -> list[dict]:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        rows = json.loads(portal.manage("shell", "-c", RESULTS).splitlines()[-1])
        if len(rows) >= count and all(r["finished"] for r in rows):
            return rows
        time.sleep(3)
    raise SystemExit(f"the evaluations did not finish within {limit_s:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--task", default="row_softmax")
    parser.add_argument("--gpus", default="0,1")
    parser.add_argument("--hardware", default="NVIDIA H200")
    parser.add_argument("--tolerance", type=float, default=0.01)
    parser.add_argument("--limit-s", type=float, default=240.0)
    args = parser.parse_args()
    first, second = (int(g) for g in args.gpus.split(","))
    source = (ROOT / "catalog" / args.task / "expert.py").read_text()
    directory = args.dir.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    portal = Portal(
        directory,
        database="sqlite",
        D2K_EVALUATOR_MODE="cuda",
        D2K_HARDWARE_POOLS=args.hardware,
        D2K_DEFAULT_HARDWARE=args.hardware,
    )

    def worker(gpu: int):
        return portal._start(
            f"worker-{gpu}", "evaluation_worker", "--gpu", str(gpu), "--hardware", args.hardware
        )

    try:
        portal.setup()
        portal.start_web()
        alone_worker = worker(first)
        status, _ = portal.upload(task=args.task, source=source)
        assert status == 201, status
        alone = wait_all(portal, 1, args.limit_s)[0]
        alone_worker.terminate()
        alone_worker.wait(timeout=60)
        workers = [worker(first), worker(second)]
        for copy in (1, 2):
            status, _ = portal.upload(task=args.task, source=f"{source}\n# copy {copy}\n")
            assert status == 201, status
        rows = wait_all(portal, 3, args.limit_s)
        together = rows[1:]
        for proc in workers:
            proc.terminate()
    finally:
        portal.close()

    problems = []
    for row in rows:
        if row["status"] != "correct" or row["attempts"] != 1 or not row["uuid"]:
            problems.append(
                f"evaluation {row['pk']}: {row['status']}, attempts {row['attempts']}, "
                f"GPU {row['uuid'] or 'not named'}"
            )
    if together[0]["uuid"] == together[1]["uuid"]:
        problems.append("the two concurrent evaluations ran on the same GPU")
    print(f"alone: {alone['uuid']} ({alone['worker']})")
    for row in together:
        print(f"together: {row['uuid']} ({row['worker']})")
    print("\n| workload | alone | together, GPU A | together, GPU B | A vs B | vs alone |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, base in alone["speedups"].items():
        a, b = (row["speedups"].get(name) for row in together)
        if not (base and a and b):
            problems.append(f"{name}: a speedup is missing")
            continue
        pair = abs(a - b) / min(a, b)
        off = max(abs(a - base), abs(b - base)) / base
        print(f"| {name} | ×{base:.3f} | ×{a:.3f} | ×{b:.3f} | {pair:.2%} | {off:.2%} |")
        if pair >= args.tolerance or off >= args.tolerance:
            problems.append(f"{name}: {pair:.2%} between the GPUs, {off:.2%} from alone")
    print(
        "\n"
        + (
            "\n".join(problems)
            if problems
            else f"every evaluation once, all within {args.tolerance:.0%}"
        )
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

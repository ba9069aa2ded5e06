"""A run bundle with a kernel for every catalog task, evaluated end to end by one GPU worker.

    python bench/gpu_run_bundle.py DIR [--deadline-s 520] [--gpus 0] [--hardware "NVIDIA H200"]
    python bench/gpu_run_bundle.py DIR --export baselines.json

The first call on an empty DIR builds a portal there on the embedded default
(SQLite, django-q2's ORM broker): it migrates, loads the catalog, packs every
task's expert kernel into one bundle (`kernels/<task>.py`, a manifest without
guidance levels) and uploads it through `POST /api/runs/` to the portal's own
web server. Then, on every call, it runs one `manage.py evaluation_worker`
per GPU of `--gpus` (pinned to it) in cuda mode, counters on, as a deployment
does, and prints a line for each evaluation that finishes, with the GPU
(UUID) it ran on.

A call stops the worker when `--deadline-s` has passed (a device call has a
time limit); the next call on the same DIR (carried back) starts a worker
again, which takes back the evaluation the stopped one held, as it takes back
a dead worker's. `DIR/state.json` adds up the worker's time over the calls.
When every evaluation has finished it prints the run's totals: worker wall
time, the sum of the evaluations' own times, the verdicts.

`--export FILE` writes the finished evaluations as `{task: verdict}`, the
format of docs/baselines.json (bench/baselines_md.py, `manage.py
import_baselines`), from the portal's own rows: the numbers are exactly those
the portal stores and shows.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from d2k_client.packing import bundle_pack  # noqa: E402

from tests.evaluator.portal_processes import Portal  # noqa: E402

MANIFEST = {
    "schema": 1,
    "model": "catalog experts",
    "agent": "none (written by hand)",
    "levels": [],
    "turn_budget": 350,
    "hardware": "NVIDIA H200",
    "notes": "Every catalog task's expert kernel in one bundle: a check of the GPU worker, "
    "not an agent's run.",
}

PROGRESS = """
import json
from evaluator.models import Evaluation
rows = Evaluation.objects.select_related("submission__task").order_by("pk")
print(json.dumps([
    {"pk": e.pk, "task": e.submission.task.slug, "status": e.status, "attempts": e.attempts,
     "started": e.started_at.isoformat() if e.started_at else None,
     "finished": e.finished_at.isoformat() if e.finished_at else None,
     "seconds": (e.finished_at - e.started_at).total_seconds()
         if e.finished_at and e.started_at else None,
     "hardware": e.hardware, "worker": e.worker, "message": e.message[:160],
     "uuid": ((e.environment or {}).get("gpu_state_before") or {}).get("uuid", "")}
    for e in rows
]))
"""

EXPORT = """
import json, sys
from evaluator.models import Evaluation, EvaluationStatus
out = {}
for e in (Evaluation.objects.select_related("submission__task_version__task")
          .prefetch_related("results").order_by("pk")):
    if e.finished_at is None:
        continue
    version = e.submission.task_version
    out[version.task.slug] = {
        "status": e.status, "message": e.message, "flags": e.flags,
        "environment": e.environment, "task": version.task.slug, "mode": e.mode,
        "evaluator_version": e.evaluator_version, "task_hash": version.content_hash,
        "wall_seconds": (e.finished_at - e.started_at).total_seconds(),
        "public_log": e.public_log,
        "workloads": [
            {"name": r.name, "role": r.role, "hidden": r.hidden, "status": r.status,
             "message": r.message, "max_abs_err": r.max_abs_err, "rel_err": r.rel_err,
             "median_ms": r.median_ms, "ref_median_ms": r.ref_median_ms,
             "speedup": r.speedup, "achieved_tflops": r.achieved_tflops,
             "achieved_tbps": r.achieved_tbps, "sol_fraction": r.sol_fraction,
             "timing": r.timing, "counters": r.counters}
            for r in e.results.order_by("position")
        ],
    }
print(json.dumps(out))
"""


def bundle_bytes(tasks: list[str] | None = None) -> tuple[bytes, list[str]]:
    """The bundle: the manifest and every catalog task's expert (or `tasks`') as its kernel,
    zipped as `d2k pack-run` zips a run folder."""
    slugs = sorted(p.parent.name for p in (ROOT / "catalog").glob("*/task.toml"))
    slugs = [slug for slug in slugs if not tasks or slug in tasks]
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder)
        (run / "kernels").mkdir()
        (run / "manifest.json").write_text(json.dumps(MANIFEST, indent=1))
        for slug in slugs:
            expert = (ROOT / "catalog" / slug / "expert.py").read_text()
            (run / "kernels" / f"{slug}.py").write_text(expert)
        return bundle_pack(run), slugs


def upload(portal: Portal, data: bytes) -> dict:
    boundary = "d2k-bundle-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="bundle"; filename="run.zip"\r\n'
            "Content-Type: application/zip\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"{portal.base_url}/api/runs/",
        data=body,
        headers={
            "Authorization": f"Token {portal.token}",
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"the upload was refused: {exc.code} {exc.read()[:2000]!r}") from exc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--deadline-s", type=float, default=520.0)
    parser.add_argument("--gpus", default="0", help="comma-separated GPU indices, a worker each")
    parser.add_argument("--hardware", default="NVIDIA H200")
    parser.add_argument("--export", type=Path, help="write the finished verdicts to this file")
    parser.add_argument(
        "--mode",
        choices=["cuda", "interpret"],
        default="cuda",
        help="interpret: a dry run of the whole flow on a machine without a GPU (no pinning)",
    )
    parser.add_argument("--tasks", help="comma-separated task slugs (default: every task)")
    args = parser.parse_args()
    started = time.monotonic()
    directory: Path = args.dir.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    state_path = directory / "state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    portal = Portal(
        directory,
        database="sqlite",
        D2K_EVALUATOR_MODE=args.mode,
        D2K_HARDWARE_POOLS=args.hardware,
        D2K_DEFAULT_HARDWARE=args.hardware,
    )
    if args.export:
        verdicts = json.loads(portal.manage("shell", "-c", EXPORT).splitlines()[-1])
        for slug, verdict in verdicts.items():
            has_baseline = (ROOT / "catalog" / slug / "baseline.py").exists()
            verdict["timed_against"] = "baseline.py" if has_baseline else "reference.py"
        args.export.write_text(json.dumps(verdicts, indent=1))
        print(f"wrote {args.export}")
        return
    try:
        if not state.get("run"):
            portal.setup()
            portal.start_web()
            data, slugs = bundle_bytes(args.tasks.split(",") if args.tasks else None)
            answer = upload(portal, data)
            state = {
                "run": answer["id"],
                "tasks": len(slugs),
                "calls": [],
                "bundle_bytes": len(data),
            }
            state_path.write_text(json.dumps(state, indent=1))
            print(
                f"run {answer['id']} uploaded: {len(slugs)} kernels, {len(data)} bytes", flush=True
            )
            portal.close()
            portal.processes.clear()
        worker_started = time.monotonic()
        gpus = [int(g) for g in args.gpus.split(",")] if args.mode == "cuda" else [None]
        workers = [
            portal._start(
                f"worker-{gpu if gpu is not None else 'cpu'}",
                "evaluation_worker",
                *(["--gpu", str(gpu)] if gpu is not None else []),
                "--hardware",
                args.hardware,
            )
            for gpu in gpus
        ]
        seen: set[int] = set()
        rows: list[dict] = []
        while True:
            rows = json.loads(portal.manage("shell", "-c", PROGRESS).splitlines()[-1])
            for row in rows:
                if row["finished"] and row["pk"] not in seen:
                    seen.add(row["pk"])
                    print(
                        f"{row['task']:24} {row['status']:14} {row['seconds'] or 0:6.1f} s  "
                        f"attempts {row['attempts']}  {row['worker']} {row['uuid'] or '-'}  "
                        f"{row['message'][:80]}",
                        flush=True,
                    )
            done = all(row["finished"] for row in rows)
            if done or time.monotonic() - started > args.deadline_s:
                break
            for gpu, worker in zip(gpus, workers, strict=True):
                if worker.poll() is not None:
                    print(portal.log(f"worker-{gpu if gpu is not None else 'cpu'}")[-3000:])
                    raise SystemExit("a worker stopped")
            time.sleep(5)
        worker_s = time.monotonic() - worker_started
        portal.close()
        state["calls"].append({"worker_s": round(worker_s, 1), "finished": len(seen)})
        state["worker_s_total"] = round(sum(c["worker_s"] for c in state["calls"]), 1)
        state_path.write_text(json.dumps(state, indent=1))
        finished = [r for r in rows if r["finished"]]
        print(
            f"\n{len(finished)} of {len(rows)} evaluations finished; worker time this call "
            f"{worker_s:.0f} s, over {len(state['calls'])} call(s) {state['worker_s_total']:.0f} s"
        )
        if len(finished) == len(rows):
            own = sum(r["seconds"] or 0 for r in rows)
            counts: dict[str, int] = {}
            for r in rows:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
            taken_again = sum(1 for r in rows if r["attempts"] > 1)
            per_gpu: dict[str, int] = {}
            for r in rows:
                per_gpu[r["uuid"] or "?"] = per_gpu.get(r["uuid"] or "?", 0) + 1
            print(f"evaluations per GPU: {per_gpu}")
            print(
                f"complete: {len(rows)} evaluations, sum of their own times {own:.0f} s, "
                f"{taken_again} taken again after a stopped worker; verdicts {counts}"
            )
            state["complete"] = {
                "per_gpu": per_gpu,
                "evaluations_s": round(own, 1),
                "verdicts": counts,
                "taken_again": taken_again,
            }
            state_path.write_text(json.dumps(state, indent=1))
    finally:
        portal.close()
        # Nothing of this call's worker may outlive it: the next call takes its place.
        deadline = time.monotonic() + 60
        while portal.leftovers() and time.monotonic() < deadline:
            time.sleep(1)
        if portal.leftovers():
            raise SystemExit(f"processes of the worker outlived it: {sorted(portal.leftovers())}")


if __name__ == "__main__":
    main()

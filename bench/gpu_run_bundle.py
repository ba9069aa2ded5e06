"""A run bundle with a kernel for every catalog task, evaluated end to end by GPU workers.

    python bench/gpu_run_bundle.py DIR [--deadline-s 520] [--gpus 0] [--hardware "NVIDIA H200"]
                                       [--keep-workers] [--snapshot FOLDER] [--kernels naive]
                                       [--counters all|needed|off]
    python bench/gpu_run_bundle.py DIR --export baselines.json

The first call on an empty DIR builds a portal there on the embedded default
(SQLite, django-q2's ORM broker): it migrates, loads the catalog, packs every
task's expert kernel (`--kernels naive`: its naive Triton kernel, from
tests/catalog/negatives) into one bundle (`kernels/<task>.py`, a manifest without
guidance levels) and uploads it through `POST /api/runs/` to the portal's own
web server. Then it runs one `manage.py evaluation_worker` per GPU of
`--gpus` (pinned to it) in cuda mode, `--evaluations-per-gpu` at once on each
GPU under its lease, counters read for every task (`--counters needed`: only
where a design property needs them, as a deployment does), and prints
a line for each evaluation that finishes: its time, the time of each of its
parts (the child, the judge, the clean reference, the counters pass; the
child's stages after them; the seconds it held the GPU alone, waited for it and
was frozen for another evaluation's timed phase), the GPU (UUID) it ran on.

A device call has a time limit, so a call ends by `--deadline-s` (seconds from
its start): it stops watching STOP_S earlier when it is to stop the workers, writes
the snapshot, then stops them (a worker gets 30 s to end its evaluations). With
`--keep-workers` the workers run on (each runs in a session of its own) and
the next call on the same DIR, on the same machine, watches them: the run is
evaluated by the same worker processes from start to end. Without it, or
where the workers are gone (a fresh machine, DIR restored from a snapshot),
the call stops them and the next one starts new workers, which take back the
evaluation a stopped one held, as they take back a dead worker's.
`--snapshot FOLDER` writes what a fresh machine resumes from at the end of
the call: `db.sqlite3.gz` (a consistent copy of the database), `state.json`
and the workers' logs; gunzip the database into DIR beside state.json.

When every evaluation has finished the call stops the workers and prints
the run's totals (also in DIR/state.json, "complete"): the workers' wall
time from their start to the last verdict, the sum of the evaluations' own
times and of each part and child stage, the verdicts, evaluations per GPU.

`--export FILE` writes the finished evaluations as `{task: verdict}`, each with
the design properties the portal assessed from what ran (`properties`), the
format of docs/baselines.json (bench/baselines_md.py, `manage.py
import_baselines`), from the portal's own rows: the numbers are exactly those
the portal stores and shows.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from d2k_client.packing import bundle_pack  # noqa: E402

from d2kportal.processes import Portal  # noqa: E402
from evaluator.harness.leasereport import TIMELINE  # noqa: E402

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
    {"pk": e.pk, "task": e.submission.task.slug, "run": e.submission.run_id,
     "status": e.status, "attempts": e.attempts, "created": e.created_at.isoformat(),
     "started": e.started_at.isoformat() if e.started_at else None,
     "finished": e.finished_at.isoformat() if e.finished_at else None,
     "seconds": (e.finished_at - e.started_at).total_seconds()
         if e.finished_at and e.started_at else None,
     "hardware": e.hardware, "worker": e.worker, "message": e.message[:160],
     "last_error": e.last_error[:240] if e.attempts > 1 else "",
     "scratch_mib": (e.environment or {}).get("peak_scratch_mib"),
     "uuid": ((e.environment or {}).get("gpu_state_before") or {}).get("uuid", ""),
     "phases": (e.environment or {}).get("phase_seconds") or {},
     "stages": (e.environment or {}).get("child_stages") or {},
     "lease": {k: v for k, v in ((e.environment or {}).get("gpu_lease") or {}).items()
               if k in ("exclusive_held_s", "exclusive_wait_s", "frozen_s", "gpu_grant_wait_s")
               or (k == "memory_wait_s" and v)},
     "clean_age": ((e.environment or {}).get("clean_reference") or {}).get("age_s"),
     "clean_reused": ((e.environment or {}).get("clean_reference") or {}).get("reused")}
    for e in rows
]))
"""

RUN_STATE = """
import json
from runs.models import Run
run = Run.objects.get(pk={pk})
print(json.dumps({{"state": run.state, "errors": run.errors}}))
"""

EXPORT = """
import json, sys
from evaluator.models import Evaluation, EvaluationStatus
from scoring.models import Assessment
run = {run}
rows = Evaluation.objects.select_related("submission__task_version__task")
if run is not None:
    rows = rows.filter(submission__run_id=run)
out = {{}}
for e in rows.prefetch_related("results").order_by("pk"):
    if e.finished_at is None:
        continue
    version = e.submission.task_version
    out[version.task.slug] = {{
        "status": e.status, "message": e.message, "flags": e.flags,
        "environment": e.environment, "task": version.task.slug, "mode": e.mode,
        "evaluator_version": e.evaluator_version, "task_hash": version.content_hash,
        "wall_seconds": (e.finished_at - e.started_at).total_seconds(),
        "public_log": e.public_log,
        "source_sha256": e.submission.sha256,
        "workloads": [
            {{"name": r.name, "role": r.role, "hidden": r.hidden, "status": r.status,
             "message": r.message, "max_abs_err": r.max_abs_err, "rel_err": r.rel_err,
             "median_ms": r.median_ms, "ref_median_ms": r.ref_median_ms,
             "speedup": r.speedup, "achieved_tflops": r.achieved_tflops,
             "achieved_tbps": r.achieved_tbps, "sol_fraction": r.sol_fraction,
             "timing": r.timing, "counters": r.counters}}
            for r in e.results.filter(hidden=False).order_by("position")
        ],
        "properties": [
            {{"key": a.property.key, "level": a.property.level, "implemented": a.value,
             "evidence": {{"kind": a.evidence_kind, "excerpt": a.evidence}}}}
            for a in Assessment.objects.filter(submission=e.submission, kind="implemented")
            .select_related("property").order_by("property__position")
        ],
    }}
print(json.dumps(out))
"""


def exported(portal: Portal, run: int | None = None) -> dict[str, dict]:
    """The finished evaluations (of run `run`, or all of them) as {task: verdict}, from the
    portal's own rows, each naming the file it was timed against."""
    verdicts = json.loads(portal.manage("shell", "-c", EXPORT.format(run=run)).splitlines()[-1])
    for slug, verdict in verdicts.items():
        has_baseline = (ROOT / "catalog" / slug / "baseline.py").exists()
        verdict["timed_against"] = "baseline.py" if has_baseline else "reference.py"
    return verdicts


def expert_path(slug: str) -> Path:
    return ROOT / "catalog" / slug / "expert.py"


def naive_path(slug: str) -> Path:
    """The task's naive Triton kernel: correct, written without the guidance's ideas."""
    return ROOT / "tests" / "catalog" / "negatives" / f"{slug}.py"


# What `--kernels` packs: each task's kernel, and the manifest's model and notes.
KERNELS: dict[str, tuple[Callable[[str], Path], dict]] = {
    "expert": (expert_path, MANIFEST),
    "naive": (
        naive_path,
        {
            **MANIFEST,
            "model": "catalog naive kernels",
            "notes": "Every catalog task's naive Triton kernel (tests/catalog/negatives) in one "
            "bundle: a check of the GPU worker and of the design-property assessment, not an "
            "agent's run.",
        },
    ),
}


def bundle_bytes(
    tasks: list[str] | None = None,
    *,
    manifest: dict | None = None,
    kernel: Callable[[str], Path] = expert_path,
) -> tuple[bytes, list[str]]:
    """The bundle: the manifest (MANIFEST unless given) and every catalog task's kernel
    (or `tasks`'), by default its expert, zipped as `d2k pack-run` zips a run folder."""
    slugs = sorted(p.parent.name for p in (ROOT / "catalog").glob("*/task.toml"))
    slugs = [slug for slug in slugs if not tasks or slug in tasks]
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder)
        (run / "kernels").mkdir()
        (run / "manifest.json").write_text(json.dumps(manifest or MANIFEST, indent=1))
        for slug in slugs:
            (run / "kernels" / f"{slug}.py").write_text(kernel(slug).read_text())
        return bundle_pack(run), slugs


def upload(portal: Portal, data: bytes) -> dict:
    """POST the bundle: 201 (validated at once) or 202 (a bundle over
    D2K_RUN_SYNC_VALIDATION_BYTES, its run `validating` until a worker validated it:
    run_validated waits for that)."""
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
            answer = json.loads(response.read())
            if response.status == 202:
                print(f"run {answer['id']} stored; the workers validate it first", flush=True)
            return answer
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"the upload was refused: {exc.code} {exc.read()[:2000]!r}") from exc


def run_validated(portal: Portal, run_id: int, *, deadline: float) -> None:
    """Wait while the run is `validating` (the default pool's workers validate a bundle
    stored by a 202); a rejected bundle ends the script with its problems."""
    while True:
        found = json.loads(
            portal.manage("shell", "-c", RUN_STATE.format(pk=run_id)).splitlines()[-1]
        )
        if found["state"] == "rejected":
            problems = "; ".join(
                f"{e['file'] or 'bundle'}:{e['line'] or '-'}: {e['message']}"
                for e in found["errors"]
            )
            raise SystemExit(f"the portal rejected the bundle: {problems}")
        if found["state"] != "validating":
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"run {run_id} is still validating at the deadline")
        time.sleep(5)


def worker_alive(pid: int, directory: Path, command: bytes = b"evaluation_worker") -> bool:
    """A worker of this portal (its environment names DIR; its command line `command`) is
    still running as `pid`."""
    proc = Path("/proc") / str(pid)
    try:
        cmdline = (proc / "cmdline").read_bytes()
        environ = (proc / "environ").read_bytes()
    except OSError:
        return False
    return command in cmdline and str(directory).encode() in environ


def snapshot(directory: Path, folder: Path) -> None:
    """What a fresh machine resumes from: the database (a consistent copy), state and logs."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / "db.sqlite3"
    source = sqlite3.connect(directory / "db.sqlite3")
    target = sqlite3.connect(copy)
    with target:
        source.backup(target)
    source.close()
    target.close()
    with open(copy, "rb") as raw, gzip.open(folder / "db.sqlite3.gz", "wb") as packed:
        shutil.copyfileobj(raw, packed)
    copy.unlink()
    kept = ("worker-*.log", "gpu-samples-*.csv")
    for name in ("state.json", *(p.name for pattern in kept for p in directory.glob(pattern))):
        if (directory / name).exists():
            shutil.copyfile(directory / name, folder / name)
    # The GPU lease's timeline, where a measurement keeps one (bench/lease_timeline.py).
    for log in (directory / "work" / "gpu-lease").glob(f"*/{TIMELINE}"):
        shutil.copyfile(log, folder / f"timeline-{log.parent.name}.log")


def report(rows: list[dict], seen: set[int]) -> None:
    for row in rows:
        if row["finished"] and row["pk"] not in seen:
            seen.add(row["pk"])
            phases = " ".join(f"{k} {v:.0f}s" for k, v in row["phases"].items())
            if row.get("stages"):
                stages = " ".join(f"{k} {v:.1f}" for k, v in row["stages"].items())
                phases = f"{phases}; child: {stages}"
            if row.get("lease"):
                # The GPU alone (held), waiting for it, frozen for another's timed phase,
                # a starting child waiting to be granted the GPU.
                lease = " ".join(f"{k[:-2]} {v:.0f}s" for k, v in row["lease"].items())
                phases = f"{phases}; lease: {lease}"
            print(
                f"{row['task']:24} {row['status']:10} {row['seconds'] or 0:6.1f} s ({phases})  "
                f"attempts {row['attempts']}  {row['uuid'] or '-'}  {row['message'][:70]}",
                flush=True,
            )


def summary(rows: list[dict], state: dict) -> dict:
    """The finished run's totals: worker time, the evaluations' own times, the verdicts."""
    counts: dict[str, int] = {}
    per_gpu: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        per_gpu[r["uuid"] or "?"] = per_gpu.get(r["uuid"] or "?", 0) + 1

    def added(key: str) -> dict[str, float]:
        """The rows' seconds under `key`, name by name."""
        total: dict[str, float] = {}
        for r in rows:
            for name, seconds in (r.get(key) or {}).items():
                total[name] = round(total.get(name, 0.0) + seconds, 1)
        return total

    return {
        "worker_s": round(sum(s["end"] - s["start"] for s in state["segments"]), 1),
        "evaluations_s": round(sum(r["seconds"] or 0 for r in rows), 1),
        "phases_s": added("phases"),
        "child_stages_s": added("stages"),
        # The GPU lease: seconds the evaluations held the GPU alone, waited for it, and
        # spent frozen for another's timed phase, and their starting children waited to
        # be granted it (under one lease the held seconds of a GPU add up to at most its
        # wall time).
        "lease_s": added("lease"),
        "per_gpu": per_gpu,
        "verdicts": counts,
        "taken_again": sum(1 for r in rows if r["attempts"] > 1),
        # Why: the error of the attempt before the last, as the row keeps it.
        "taken_again_why": [
            f"{r['task']} (run {r.get('run')}): {r.get('last_error') or '?'}"
            for r in rows
            if r["attempts"] > 1
        ],
        # The most any evaluation's scratch folder held (its child's output files, the
        # compile caches): what the host's disk must have room for, several at once.
        "scratch_gib_peak": round(
            max((r.get("scratch_mib") or 0 for r in rows), default=0) / 1024, 1
        ),
        # Clean references taken from an earlier evaluation of the same task on the GPU, of
        # the evaluations that had one (before evaluator 0.6.3, which says so, an age over 0).
        "clean_reference_reused": [
            sum(1 for r in rows if r.get("clean_reused") or (r.get("clean_age") or 0) > 0),
            sum(1 for r in rows if r.get("clean_age") is not None),
        ],
    }


def arguments(description: str, counters: str = "all") -> argparse.ArgumentParser:
    """The options of a call that evaluates uploaded runs with GPU workers; `counters` is
    the default of its workers' D2K_EVALUATION_COUNTERS."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("dir", type=Path)
    parser.add_argument("--deadline-s", type=float, default=520.0)
    parser.add_argument("--gpus", default="0", help="comma-separated GPU indices, a worker each")
    parser.add_argument("--hardware", default="NVIDIA H200")
    parser.add_argument(
        "--keep-workers",
        action="store_true",
        help="leave the workers running at the deadline, for the next call on this machine",
    )
    parser.add_argument(
        "--snapshot", type=Path, help="write the database, state and logs here at the end"
    )
    parser.add_argument(
        "--mode",
        choices=["cuda", "interpret"],
        default="cuda",
        help="interpret: a dry run of the whole flow on a machine without a GPU (no pinning)",
    )
    parser.add_argument("--tasks", help="comma-separated task slugs (default: every task)")
    parser.add_argument(
        "--evaluations-per-gpu",
        type=int,
        default=6,
        help="evaluations each worker runs at once on its GPU (D2K_EVALUATIONS_PER_GPU)",
    )
    parser.add_argument(
        "--counters",
        choices=["needed", "all", "off"],
        default=counters,
        help=f"the workers' D2K_EVALUATION_COUNTERS (default: {counters})",
    )
    return parser


def portal_for(directory: Path, args: argparse.Namespace) -> Portal:
    """The portal in DIR on SQLite, its workers in `args.mode` on `args.hardware`, reading
    counters where `args.counters` says (D2K_EVALUATION_COUNTERS; by default every verdict
    of a baselines run carries its DRAM traffic)."""
    return Portal(
        directory,
        database="sqlite",
        D2K_EVALUATION_COUNTERS=args.counters,
        D2K_EVALUATIONS_PER_GPU=str(args.evaluations_per_gpu),
        D2K_EVALUATOR_MODE=args.mode,
        D2K_HARDWARE_POOLS=args.hardware,
        D2K_DEFAULT_HARDWARE=args.hardware,
    )


def workers_running(
    portal: Portal, state: dict, args: argparse.Namespace, save: Callable[[], None]
) -> list[int]:
    """The last call's workers where they still run, else new ones (a new segment)."""
    workers = [pid for pid in state.get("workers", []) if worker_alive(pid, portal.directory)]
    if workers:
        print(f"watching the running worker(s) {workers}", flush=True)
        return workers
    if state.get("workers"):
        print("the workers of the last call are gone: starting new ones", flush=True)
    gpus = [int(g) for g in args.gpus.split(",")] if args.mode == "cuda" else [None]
    procs = [
        portal._start(
            f"worker-{gpu if gpu is not None else 'cpu'}",
            "evaluation_worker",
            *(["--gpu", str(gpu)] if gpu is not None else []),
            "--hardware",
            args.hardware,
        )
        for gpu in gpus
    ]
    workers = [proc.pid for proc in procs]
    now = time.time()
    state["workers"] = workers
    state["segments"].append({"start": now, "end": now})
    save()
    return workers


def evaluations_watch(
    portal: Portal,
    state: dict,
    workers: list[int],
    *,
    until: float,
    save: Callable[[], None],
) -> list[dict]:
    """Print each evaluation as it finishes until all have (or `until`, a monotonic
    time, passes); returns the rows of the last look."""
    seen: set[int] = set()
    rows: list[dict] = []
    while True:
        rows = json.loads(portal.manage("shell", "-c", PROGRESS).splitlines()[-1])
        report(rows, seen)
        state["segments"][-1]["end"] = time.time()
        save()
        done = all(row["finished"] for row in rows)
        if done or time.monotonic() > until:
            return rows
        dead = [pid for pid in workers if not worker_alive(pid, portal.directory)]
        if dead:
            print(portal.log("worker-0")[-3000:])
            raise SystemExit(f"worker(s) {dead} stopped")
        time.sleep(5)


# What a call keeps of its deadline to stop the workers and write its snapshot.
STOP_S = 45.0


def watch_until(started: float, args: argparse.Namespace) -> float:
    """When the call stops watching: its deadline, less STOP_S unless the workers run on."""
    return started + args.deadline_s - (0.0 if args.keep_workers else STOP_S)


def workers_release(portal: Portal, state: dict, *, keep: bool, workers: list[int]) -> None:
    """At the end of a call: leave the workers running (`keep`), or stop them and every
    process of the portal."""
    if keep:
        print(f"the worker(s) {workers} keep running for the next call", flush=True)
        return
    directory = portal.directory
    kept = [pid for pid in state.get("workers", []) if worker_alive(pid, directory)]
    for pid in kept:
        # The main process only, as a service manager stops a worker.
        os.kill(pid, signal.SIGTERM)
    grace = time.monotonic() + 30
    while any(worker_alive(pid, directory) for pid in kept) and time.monotonic() < grace:
        time.sleep(1)
    portal.close()
    deadline = time.monotonic() + 60
    while portal.leftovers() and time.monotonic() < deadline:
        time.sleep(1)
    left = sorted(portal.leftovers())
    if left:
        raise SystemExit(f"processes of the worker outlived it: {left}")


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--export", type=Path, help="write the finished verdicts to this file")
    parser.add_argument(
        "--kernels",
        choices=sorted(KERNELS),
        default="expert",
        help="each task's expert (catalog/<task>/expert.py) or naive kernel "
        "(tests/catalog/negatives)",
    )
    args = parser.parse_args()
    started = time.monotonic()
    directory: Path = args.dir.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    state_path = directory / "state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    portal = portal_for(directory, args)
    if args.export:
        args.export.write_text(json.dumps(exported(portal), indent=1))
        print(f"wrote {args.export}")
        return

    def save() -> None:
        state_path.write_text(json.dumps(state, indent=1))

    keep = False
    workers: list[int] = []
    try:
        if not state.get("run"):
            portal.setup()
            portal.start_web()
            kernel, manifest = KERNELS[args.kernels]
            tasks = args.tasks.split(",") if args.tasks else None
            data, slugs = bundle_bytes(tasks, manifest=manifest, kernel=kernel)
            answer = upload(portal, data)
            state = {
                "run": answer["id"],
                "tasks": len(slugs),
                "bundle_bytes": len(data),
                "uploaded_at": time.time(),
                "segments": [],
                "workers": [],
            }
            save()
            print(
                f"run {answer['id']} uploaded: {len(slugs)} kernels, {len(data)} bytes", flush=True
            )
            portal.close()
            portal.processes.clear()
        workers = workers_running(portal, state, args, save)
        # Before its evaluations exist: a run still validating has none, all finished.
        run_validated(portal, state["run"], deadline=started + args.deadline_s)
        until = watch_until(started, args)
        rows = evaluations_watch(portal, state, workers, until=until, save=save)
        finished = [r for r in rows if r["finished"]]
        print(f"\n{len(finished)} of {len(rows)} evaluations finished", flush=True)
        if len(finished) == len(rows):
            state["complete"] = summary(rows, state)
            save()
            print(f"complete: {json.dumps(state['complete'])}")
        else:
            keep = args.keep_workers
    finally:
        # The snapshot first: a call cut short while its workers stop still leaves it.
        if args.snapshot:
            snapshot(directory, args.snapshot)
        workers_release(portal, state, keep=keep, workers=workers)


if __name__ == "__main__":
    main()

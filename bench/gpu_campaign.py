"""A paired campaign uploaded through the API and evaluated by one host's GPU workers: its
wall time from the upload to the last verdict, read from the portal's own rows.

    python bench/gpu_campaign.py DIR [--deadline-s 520] [--gpus 0] [--hardware "NVIDIA H200"]
                                     [--keep-workers] [--snapshot FOLDER]
                                     [--mode cuda|interpret] [--tasks a,b]
                                     [--evaluations-per-gpu 6] [--counters needed]
    python bench/gpu_campaign.py DIR --export FOLDER

The first call on an empty DIR builds a portal there as bench/gpu_run_bundle.py does
(SQLite, django-q2's ORM broker, the catalog loaded) and packs two run bundles of the
same model and agent, both labelled as a benchmark check, not an agent's output: the
run without guidance (`levels: []`) holds every catalog task's naive Triton kernel
(tests/catalog/negatives), the run with guidance (`levels: ["L1", "L2", "L3"]`) every
task's expert. It uploads them back to back through `POST /api/runs/` (the portal pairs
the second with the first as twins) and records the upload times in DIR/state.json. Then
it runs one `manage.py evaluation_worker` per GPU of `--gpus` and watches them, printing
a line per finished evaluation; `--deadline-s`, `--keep-workers` and `--snapshot` resume
a campaign across calls exactly as in bench/gpu_run_bundle.py.

When every evaluation of both runs has finished, the call prints the campaign's summary
and stores it in DIR/state.json ("complete"), computed from the portal's rows: the wall
time from the first run's stored creation time (its upload) to the last evaluation's
finished time, the number of evaluations, the wall time per evaluation, the sum of the
evaluations' own times (finished − started), the verdicts per run, the twin pairing as
the database and `GET /api/runs/<id>/` show it, and whether the campaign meets the
target (≤ 20 minutes, ≤ 23 s per evaluation). Beside it, each run's figures as the
portal computes them (`GET /api/runs/<id>/`: correct tasks, correctness rate,
Performance Score, geomean speedup with its N, the uplift). A later call on a complete
DIR prints the stored summary again. `--export FOLDER` writes each run's finished
verdicts, with the design properties the portal assessed from what ran, to
FOLDER/without.json and FOLDER/with.json, in the format of docs/baselines.json
(bench/baselines_md.py reads the naive side with `--naive`).

The wall time counts every second from the upload: the workers' start-up, and the time
between calls where a call left no worker running (`worker_segments` > 1: then the
figure is an upper bound, not a continuous measurement). `--mode interpret` is a dry
run on the CPU: its times are the Triton interpreter's, not a GPU's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gpu_run_bundle as bundles  # noqa: E402
import lease_timeline  # noqa: E402

from d2kportal.processes import Portal  # noqa: E402
from evaluator.harness.leasereport import TIMELINE  # noqa: E402

TARGET_WALL_S = 20 * 60
TARGET_PER_EVALUATION_S = 23.0
SIDES = ("without", "with")

MANIFEST = {
    "schema": 1,
    "model": "catalog kernels (benchmark check)",
    "agent": "none (written by hand)",
    "turn_budget": 350,
}
NOTES = {
    "without": "A benchmark check of the evaluation throughput, not an agent's run: the "
    "side without guidance of a paired campaign, each catalog task's naive Triton kernel "
    "(tests/catalog/negatives).",
    "with": "A benchmark check of the evaluation throughput, not an agent's run: the side "
    "with guidance (L1, L2, L3) of a paired campaign, each catalog task's expert kernel; "
    "no agent was given the guidance.",
}
LEVELS = {"without": [], "with": ["L1", "L2", "L3"]}

ROWS = """
import json
from evaluator.models import Evaluation
from runs.models import Run
ids = {ids}
stamp = lambda t: t.isoformat() if t else None
print(json.dumps({{
    "runs": [
        {{"id": r.pk, "created": stamp(r.created_at), "finished": stamp(r.finished_at),
          "state": r.state, "pair": r.pair_id, "condition": r.condition, "levels": r.levels}}
        for r in Run.objects.filter(pk__in=ids).order_by("pk")
    ],
    "evaluations": [
        {{"pk": e.pk, "run": e.submission.run_id, "task": e.submission.task.slug,
          "status": e.status, "attempts": e.attempts, "created": stamp(e.created_at),
          "started": stamp(e.started_at), "finished": stamp(e.finished_at)}}
        for e in Evaluation.objects.filter(submission__run_id__in=ids)
        .select_related("submission__task").order_by("pk")
    ],
}}))
"""

TOKEN = """
from django.contrib.auth import get_user_model
from accounts.services import token_issue
user = get_user_model().objects.get(username="lab-bot")
print(token_issue(user=user, name="campaign summary").key)
"""


def manifest(side: str, hardware: str) -> dict:
    return {**MANIFEST, "levels": LEVELS[side], "hardware": hardware, "notes": NOTES[side]}


# The naive kernel on the side without guidance, the expert on the side with it.
KERNELS = {"without": bundles.naive_path, "with": bundles.expert_path}


def campaign_upload(portal: Portal, *, tasks: list[str] | None, hardware: str) -> list[dict]:
    """Both bundles packed first, then uploaded back to back; what each upload answered,
    with the client's clock around its POST."""
    packed = {
        side: bundles.bundle_bytes(
            tasks,
            manifest=manifest(side, hardware),
            kernel=KERNELS[side],
        )
        for side in SIDES
    }
    uploads = []
    for side in SIDES:
        data, slugs = packed[side]
        posted = time.time()
        answer = bundles.upload(portal, data)
        uploads.append(
            {
                "side": side,
                "run": answer["id"],
                "url": answer["url"],
                "kernels": len(slugs),
                "bundle_bytes": len(data),
                "posted_at": posted,
                "answered_at": time.time(),
            }
        )
        print(
            f"run {answer['id']} ({side} guidance) uploaded: {len(slugs)} kernels, "
            f"{len(data)} bytes",
            flush=True,
        )
    return uploads


def api_get(portal: Portal, path: str, token: str) -> dict:
    request = urllib.request.Request(
        f"{portal.base_url}{path}", headers={"Authorization": f"Token {token}"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def settled(run: dict) -> bool:
    """The run is complete and its scores count every verdict (the portal refreshes both
    just after a verdict is committed)."""
    scores = run["scores"]
    return run["state"] == "complete" and "pending" in scores and scores["pending"] == 0


def runs_read(portal: Portal, run_ids: list[int], *, wait_s: float = 120) -> dict[int, dict]:
    """`GET /api/runs/<id>/` of each run through the portal's web server, once both have
    settled (or `wait_s` has passed: then as they are)."""
    token = portal.manage("shell", "-c", TOKEN).splitlines()[-1]
    web = portal.start_web()
    try:
        deadline = time.monotonic() + wait_s
        while True:
            found = {pk: api_get(portal, f"/api/runs/{pk}/", token) for pk in run_ids}
            if all(settled(run) for run in found.values()) or time.monotonic() > deadline:
                return found
            time.sleep(2)
    finally:
        web.terminate()
        web.wait(timeout=30)
        portal.processes.remove(web)


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def headline(run: dict) -> dict:
    """The figures the portal computes for one run, as its API answers them."""
    scores = run["scores"]
    return {
        "id": run["id"],
        "condition": run["condition"],
        "state": run["state"],
        "pair": run["pair"],
        "tasks": scores.get("tasks_total"),
        "correct": run["correct"],
        "correctness_rate": scores.get("correctness_rate"),
        "performance_score": scores.get("performance_score"),
        "geomean_speedup": scores.get("geomean_speedup"),
        "timed": scores.get("timed"),
        "untimed_reason": scores.get("untimed_reason"),
        "uplift": scores.get("uplift"),
    }


def campaign_summary(found: dict, api: dict[int, dict], state: dict) -> dict[str, Any]:
    """The campaign's figures from the portal's rows (`found`: its runs and their
    evaluations, as ROWS reads them) and its API (`api`: `GET /api/runs/<id>/` by id)."""
    ids = {side: state["runs"][side] for side in SIDES}
    runs = {r["id"]: r for r in found["runs"]}
    evaluations = found["evaluations"]
    first = min(_when(runs[pk]["created"]) for pk in ids.values())
    last = max(_when(e["finished"]) for e in evaluations)
    wall = (last - first).total_seconds()
    own = sum(
        (_when(e["finished"]) - _when(e["started"])).total_seconds()
        for e in evaluations
        if e["started"]
    )
    verdicts: dict[str, dict[str, int]] = {}
    for side, pk in ids.items():
        counts: dict[str, int] = {}
        for e in evaluations:
            if e["run"] == pk:
                counts[e["status"]] = counts.get(e["status"], 0) + 1
        verdicts[side] = dict(sorted(counts.items()))
    without, with_guidance = ids["without"], ids["with"]
    paired_rows = runs[without]["pair"] == with_guidance and runs[with_guidance]["pair"] == without
    paired_api = api[without]["pair"] == with_guidance and api[with_guidance]["pair"] == without
    per_evaluation = wall / len(evaluations)
    segments = state["segments"]
    started = [_when(e["started"]) for e in evaluations if e["started"]]
    return {
        "mode": state["mode"],
        "runs": ids,
        "paired": paired_rows and paired_api,
        "pair": {
            "rows": {side: runs[pk]["pair"] for side, pk in ids.items()},
            "api": {side: api[pk]["pair"] for side, pk in ids.items()},
        },
        "first_upload_at": first.isoformat(),
        "last_verdict_at": last.isoformat(),
        "first_start_after_upload_s": round((min(started) - first).total_seconds(), 1),
        "wall_s": round(wall, 1),
        "evaluations": len(evaluations),
        "wall_per_evaluation_s": round(per_evaluation, 2),
        "evaluations_s": round(own, 1),
        "verdicts": verdicts,
        "taken_again": sum(1 for e in evaluations if e["attempts"] > 1),
        "worker_segments": len(segments),
        "target": {"wall_s": TARGET_WALL_S, "per_evaluation_s": TARGET_PER_EVALUATION_S},
        "meets_wall": wall <= TARGET_WALL_S,
        "meets_per_evaluation": per_evaluation <= TARGET_PER_EVALUATION_S,
        "headline": {side: headline(api[pk]) for side, pk in ids.items()},
    }


def _figure(value: Any, form: str) -> str:
    return "-" if value is None else format(value, form)


def summary_print(complete: dict) -> None:
    c = complete
    ids = c["runs"]
    rows, api = c["pair"]["rows"], c["pair"]["api"]
    pairs = "; ".join(
        f"run {ids[side]}'s twin: {rows[side]} in its row, {api[side]} in the API" for side in SIDES
    )
    print(
        f"\ncampaign ({c['mode']} mode): run {ids['without']} without guidance (naive "
        f"kernels), run {ids['with']} with guidance L1, L2, L3 (experts); twins in the "
        f"portal: {'yes' if c['paired'] else 'NO'} ({pairs})"
    )
    print(
        f"{c['evaluations']} evaluations, first upload {c['first_upload_at']}, last verdict "
        f"{c['last_verdict_at']}: wall {c['wall_s']:.1f} s ({c['wall_s'] / 60:.1f} min), "
        f"{c['wall_per_evaluation_s']:.2f} s per evaluation; the evaluations' own times sum "
        f"to {c['evaluations_s']:.1f} s; the first started {c['first_start_after_upload_s']:.1f}"
        f" s after the upload; taken again: {c['taken_again']}"
    )
    for why in (c.get("workers") or {}).get("taken_again_why", []):
        print(f"  taken again: {why}")
    for side in SIDES:
        print(f"verdicts of run {ids[side]} ({side} guidance): {c['verdicts'][side]}")
    met = c["meets_wall"] and c["meets_per_evaluation"]
    print(
        f"target ≤ {c['target']['wall_s'] / 60:.0f} min and ≤ "
        f"{c['target']['per_evaluation_s']:.0f} s per evaluation: {'met' if met else 'NOT met'}"
        f" (wall {'≤' if c['meets_wall'] else '>'} {c['target']['wall_s']} s, per evaluation "
        f"{'≤' if c['meets_per_evaluation'] else '>'} {c['target']['per_evaluation_s']} s)"
    )
    if c["worker_segments"] > 1:
        print(
            f"not one continuous measurement: workers were started {c['worker_segments']} "
            "times, the wall time holds the gaps between calls (an upper bound)"
        )
    if c["mode"] != "cuda":
        print("interpret mode: the Triton interpreter's times on the CPU, not a GPU figure")
    for side in SIDES:
        h = c["headline"][side]
        geomean = h["geomean_speedup"] or {}
        rate = h["correctness_rate"]
        print(
            f"run {h['id']} as the portal scores it ({h['condition']}): correct "
            f"{h['correct']}/{h['tasks']}, correctness "
            f"{_figure(rate * 100 if rate is not None else None, '.1f')} %, Performance "
            f"Score {_figure(h['performance_score'], '.2f')}, geomean speedup "
            f"{_figure(geomean.get('value'), '.2f')} (N {geomean.get('n', '-')})"
            + ("" if h["timed"] else f"; {h['untimed_reason'] or 'not timed'}")
        )
    for gpu, figures in (c.get("timeline") or {}).items():
        print(f"{gpu}: {lease_timeline.report_text(figures)}")
    uplift = c["headline"]["with"]["uplift"]
    if uplift:
        print(
            f"uplift (with − without): correctness {_figure(uplift['correctness_rate'], '+.3f')},"
            f" Performance Score {_figure(uplift['performance_score'], '+.2f')}, geomean "
            f"speedup {_figure(uplift['geomean_speedup'], '+.2f')}"
        )


# The lease folder of a worker's GPU, and the GPU's UUID, as the worker finds them.
LEASE_FOLDER = """
import json
from evaluator.services.pools import gpu_detect, gpu_lease_folder
gpu = gpu_detect({gpu})
print(json.dumps([str(gpu_lease_folder(gpu)), gpu.uuid]))
"""


def timeline_running(portal: Portal, state: dict, args: Any) -> None:
    """In cuda mode, each GPU's lease folder keeps its timeline and a sampler records the
    GPU's utilisation beside the workers (bench/lease_timeline.py); a sampler a lost
    machine took with it is started again, appending."""
    if args.mode != "cuda":
        return
    directory = portal.directory
    samplers, folders = state.setdefault("samplers", {}), state.setdefault("timelines", {})
    for gpu in args.gpus.split(","):
        shown = portal.manage("shell", "-c", LEASE_FOLDER.format(gpu=int(gpu)))
        folder, uuid = json.loads(shown.splitlines()[-1])
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / TIMELINE).touch()
        folders[gpu] = folder
        pid = samplers.get(gpu)
        if pid and bundles.worker_alive(pid, directory, b"lease_timeline.py"):
            continue
        with open(directory / f"sampler-{gpu}.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, str(ROOT / "bench" / "lease_timeline.py"), "sample",
                 str(directory / f"gpu-samples-{gpu}.csv")],
                # The portal's environment names DIR, as its workers' does.
                env={**portal.env, "CUDA_VISIBLE_DEVICES": uuid},
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        samplers[gpu] = proc.pid


def timeline_stop(state: dict) -> None:
    for pid in state.get("samplers", {}).values():
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def timeline_summary(directory: Path, state: dict, complete: dict) -> dict[str, Any]:
    """Each GPU's lease timeline over the campaign's span (lease_timeline.summarise)."""
    start = datetime.fromisoformat(complete["first_upload_at"]).timestamp()
    end = datetime.fromisoformat(complete["last_verdict_at"]).timestamp()
    found = {}
    for gpu, folder in state.get("timelines", {}).items():
        log, samples = Path(folder) / TIMELINE, directory / f"gpu-samples-{gpu}.csv"
        if log.exists() and samples.exists():
            found[Path(folder).name] = lease_timeline.summarise(
                lease_timeline.held_intervals(log.read_text().splitlines()),
                lease_timeline.read_samples(samples.read_text().splitlines()),
                start,
                end,
            )
    return found


def export(portal: Portal, runs: dict[str, int], folder: Path) -> None:
    """Each run's finished verdicts as {task: verdict} (bench/gpu_run_bundle.py's export,
    the format of docs/baselines.json), to FOLDER/<side>.json."""
    folder.mkdir(parents=True, exist_ok=True)
    for side, run in runs.items():
        path = folder / f"{side}.json"
        path.write_text(json.dumps(bundles.exported(portal, run), indent=1))
        print(f"wrote {path}")


def main() -> None:
    parser = bundles.arguments(__doc__.splitlines()[0], counters="needed")
    parser.add_argument(
        "--export",
        type=Path,
        help="write each run's finished verdicts to FOLDER/without.json and FOLDER/with.json",
    )
    args = parser.parse_args()
    started = time.monotonic()
    directory: Path = args.dir.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    state_path = directory / "state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    if args.export:
        if not state.get("runs"):
            raise SystemExit(f"{directory} holds no campaign to export")
        export(bundles.portal_for(directory, args), state["runs"], args.export)
        return
    if state.get("complete"):
        summary_print(state["complete"])
        return
    portal = bundles.portal_for(directory, args)

    def save() -> None:
        state_path.write_text(json.dumps(state, indent=1))

    keep = False
    workers: list[int] = []
    try:
        if not state.get("runs"):
            portal.setup()
            portal.start_web()
            tasks = args.tasks.split(",") if args.tasks else None
            uploads = campaign_upload(portal, tasks=tasks, hardware=args.hardware)
            state = {
                "runs": {u["side"]: u["run"] for u in uploads},
                "mode": args.mode,
                "uploads": uploads,
                "segments": [],
                "workers": [],
            }
            save()
            portal.close()
            portal.processes.clear()
        workers = bundles.workers_running(portal, state, args, save)
        timeline_running(portal, state, args)
        save()
        for pk in state["runs"].values():
            bundles.run_validated(portal, pk, deadline=started + args.deadline_s)
        until = bundles.watch_until(started, args)
        rows = bundles.evaluations_watch(portal, state, workers, until=until, save=save)
        finished = [r for r in rows if r["finished"]]
        print(f"\n{len(finished)} of {len(rows)} evaluations finished", flush=True)
        if len(finished) == len(rows):
            ids = list(state["runs"].values())
            found = json.loads(portal.manage("shell", "-c", ROWS.format(ids=ids)).splitlines()[-1])
            complete = campaign_summary(found, runs_read(portal, ids), state)
            complete["workers"] = bundles.summary(rows, state)
            timeline_stop(state)
            complete["timeline"] = timeline_summary(directory, state, complete)
            state["complete"] = complete
            save()
            summary_print(complete)
        else:
            keep = args.keep_workers
    finally:
        if not keep:
            timeline_stop(state)
        # The snapshot first: a call cut short while its workers stop still leaves it.
        if args.snapshot:
            bundles.snapshot(directory, args.snapshot)
        bundles.workers_release(portal, state, keep=keep, workers=workers)


if __name__ == "__main__":
    main()

"""Turn the experts' GPU verdicts (docs/baselines.json) into docs/baselines.md.

    python bench/baselines_md.py docs/baselines.json [--out docs/baselines.md]
        [--command "python bench/gpu_check.py experts --out gpu-results"]

The JSON is what `bench/gpu_check.py experts` writes ({task_slug: verdict}).
Only public timed workloads are written out (hidden workloads are never
published); a verdict that is not a cuda-mode run naming its GPU is listed
without numbers. A verdict's `properties` (its design properties as the portal
assessed them) are scored with the portal's own formula. No Django or torch
import: this runs anywhere.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

# The repository root: the harness's spec module is standard library only.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.harness.verdict import environment_gpu, reference_host_bound_calls
from leaderboard.catalog_bar import (
    BarWorkload,
    catalog_bar,
    ceilings_from_environment,
    compute_bound,
)
from scoring.formulas import (
    BUCKETS,
    PropertyRow,
    counts_for_scoring,
    geomean,
    implementation_score,
)
from task_catalog.baseline_note import baseline_note as docstring_note
from taskformat.package import load_task, measured_content, measured_content_hash
from taskformat.properties import properties_assess

DEFAULT_COMMAND = "python bench/gpu_check.py experts --out gpu-results"
CATALOG_DIR = Path(__file__).resolve().parent.parent / "catalog"
ENV_FIELDS = (
    ("GPU", "gpu"),
    ("Driver", "driver"),
    ("CUDA", "cuda"),
    ("torch", "torch"),
    ("Triton", "triton"),
    ("Evaluator", "evaluator_version"),
    ("Bandwidth ceiling", "ceiling_tbps"),
    ("bf16 ceiling", "ceiling_tflops"),
    ("fp8 ceiling", "ceiling_tflops_fp8"),
)


def gpu_name(verdict: dict[str, Any]) -> str:
    """The GPU of a cuda-mode verdict, or '' (interpret-mode numbers are not GPU numbers)."""
    return environment_gpu(verdict.get("environment")) if verdict.get("mode") == "cuda" else ""


def public_timed(verdict: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        w
        for w in verdict.get("workloads") or []
        if isinstance(w, dict) and w.get("role") == "timed" and not w.get("hidden")
    ]


def _num(value: Any, digits: int, scale: float = 1.0, suffix: str = "") -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "—"
    return f"{value * scale:,.{digits}f}{suffix}"


def environment_of(verdict: dict[str, Any]) -> dict[str, str]:
    env = verdict.get("environment") or {}
    values = {key: str(env.get(key) or "") for _, key in ENV_FIELDS}
    values["gpu"] = gpu_name(verdict)
    values["evaluator_version"] = str(
        verdict.get("evaluator_version") or env.get("evaluator_version") or ""
    )
    ceilings = env.get("ceilings") if isinstance(env.get("ceilings"), dict) else {}
    values["ceiling_tbps"] = _num(ceilings.get("peak_tbps"), 2, suffix=" TB/s").replace("—", "")
    for key, unit in (("ceiling_tflops", "bf16"), ("ceiling_tflops_fp8", "fp8")):
        rate = ceilings.get(f"peak_tflops_{unit}")
        values[key] = _num(rate, 0, suffix=" TFLOP/s").replace("—", "")
    return values


def _geomean_of(values: list[Any]) -> float | None:
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return geomean(numbers) if len(numbers) == len(values) else None


def timed_against(verdict: dict[str, Any]) -> str:
    """The file the expert was timed against (`bench/gpu_check.py experts` records it)."""
    name = verdict.get("timed_against")
    return f"`{name}`" if isinstance(name, str) and name else "—"


def task_geomeans(verdict: dict[str, Any]) -> tuple[float | None, float | None, int]:
    """Geomean speedup and SOL fraction over the public timed workloads, and their count."""
    rows = public_timed(verdict)
    return (
        _geomean_of([w.get("speedup") for w in rows]),
        _geomean_of([w.get("sol_fraction") for w in rows]),
        len(rows),
    )


def bar_sentence(verdict: dict[str, Any]) -> str:
    """Whether the expert meets the catalog's bar, in the task page's words."""
    name = verdict.get("timed_against")
    return catalog_bar(
        status=str(verdict.get("status") or "?"),
        workloads=[BarWorkload.from_mapping(w) for w in public_timed(verdict)],
        ceilings=ceilings_from_environment(verdict.get("environment")),
        timed_against=name if isinstance(name, str) else "",
    ).sentence


def stale_tasks(measured: dict[str, Any]) -> list[str]:
    """The tasks whose verdict measured other content than their task package on disk now.

    `import_baselines` skips them (the portal shows no GPU figure for the
    current version until its expert is measured again); this page names them.
    """
    stale = []
    for slug, verdict in measured.items():
        folder = CATALOG_DIR / slug
        if not (folder / "task.toml").is_file():
            continue
        current = measured_content_hash(measured_content(load_task(folder)))
        if verdict.get("task_hash") and verdict.get("task_hash") != current:
            stale.append(slug)
    return stale


def catalog_slugs() -> list[str]:
    """Every task of the catalog on disk."""
    return sorted(p.parent.name for p in CATALOG_DIR.glob("*/task.toml"))


def baseline_note(slug: str) -> str:
    """What the task's baseline.py runs and why (its docstring), or '' without one."""
    path = CATALOG_DIR / slug / "baseline.py"
    return docstring_note(path.read_text(encoding="utf-8")) if path.is_file() else ""


def baseline_lines(slug: str, verdict: dict[str, Any]) -> list[str]:
    """What the task's speedups are measured against, from the catalog's baseline.py."""
    note = baseline_note(slug)
    if not note:
        return ["Baseline: none; speedups are measured against `reference.py`.", ""]
    lines = [f"Baseline (`catalog/{slug}/baseline.py`): {note}", ""]
    if verdict.get("timed_against") not in (None, "baseline.py"):
        lines += [
            f"The times below were measured against `{verdict.get('timed_against')}`, "
            "before this baseline; they change when the expert is re-measured.",
            "",
        ]
    return lines


def memory_bound(verdict: dict[str, Any]) -> bool:
    """No public timed workload is bound by its FLOPs: the catalog bar's memory-bound task."""
    workloads = [BarWorkload.from_mapping(w) for w in public_timed(verdict)]
    ceilings = ceilings_from_environment(verdict.get("environment"))
    return bool(workloads) and compute_bound(workloads, ceilings) is False


def traffic_section(measured: dict[str, Any]) -> list[str]:
    """The memory-bound experts' DRAM traffic against each workload's minimum bytes."""
    out = [
        "",
        "## DRAM traffic of the memory-bound experts",
        "",
        "Tasks none of whose timed workloads is bound by its FLOPs at the measured ceilings "
        "(the memory-bound tasks of the catalog's bar). Minimum: the workload's `bytes` formula "
        "(each input read and each output written once). Read: DRAM bytes read during the "
        "call's kernels. Written: the larger of the DRAM bytes written and the bytes the SMs "
        "wrote into the L2 (ncu flushes the caches before each kernel, not after, so writes "
        "still in the L2 at a kernel's end reach DRAM later). Traffic = read + written.",
        "",
        "| Task | Workload | Minimum MB | Read MB | Written MB | Traffic × minimum |",
        "|---|---|---:|---:|---:|---:|",
    ]
    rows = 0
    for slug, verdict in measured.items():
        if not memory_bound(verdict):
            continue
        for w in public_timed(verdict):
            c = w.get("counters") if isinstance(w.get("counters"), dict) else None
            if c is None:
                out.append(f"| `{slug}` | `{w.get('name')}` | — | — | — | — |")
                continue
            written = max(c.get("dram_write_bytes") or 0, c.get("l2_write_bytes") or 0)
            out.append(
                f"| `{slug}` | `{w.get('name')}` | {_num(c.get('min_bytes'), 1, 1e-6)} | "
                f"{_num(c.get('dram_read_bytes'), 1, 1e-6)} | {_num(written, 1, 1e-6)} | "
                f"{_num(c.get('traffic_ratio'), 2, suffix='×')} |"
            )
            rows += 1
    if not rows:
        out.append("| — | no counters read | | | | |")
    return out


def property_rows(slug: str) -> list[PropertyRow]:
    """The task's design properties on disk (key, level, weight, dependencies), as the
    portal's scores read them from the catalog it loaded."""
    folder = CATALOG_DIR / slug
    if not (folder / "task.toml").is_file():
        return []
    return [
        PropertyRow(
            key=p.key, level=str(p.level.value), weight=p.weight, depends_on=tuple(p.depends_on)
        )
        for p in load_task(folder).properties
    ]


def property_values(verdict: dict[str, Any]) -> dict[str, bool | None] | None:
    """Key → implemented (None: not assessed) from the verdict's `properties`; None when
    the verdict carries none."""
    found = verdict.get("properties")
    if not isinstance(found, list):
        return None
    return {
        str(p["key"]): p.get("implemented")
        for p in found
        if isinstance(p, dict) and isinstance(p.get("key"), str)
    }


NAIVE_DIR = CATALOG_DIR.parent / "tests" / "catalog" / "negatives"


def naive_score(slug: str) -> str:
    """The task's naive kernel's combined implementation score from its source alone, as
    interpret mode judges it (no counters, no profiler: provisional), or "—"."""
    path = NAIVE_DIR / f"{slug}.py"
    if not path.is_file() or not (CATALOG_DIR / slug / "task.toml").is_file():
        return "—"
    found = properties_assess(load_task(CATALOG_DIR / slug).properties, path.read_text())
    values = {f.key: f.implemented for f in found}
    return _num(implementation_score(tasks=[(property_rows(slug), values)])["combined"], 0)


def credited_properties(
    slug: str, verdict: dict[str, Any]
) -> tuple[list[PropertyRow], dict[str, bool | None], dict[str, bool | None]] | None:
    """The task's property rows, the verdict's assessments and what of them earns credit:
    only a kernel that counts earns any, as on the portal (scoring.services.scores); an
    incorrect one's properties score as a missing kernel's. None without assessments."""
    values = property_values(verdict)
    rows = property_rows(slug)
    if values is None or not rows:
        return None
    status = str(verdict.get("status") or "?")
    return rows, values, values if counts_for_scoring(status=status) else {}


def naive_changed(slug: str, verdict: dict[str, Any]) -> bool:
    """Whether the naive kernel on disk is not the one the verdict judged (the verdict
    names its kernel by `source_sha256`)."""
    path = NAIVE_DIR / f"{slug}.py"
    judged = verdict.get("source_sha256")
    return bool(judged) and (
        not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != judged
    )


def naive_credit(
    slug: str, verdict: Any
) -> tuple[list[PropertyRow], dict[str, bool | None]] | None:
    """The property rows and credited assessments of a naive kernel's GPU verdict, or None
    where there is none of the kernel as it is on disk."""
    if not isinstance(verdict, dict) or not gpu_name(verdict) or naive_changed(slug, verdict):
        return None
    found = credited_properties(slug, verdict)
    return (found[0], found[2]) if found is not None else None


def naive_cell(slug: str, naive: dict[str, Any] | None) -> str:
    """The naive kernel's combined score: as the portal scored its GPU verdict (its status
    beside it when it is not `correct`), else, where there is none or the kernel changed
    since, from its source alone."""
    verdict = (naive or {}).get(slug)
    credit = naive_credit(slug, verdict)
    if credit is None:
        return naive_score(slug) + (" (source)" if naive is not None else "")
    score = _num(implementation_score(tasks=[credit])["combined"], 0)
    status = str(verdict.get("status"))  # type: ignore[union-attr]
    return score if status == "correct" else f"{score} ({status})"


def naive_pooled(naive: dict[str, Any]) -> str:
    """The naive kernels' GPU verdicts of the kernels as they are now, pooled, combined
    score, or "" without any."""
    pooled = [c for slug, v in naive.items() if (c := naive_credit(slug, v)) is not None]
    return _num(implementation_score(tasks=pooled)["combined"], 0) if pooled else ""


def implementation_section(
    measured: dict[str, Any], naive: dict[str, Any] | None = None
) -> list[str]:
    """Each expert's implementation score, by the portal's own formula, and the naive
    kernel's beside it."""
    if naive is None:
        beside = (
            "Beside it, the task's naive kernel (`tests/catalog/negatives/`) scored from its "
            "source alone, as interpret mode judges it: provisional, not yet measured on a GPU."
        )
        column = "Naive kernel (source)"
    else:
        gpus = sorted({gpu_name(v) for v in naive.values() if isinstance(v, dict) and gpu_name(v)})
        versions = sorted(
            {str(v.get("evaluator_version")) for v in naive.values() if isinstance(v, dict)}
        )
        beside = (
            "Beside it, the naive kernel (`tests/catalog/negatives/`) as the portal scored "
            f"it on the GPU ({', '.join(gpus) or 'none'}, evaluator {', '.join(versions)}): "
            "one that is not `correct` earns nothing (its verdict in brackets); `source`: no "
            "GPU verdict of the kernel as it is now, scored from its source alone (provisional)."
        )
        column = "Naive kernel"
    out = [
        "",
        "## Implementation score on the H200",
        "",
        "The design properties each expert implements, as the portal assessed them from "
        "what ran (the verdict's `properties`: detectors on the launched kernels' source, "
        "counter rules on the ncu counters), scored by the portal's "
        "`scoring.formulas.implementation_score`: 100 × credited weight / total weight. A "
        "property earns its weight when it and all it depends on are implemented; an "
        "incorrect kernel earns none. " + beside,
        "",
        f"| Task | L1 | L2 | L3 | Combined | Not implemented | {column} |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    pooled = []
    without = []
    for slug, verdict in measured.items():
        found = credited_properties(slug, verdict)
        if found is None:
            without.append(slug)
            continue
        rows, values, credited = found
        status = str(verdict.get("status") or "?")
        pooled.append((rows, credited))
        score = implementation_score(tasks=[(rows, credited)])
        missing = [
            f"`{r.key}`" + ("" if values.get(r.key) is False else " (not assessed)")
            for r in rows
            if values.get(r.key) is not True
        ]
        if credited is not values:
            missing.insert(0, f"all ({status}: no credit)")
        cells = " | ".join(_num(score[b], 0) for b in BUCKETS)
        naive_text = naive_cell(slug, naive)
        out.append(f"| `{slug}` | {cells} | {', '.join(missing) or '—'} | {naive_text} |")
    if pooled:
        total = implementation_score(tasks=pooled)
        cells = " | ".join(_num(total[b], 0) for b in BUCKETS)
        beside_total = naive_pooled(naive or {})
        tail = f" {beside_total} |" if beside_total else " |"
        out.append(f"| {len(pooled)} tasks, pooled | {cells} | |{tail}")
    else:
        out.append("| — | | | | | no verdict carries its properties | |")
    if without:
        out += [
            "",
            "Verdicts here without property assessments: "
            + ", ".join(f"`{slug}`" for slug in without)
            + ".",
        ]
    return out


def render(
    data: dict[str, Any],
    *,
    source: str,
    command: str = DEFAULT_COMMAND,
    naive: dict[str, Any] | None = None,
    naive_source: str = "",
) -> str:
    """The markdown page for `data` ({task_slug: verdict}), with the naive kernels' GPU
    verdicts `naive` (read from `naive_source`) beside the experts' implementation scores."""
    measured = {slug: v for slug, v in data.items() if isinstance(v, dict) and gpu_name(v)}
    unmeasured = {slug: v for slug, v in data.items() if slug not in measured}
    out = [
        "# Expert baselines",
        "",
        "GPU times of each task's expert implementation (`catalog/<task>/expert.py`) against",
        "its PyTorch baseline: the task's `baseline.py` where it has one (the eager PyTorch a",
        "practitioner runs, in the workload's dtype), else its `reference.py`. Measured by the",
        "real evaluator (L2 flushed before each call, median over the timed calls, baseline",
        "and expert interleaved in one process).",
        "Speedup = baseline time / expert time. SOL = the workload's speed-of-light time",
        "(its FLOPs at the matrix ceiling of the unit that does its work, bf16 unless the",
        "task declares fp8, or its minimum bytes at the bandwidth ceiling, whichever is",
        "longer) over the expert's time. The ceilings are measured on the same GPU (best of",
        "short runs: bf16 and fp8 matrix products; the better of a copy and a read-only",
        "sum) and sit below the datasheet's, so a kernel can pass 100 % honestly (cuBLAS-",
        "class GEMMs, read-mostly kernels). Task speedup is the geometric mean over the",
        "task's public timed workloads. DRAM traffic × minimum and the tensor-core share",
        "come from an untimed pass under Nsight Compute (`—` where counters were not read):",
        "the bytes the call's kernels moved to and from DRAM over the workload's minimum",
        "bytes, and tensor-core instructions over all instructions.",
        "Catalog bar: each expert beats its baseline on the geomean of its workloads, or",
        "reaches 90% of the library's speed on a compute-bound task (a timed workload bound",
        "by FLOPs) or 80% of the speed of light on the largest workload (the longest",
        "speed-of-light time) of a memory-bound task; the column says which, and what it reaches.",
        "",
        f"- Produced by: `{command}` (file `{source}`)",
        f"- Shown on the portal by: `python manage.py import_baselines {source}`",
        *(
            [
                "- The naive kernels' verdicts: `python bench/gpu_campaign.py DIR --export "
                f"FOLDER`, the run without guidance (file `{naive_source}`)"
            ]
            if naive_source
            else []
        ),
        "- This page: `python bench/baselines_md.py "
        + source
        + (f" --naive {naive_source}" if naive_source else "")
        + " --out docs/baselines.md`",
        "",
        "## Environment",
        "",
    ]
    environments: dict[tuple[str, ...], list[str]] = {}
    for slug, verdict in measured.items():
        env = environment_of(verdict)
        environments.setdefault(tuple(env[key] for _, key in ENV_FIELDS), []).append(slug)
    if not environments:
        out.append("No GPU verdict in this file.")
    for values, slugs in environments.items():
        if len(environments) > 1:
            out += [f"Tasks: {', '.join(f'`{s}`' for s in slugs)}", ""]
        out += ["| " + " | ".join(label for label, _ in ENV_FIELDS) + " |"]
        out += ["|" + "---|" * len(ENV_FIELDS)]
        out += ["| " + " | ".join(v or "—" for v in values) + " |", ""]
    stale = stale_tasks(measured)
    if stale:
        out += [
            "## Measured under earlier task versions",
            "",
            f"{len(stale)} of the {len(measured)} tasks below were measured under an earlier "
            "version of their task package (another reference, baseline, workloads or "
            "tolerances): their figures are what that version measured, not what the catalog "
            "measures now, and the portal shows no GPU figure for the current version until "
            "its expert is measured again: " + ", ".join(f"`{slug}`" for slug in stale) + ".",
            "",
        ]
    out += [
        "## Summary",
        "",
        "| Task | Status | Timed against | Timed workloads | Geomean speedup | Geomean SOL "
        "| Catalog bar |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    all_speedups = []
    total = 0
    for slug, verdict in measured.items():
        speedup, sol, count = task_geomeans(verdict)
        total += count
        if speedup is not None and verdict.get("status") == "correct":
            all_speedups.append(speedup)
        status = str(verdict.get("status", "?")) + (" (earlier version)" if slug in stale else "")
        out.append(
            f"| `{slug}` | {status} | {timed_against(verdict)} | {count} | "
            f"{_num(speedup, 2, suffix='×')} | {_num(sol, 1, 100, '%')} | "
            f"{bar_sentence(verdict)} |"
        )
    out += ["", f"Timed workloads: {total} over {len(measured)} tasks."]
    overall = geomean(all_speedups)
    if overall is not None:
        out += [f"Geometric mean over the {len(all_speedups)} correct tasks: {overall:.2f}×."]
    host_bound = [
        slug
        for slug, verdict in measured.items()
        if any(reference_host_bound_calls(w.get("timing")) for w in public_timed(verdict))
    ]
    if host_bound:
        out += [
            "Baselines bound by their host (marked † below): "
            + ", ".join(f"`{slug}`" for slug in host_bound)
            + ". Most of their timed calls outlasted their launch cover (a loop of launches, "
            "a copy to the host), so their times, and these speedups, depend on the host's "
            "CPU as well as the GPU."
        ]
    out += traffic_section(measured)
    out += implementation_section(measured, naive)
    for slug, verdict in measured.items():
        speedup, sol, _ = task_geomeans(verdict)
        out += ["", f"## `{slug}`", ""]
        out += baseline_lines(slug, verdict)
        if verdict.get("status") != "correct":
            out += [f"Verdict: **{verdict.get('status')}**: {verdict.get('message', '')}", ""]
        out += [
            "| Workload | Baseline µs | Expert µs | Speedup | SOL % | TFLOP/s | TB/s "
            "| DRAM traffic × minimum | Tensor-core share |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        bound_rows = []
        for w in public_timed(verdict):
            counted = w.get("counters") if isinstance(w.get("counters"), dict) else {}
            bound = reference_host_bound_calls(w.get("timing"))
            mark = " †" if bound else ""
            if bound:
                bound_rows.append(f"`{w.get('name')}` {bound[0]} of {bound[1]}")
            out.append(
                f"| `{w.get('name')}` | {_num(w.get('ref_median_ms'), 1, 1e3)}{mark} | "
                f"{_num(w.get('median_ms'), 1, 1e3)} | {_num(w.get('speedup'), 2, suffix='×')} | "
                f"{_num(w.get('sol_fraction'), 1, 100)} | {_num(w.get('achieved_tflops'), 2)} | "
                f"{_num(w.get('achieved_tbps'), 2)} | "
                f"{_num(counted.get('traffic_ratio'), 2, suffix='×')} | "
                f"{_num(counted.get('tensor_share'), 1, 100, '%')} |"
            )
        out += ["", f"Task geomean speedup: {_num(speedup, 2, suffix='×')}"]
        if speedup is not None and speedup < 1:
            out[-1] += (
                f" (slower than the baseline's library call: the expert reaches "
                f"{speedup:.0%} of its speed and {_num(sol, 0, 100, '%')} of the device's "
                "speed of light)"
            )
        out[-1] += "."
        if bound_rows:
            out += [
                "",
                "† Host-bound baseline: timed calls that outlasted their launch cover, "
                + "; ".join(bound_rows)
                + ". The baseline's time is its host's as much as its GPU's.",
            ]
    absent = sorted(set(catalog_slugs()) - set(data))
    if absent:
        out += ["", "## Not in this file", ""]
        out += [
            "Catalog tasks with no GPU verdict here yet: "
            + ", ".join(f"`{slug}`" for slug in absent)
            + "."
        ]
    if unmeasured:
        out += ["", "## Not measured on a GPU", ""]
        for slug, verdict in unmeasured.items():
            v = verdict if isinstance(verdict, dict) else {}
            message = str(v.get("message") or "").splitlines()[:1] or [""]
            out.append(
                f"- `{slug}`: {v.get('status', 'no verdict')} "
                f"(mode {v.get('mode') or '—'}) {message[0][:200]}".rstrip()
            )
    return "\n".join(out) + "\n"


def read_verdicts(parser: argparse.ArgumentParser, path: Path) -> dict[str, Any]:
    """{task slug: verdict} from a .json or .json.gz file; exits 2 with a sentence if not."""
    try:
        raw = path.read_bytes()
        data = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    except (OSError, ValueError, EOFError) as exc:
        parser.exit(2, f"cannot read {path} as JSON: {exc}\n")
    if not isinstance(data, dict):
        parser.exit(2, f"{path} is not a JSON object of task slug -> verdict\n")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path, help="e.g. docs/baselines.json")
    parser.add_argument("--out", type=Path, help="default: print to stdout")
    parser.add_argument("--command", default=DEFAULT_COMMAND, help="the command that made it")
    parser.add_argument(
        "--naive",
        type=Path,
        help="the naive kernels' GPU verdicts, {task: verdict} (.json or .json.gz): "
        "bench/gpu_campaign.py --export's without.json",
    )
    args = parser.parse_args(argv)
    data = read_verdicts(parser, args.json)
    naive = read_verdicts(parser, args.naive) if args.naive else None
    text = render(
        data,
        source=str(args.json),
        command=args.command,
        naive=naive,
        naive_source=str(args.naive or ""),
    )
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

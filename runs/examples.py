"""The example campaign: two bundles built from tests/data/example_runs/.

Example data written by hand, not an agent's output. The kernels, proposals and
manifests are files to read; the traces are generated here, deterministically
from a seed, so that each has hundreds of events without thousands of committed
lines. A task without a kernel gets a trace that runs out of turns.
"""

from __future__ import annotations

import io
import json
import random
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_DIR = REPO_ROOT / "tests" / "data" / "example_runs"
EXAMPLE_RUNS = ("without_guidance", "with_guidance")
SEED = 15
START_TS = 1_780_000_000.0  # 2026-05-28, a fixed clock for reproducible traces

_THOUGHTS = (
    "Let me re-read the reference to pin down the exact output dtype and shape.",
    "The failing workload's column count is not a multiple of the block: mask the tail.",
    "Accumulating in fp32 and casting once at the store should bring the error down.",
    "This is memory-bound: fewer passes over HBM matter more than instruction count.",
    "I will try a larger block and fewer warps for the small workload.",
    "Compiles now. Running the tests on every workload before timing.",
    "The speedup on the largest shape is lower than on the others; checking occupancy.",
    "Restructuring the loop so that each program handles one row end to end.",
    "That change broke correctness on the hidden-like odd shape; reverting it.",
    "Profiling the kernel to see whether loads are coalesced.",
)
_TOOLS = (
    ("read_file", lambda r: {"path": r.choice(["reference.py", "statement.md", "kernel.py"])}),
    (
        "edit_file",
        lambda r: {"path": "kernel.py", "lines": f"{r.randint(1, 80)}-{r.randint(81, 160)}"},
    ),
    ("compile", lambda r: {"path": "kernel.py"}),
    ("run_tests", lambda r: {"workloads": "all", "seed": r.randint(0, 9)}),
    ("benchmark", lambda r: {"workload": r.choice(["small", "medium", "large"])}),
    ("profile", lambda r: {"metric": r.choice(["dram_throughput", "achieved_occupancy"])}),
)


def _output(name: str, ok: bool, rnd: random.Random) -> str:
    if name == "compile":
        return "compiled in 1.8 s" if ok else "CompilationError: at 23:12: incompatible shapes"
    if name == "run_tests":
        if ok:
            return f"all workloads correct (max abs err {rnd.uniform(1e-6, 4e-3):.2e})"
        return f"FAILED check_odd_tail: max abs err {rnd.uniform(0.05, 3):.3f} over tolerance"
    if name == "benchmark":
        return f"median {rnd.uniform(0.05, 4):.3f} ms, reference {rnd.uniform(0.1, 6):.3f} ms"
    if name == "profile":
        if not ok:
            return "error: the profiler timed out"
        return f"dram throughput {rnd.randint(35, 92)} % of peak"
    return "ok" if ok else "error: file not found"


def _variant(source: str, attempt: int) -> str:
    """An earlier draft of `source` (attempt 1 is the earliest): a smaller launch
    setting, and a note at the top."""
    shrink = 2 ** (3 - attempt)
    changed = re.sub(
        r"num_warps=(\d+)",
        lambda m: f"num_warps={max(1, int(m[1]) // shrink)}",
        source,
        count=1,
    )
    if changed == source:
        changed = re.sub(
            r"BLOCK\w*\s*=\s*(\d+)",
            lambda m: m[0].replace(m[1], str(int(m[1]) // shrink or 1)),
            source,
            count=1,
        )
    return f"# draft {attempt}: before the last round of tuning\n{changed}"


def example_trace(
    *, task: str, condition: str, final: str | None, first_draft: str | None, seed: int
) -> list[dict[str, Any]]:
    """A plausible episode: turns of thought, tool calls and results, drafts submitted
    on the way, the final kernel, then the end (out of turns when `final` is None)."""
    rnd = random.Random(f"{seed}:{task}:{condition}")
    clock = START_TS + rnd.randint(0, 3600)
    events: list[dict[str, Any]] = []

    def emit(turn: int, **event: Any) -> None:
        nonlocal clock
        clock += rnd.uniform(0.5, 12.0)
        events.append({"type": event.pop("type"), "ts": round(clock, 3), "turn": turn, **event})

    emit(0, type="start", task=task, condition=condition)
    emit(
        0,
        type="message",
        role="system",
        content="You write fast, correct Triton kernels.",
        tokens_in=900,
    )
    guidance = "" if condition == "none" else f" Guidance levels given: {condition}."
    emit(
        0,
        type="message",
        role="user",
        content=f"Task {task}: implement ModelNew.{guidance}",
        tokens_in=2400,
    )
    turns = 350 if final is None else rnd.randint(70, 130)
    drafts = [] if final is None else [_variant(final, 1), _variant(final, 2)]
    if first_draft:
        drafts.insert(0, first_draft)
    submit_at = {int(turns * f): d for f, d in zip((0.3, 0.5, 0.65), drafts, strict=False)}
    final_at = int(turns * 0.8)
    for turn in range(1, turns + 1):
        emit(
            turn,
            type="message",
            role="assistant",
            content=rnd.choice(_THOUGHTS),
            tokens_in=rnd.randint(4000, 30000),
            tokens_out=rnd.randint(80, 1400),
        )
        if final is None and turn % 97 == 0:
            emit(turn, type="note", text="context window compacted")  # an unknown event type
        name, arguments = rnd.choice(_TOOLS)
        ok = rnd.random() > (0.35 if final is None else 0.2)
        emit(turn, type="tool_call", name=name, arguments=arguments(rnd))
        emit(
            turn,
            type="tool_result",
            name=name,
            ok=ok,
            output=_output(name, ok, rnd),
            wall_time_s=round(rnd.uniform(0.2, 25.0), 2),
        )
        if turn in submit_at:
            emit(turn, type="submit", source=submit_at[turn])
        if final is not None and turn == final_at:
            emit(turn, type="submit", source=final)
        if final is not None and turn == turns:
            break
    reason = "submitted" if final is not None else "turn_budget_exhausted"
    emit(turns, type="end", reason=reason, turns_used=turns)
    return events


def _condition(manifest: dict[str, Any]) -> str:
    levels = manifest.get("levels") or []
    return "+".join(sorted(levels)) if levels else "none"


def example_kernels(folder: Path) -> dict[str, str]:
    """The run's final kernel per task. `kernels.json` names each one's file: most are
    the catalog's own expert or naive kernel (read from there, never copied), the rest
    lie in the run's `kernels/` folder (e.g. the naive scan with an off-by-one)."""
    sources = json.loads((folder / "kernels.json").read_text())
    return {
        task: ((folder if path.startswith("kernels/") else REPO_ROOT) / path).read_text()
        for task, path in sorted(sources.items())
    }


def example_bundle_build(
    *, name: str, tasks: Iterable[str] | None = None, directory: Path = EXAMPLE_DIR
) -> bytes:
    """The zip of one example run (`without_guidance` or `with_guidance`), optionally
    limited to `tasks`. The same inputs always give the same bytes."""
    folder = directory / name
    manifest = json.loads((folder / "manifest.json").read_text())
    condition = _condition(manifest)
    kernels = example_kernels(folder)
    proposals = {p.stem: p.read_text() for p in sorted((folder / "proposals").glob("*.md"))}
    naive = example_kernels(directory / EXAMPLE_RUNS[0])
    available = set(kernels) | set(proposals)
    wanted = available & set(tasks) if tasks is not None else available
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:

        def add(path: str, text: str) -> None:
            zf.writestr(
                zipfile.ZipInfo(path, date_time=(2026, 5, 28, 0, 0, 0)),
                text,
                compress_type=zipfile.ZIP_DEFLATED,
            )

        add("manifest.json", json.dumps(manifest, indent=2) + "\n")
        for task in sorted(wanted):
            if task in kernels:
                add(f"kernels/{task}.py", kernels[task])
            if task in proposals:
                add(f"proposals/{task}.md", proposals[task])
            first_draft = naive.get(task) if condition != "none" else None
            events = example_trace(
                task=task,
                condition=condition,
                final=kernels.get(task),
                first_draft=first_draft,
                seed=SEED,
            )
            lines = [json.dumps(e) for e in events]
            if task not in kernels:
                # The agent was killed mid-write: a truncated line the run page reports.
                lines.insert(-1, lines[-2][: len(lines[-2]) // 2])
            add(f"traces/{task}.jsonl", "".join(line + "\n" for line in lines))
    return buffer.getvalue()

"""The task prompt an agent harness gives its model: one text per task version and levels.

Everything but the guidance section is the same, byte for byte, whatever levels are
chosen, and the guidance section comes last: the run with guidance and its twin
without differ only there. Only public workloads ever appear (the selector that
feeds this never loads a hidden one).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runformat import manifest_condition

from .guidance_text import PROPERTY_FIELDS, guidance_content_build, guidance_content_hash
from .models import GuidanceVersion, Level, Task
from .selectors import guidance_version_current, task_public_workloads

GUIDANCE_HEADING = "## Design guidance"

SUBMISSION_CONTRACT = """\
Submit one Python file that defines `class ModelNew(torch.nn.Module)` with the same
constructor arguments and the same `forward` signature as the reference `Model`; it
must return the same outputs (shape, dtype, device) within the tolerances below.

- Compute with Triton kernels, or CUDA C++ through `torch.utils.cpp_extension.load_inline`.
  torch is for allocation, views, copies, casts and launch glue only: any other aten op
  that computes (a matmul, a softmax, a reduction) is flagged.
- Take the device from the inputs; never hard-code `cuda`. The file must also run under
  Triton's CPU interpreter (`TRITON_INTERPRET=1`) on small shapes.
- Do not modify the inputs (unless the statement says the task is in place), cache
  results between calls, start threads or processes, or read files.
- The evaluator also checks correctness on workloads that are not shown here."""


@dataclass(frozen=True)
class GuidanceGiven:
    """The guidance version a prompt carries: its hash, and its number where the
    portal has recorded that content as a version."""

    sha256: str
    number: int | None


@dataclass(frozen=True)
class TaskPrompt:
    slug: str
    version: int
    content_hash: str
    levels: tuple[str, ...]
    text: str
    guidance: GuidanceGiven

    @property
    def condition(self) -> str:
        return manifest_condition(levels=self.levels)

    @property
    def sha256(self) -> str:
        return prompt_sha256(self.text)


def prompt_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompt_levels_parse(raw: str | None) -> tuple[str, ...]:
    """`L1,L2` → ("L1", "L2"); '' or None → (); ValueError naming an unknown level."""
    levels = sorted({part.strip().upper() for part in (raw or "").split(",") if part.strip()})
    unknown = [level for level in levels if level not in Level.values]
    if unknown:
        raise ValueError(
            f"Unknown guidance level(s) {', '.join(unknown)}; "
            f"choose from {', '.join(Level.values)}."
        )
    return tuple(levels)


def _tolerance_lines(tolerances: Mapping[str, Mapping[str, float]]) -> list[str]:
    lines = []
    for dtype in sorted(tolerances, key=lambda d: (d != "default", d)):
        t = tolerances[dtype]
        name = "other dtypes" if dtype == "default" else dtype
        floor = f", abs_l2 {t['abs_l2']:g}" if t.get("abs_l2") else ""
        floor += f", atol_rms {t['atol_rms']:g}" if t.get("atol_rms") else ""
        lines.append(
            f"- {name}: atol {t['atol']:g}, rtol {t['rtol']:g}, rel_l2 {t['rel_l2']:g}{floor}"
        )
    return lines


def prompt_render(
    *,
    slug: str,
    title: str,
    version: int,
    statement: str,
    reference_source: str,
    tolerances: Mapping[str, Mapping[str, float]],
    workloads: Iterable[Mapping[str, Any]],
    guidance: Iterable[tuple[str, str]],
) -> str:
    """The prompt as text (markdown). `guidance`: (level, text) pairs in level order."""
    parts = [
        f"# Task `{slug}`: {title} (catalog version {version})",
        "## Statement",
        statement.strip(),
        "## Reference implementation (reference.py)",
        f"```python\n{reference_source.rstrip()}\n```",
        "## Public workloads",
        "Each workload's parameters are passed to `get_inputs(**params)` and "
        "`get_init_inputs(**params)`.",
        "\n".join(
            f"- `{w['name']}` ({w['role']}): {json.dumps(w['params'], sort_keys=True)}"
            for w in workloads
        ),
        "## Submission contract",
        SUBMISSION_CONTRACT,
        "Tolerances (elementwise atol/rtol, and relative L2 error of the whole output):",
        "\n".join(_tolerance_lines(tolerances)),
    ]
    common = "\n\n".join(parts) + "\n"
    sections = [f"### {level}\n\n{text.strip()}" for level, text in guidance]
    if not sections:
        return common
    # Appended to the common text unchanged: every condition's prompt starts with it.
    return common + "\n" + "\n\n".join([GUIDANCE_HEADING, *sections]) + "\n"


def task_guidance_current(*, task: Task) -> GuidanceGiven:
    """The guidance `task` (as `task_get_public` loads it) holds now, as a version."""
    content = guidance_content_build(
        guidance=(
            {"level": g.level, "text": g.text, "depends_on": g.depends_on}
            for g in task.guidance.all()
        ),
        properties=(
            {name: getattr(p, name) for name in PROPERTY_FIELDS} for p in task.properties.all()
        ),
    )
    digest = guidance_content_hash(content)
    version = guidance_version_current(task=task)
    number = version.number if version is not None and version.content_hash == digest else None
    return GuidanceGiven(sha256=digest, number=number)


def task_prompt(
    *, task: Task, levels: Iterable[str], guidance_version: GuidanceVersion | None = None
) -> TaskPrompt:
    """The prompt of `task` (as `task_get_public` loads it) with the guidance of `levels`:
    the task's current guidance, or that of an earlier `guidance_version`."""
    version = task.current_version
    assert version is not None, "task_get_public returns tasks with a current version only"
    chosen = tuple(sorted(set(levels)))
    if guidance_version is None:
        texts = [(g.level, g.text) for g in task.guidance.all()]
        given = task_guidance_current(task=task)
    else:
        texts = [(g["level"], g["text"]) for g in guidance_version.content["guidance"]]
        given = GuidanceGiven(sha256=guidance_version.content_hash, number=guidance_version.number)
    text = prompt_render(
        slug=task.slug,
        title=task.title,
        version=version.number,
        statement=task.statement,
        reference_source=version.reference_source,
        tolerances=version.tolerances,
        workloads=(
            {"name": w.name, "role": w.role, "params": w.params}
            for w in task_public_workloads(task)
        ),
        guidance=((level, text) for level, text in sorted(texts) if level in chosen),
    )
    return TaskPrompt(
        slug=task.slug,
        version=version.number,
        content_hash=version.content_hash,
        levels=chosen,
        text=text,
        guidance=given,
    )


def task_prompt_match(*, task: Task, levels: Iterable[str], sha256: str) -> TaskPrompt | None:
    """The prompt of the task's current version whose sha256 is `sha256`: with the current
    guidance or with an earlier guidance version (newest first); None if none matches."""
    prompt = task_prompt(task=task, levels=levels)
    if prompt.sha256 == sha256:
        return prompt
    for guidance_version in GuidanceVersion.objects.filter(task=task).order_by("-number"):
        prompt = task_prompt(task=task, levels=levels, guidance_version=guidance_version)
        if prompt.sha256 == sha256:
            return prompt
    return None

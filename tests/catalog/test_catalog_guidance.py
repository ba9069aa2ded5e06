"""Guidance and statements say nothing about the hidden workloads that the public ones do not.

Agents read the statement and the guidance; hidden workloads (and hidden
checks) exist to catch kernels fitted to the public shapes, so no text may
name them, give their dimensions, the secret seeds or the tolerance numbers.
The hidden workloads are those a test secret draws (tests/catalog/drawn.py).
Their sizes are drawn per deployment, so a bare number in a text that equals
one is a coincidence, not a leak: what is checked is a hidden workload's name,
a hidden-only value given to its parameter (`cols = N`), the seeds and the
tolerance numbers.
"""

import math
import re

import pytest

from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs
from taskformat.spec import TaskSpec
from tests.catalog.drawn import load_drawn

TASKS = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR)]
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.]\d)")


def _value(token: str) -> float | None:
    try:
        return float(token.replace(",", ""))
    except ValueError:
        return None


def _numbers(text: str) -> set[float]:
    return {v for m in NUMBER.finditer(text) if (v := _value(m.group())) is not None}


def _numeric_params(params: dict) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in params.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


def hidden_only(task: TaskSpec) -> dict[str, set[float]]:
    """Per parameter, the values only hidden workloads (and hidden checks) use."""
    public: set[float] = _numbers(task.reference_source)
    for w in task.workloads:
        if not w.hidden:
            public |= set(_numeric_params(w.params).values())
    found: dict[str, set[float]] = {}
    for w in task.workloads:
        if w.hidden:
            for key, value in _numeric_params(w.params).items():
                if value not in public:
                    found.setdefault(key, set()).add(value)
    return found


def leaks(task: TaskSpec, text: str, *, guidance: bool) -> list[str]:
    out = []
    for w in task.workloads:
        if w.hidden and w.name in text:
            out.append(f"names hidden workload {w.name}")
    hidden = hidden_only(task)
    for key, values in hidden.items():
        for m in re.finditer(rf"`?\b{re.escape(key)}`?\s*(?:=|==|is)\s*`?(\d[\d,]*)", text):
            if _value(m.group(1)) in values:
                out.append(f"hidden value {m.group()!r}")
    if guidance:
        if re.search(r"\bseeds?\b", text, re.IGNORECASE):
            out.append("mentions the seeds")
        tolerances = {
            x for t in task.tolerances.values() for x in (t.atol, t.rtol, t.rel_l2) if 0 < x < 1
        }
        for m in NUMBER.finditer(text):
            value = _value(m.group())
            if value is not None and any(math.isclose(value, t) for t in tolerances):
                out.append(
                    f"tolerance number {m.group()!r}: …{text[max(0, m.start() - 40) : m.end()]}"
                )
    return out


@pytest.mark.parametrize("slug", TASKS)
def test_guidance_gives_away_nothing_hidden(slug):
    task = load_drawn(slug)
    found = [
        f"{g.level}: {leak}" for g in task.guidance for leak in leaks(task, g.text, guidance=True)
    ]
    assert found == []


@pytest.mark.parametrize("slug", TASKS)
def test_statement_names_no_hidden_workload_or_parameter_value(slug):
    task = load_drawn(slug)
    assert leaks(task, task.statement, guidance=False) == []


def test_the_leak_check_finds_a_hidden_shape_a_name_a_seed_and_a_tolerance():
    task = load_drawn("row_softmax")
    hidden = next(w for w in task.workloads if w.hidden and w.params.get("cols", 0) > 1000)
    cols = hidden.params["cols"]
    text = (
        f"Rows of cols = {cols} columns, see {hidden.name}; the seed is fixed; "
        f"keep the error under {task.tolerances['bfloat16'].rtol:g}."
    )
    found = leaks(task, text, guidance=True)
    assert len(found) == 4, found
    assert leaks(task, "Rows of 1024 columns, in 4 warps.", guidance=True) == []

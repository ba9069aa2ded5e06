"""Every expert is correct in the interpreter with every uninitialised allocation poisoned,
on the inputs of both distributions.

On an H200 the evaluator poisons the allocator (NaN bytes) before each call,
so an output row a kernel never writes, or an accumulator it adds into
without zeroing, fails there; on the CPU the same memory is usually fresh
zeroed pages and the interpreter passes. tests/catalog/poisoned_interpret.py
makes the CPU behave like the GPU: every torch.empty the expert makes is
full of NaN (or integer garbage) before a kernel sees it.
"""

import pytest

from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs
from taskformat.spec import Mode
from tests.catalog.drawn import load_drawn
from tests.catalog.script_lines import script_json_lines

TASKS = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR)]


def run_poisoned(slug: str, *args: str) -> dict[tuple[str, str], dict]:
    lines = script_json_lines("poisoned_interpret", slug, *args)
    return {(line["workload"], line["dist"]): line for line in lines}


@pytest.mark.slow
@pytest.mark.parametrize("slug", TASKS)
def test_expert_is_correct_on_every_check_with_poisoned_allocations_on_both_distributions(slug):
    # Every public check workload on the default and the adversarial inputs (where the
    # hazards the statement names are real), every hidden one as drawn.
    results = run_poisoned(slug)
    workloads = load_drawn(slug).workloads_for(Mode.INTERPRET)
    expected = [
        (w.name, dist)
        for w in workloads
        for dist in ([w.params.get("dist", "default")] if w.hidden else ["default", "adversarial"])
    ]
    assert list(results) == expected
    wrong = {key: r["message"] for key, r in results.items() if r["status"] != "correct"}
    assert wrong == {}


@pytest.mark.slow
def test_an_atomic_accumulator_left_unzeroed_fails_when_poisoned(tmp_path):
    # The histogram expert's per-copy counts, allocated without the zero fill.
    source = (DEFAULT_CATALOG_DIR / "histogram" / "expert.py").read_text()
    zeroed = "priv = torch.zeros((n_copies, bins)"
    assert zeroed in source
    broken = tmp_path / "expert.py"
    broken.write_text(source.replace(zeroed, "priv = torch.empty((n_copies, bins)"))
    results = run_poisoned("histogram", str(broken))
    assert any(r["status"] == "incorrect" for r in results.values()), results

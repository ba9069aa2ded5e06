"""Every expert is correct in the interpreter with every uninitialised allocation poisoned.

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


def run_poisoned(slug: str, *args: str) -> dict[str, dict]:
    return {line["workload"]: line for line in script_json_lines("poisoned_interpret", slug, *args)}


@pytest.mark.slow
@pytest.mark.parametrize("slug", TASKS)
def test_expert_is_correct_on_every_check_workload_with_poisoned_allocations(slug):
    results = run_poisoned(slug)
    task = load_drawn(slug)
    assert list(results) == [w.name for w in task.workloads_for(Mode.INTERPRET)]
    wrong = {name: r["message"] for name, r in results.items() if r["status"] != "correct"}
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

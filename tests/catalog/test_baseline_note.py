"""Each catalog baseline.py says what it runs and why, where the pages read it."""

import pytest

from task_catalog.baseline_note import baseline_note
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs

BASELINES = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR) if (p / "baseline.py").is_file()]


@pytest.mark.parametrize("slug", BASELINES)
def test_every_baseline_docstring_names_what_it_runs(slug):
    source = (DEFAULT_CATALOG_DIR / slug / "baseline.py").read_text(encoding="utf-8")
    assert len(baseline_note(source)) > 40


def test_the_note_is_the_summary_and_the_paragraph_after_it_on_one_line():
    source = '"""One call.\n\nWhy it is\nthe fair one.\n\nDetails."""\nimport torch\n'
    assert baseline_note(source) == "One call. Why it is the fair one."


def test_a_file_without_a_docstring_or_not_python_has_no_note():
    assert baseline_note("import torch\n") == ""
    assert baseline_note("def (:\n") == ""

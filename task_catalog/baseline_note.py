"""What a task's baseline.py runs and why, from its module docstring (no Django import).

A task author states it where the code is: the docstring's summary line and
the paragraph after it. The task page and docs/baselines.md
(bench/baselines_md.py) show it.
"""

import ast


def baseline_note(source: str) -> str:
    """The docstring's summary and first paragraph as one line ('' without one)."""
    try:
        docstring = ast.get_docstring(ast.parse(source)) or ""
    except SyntaxError:
        return ""
    return " ".join(" ".join(docstring.split("\n\n")[:2]).split())

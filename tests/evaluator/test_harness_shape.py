"""The harness stays readable: no module over 400 lines, no function over 60.

A module that grows past the limit splits into modules named for what they
do; a function that does, into named steps (orchestrate.evaluate reads as its
stages, timingchecks.judge_timing as its checks).
"""

import ast
from pathlib import Path

import pytest

import evaluator.harness

HARNESS = Path(evaluator.harness.__file__).resolve().parent
MODULES = sorted(HARNESS.glob("*.py"))
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """`name (lines)` of every function and method in `source` longer than `limit` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append(f"{node.name} ({lines} lines)")
    return found


def test_the_harness_is_found():
    assert {"orchestrate.py", "judge.py", "sandbox.py"} <= {m.name for m in MODULES}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_no_harness_module_is_over_400_lines(module: Path):
    lines = len(module.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{module.name} has {lines} lines"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_no_harness_function_is_over_60_lines(module: Path):
    assert long_functions(module.read_text()) == []


def test_the_walk_finds_a_long_method_inside_a_class():
    body = "\n".join(f"        x{i} = {i}" for i in range(60))
    source = f"class A:\n    def long(self):\n{body}\n\n    def short(self):\n        pass\n"
    assert long_functions(source) == ["long (61 lines)"]

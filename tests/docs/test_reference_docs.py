"""The reference docs name everything the code can emit, and nothing a reader cannot open.

Every verdict status, queue and review state, honesty flag and command-line option of
the evaluator is in docs/evaluator.md; no doc cites the product spec or an issue
tracker the repository does not carry; the raw GPU output kept in docs/gpu-runs/ is
exactly what its README maps to a figure.
"""

import ast
import re
from pathlib import Path

import pytest

from evaluator.cli import _parser
from evaluator.harness.verdict import Status
from evaluator.models import EvaluationStatus, Review

ROOT = Path(__file__).resolve().parents[2]
EVALUATOR_DOC = ROOT / "docs" / "evaluator.md"


def evaluator_doc() -> str:
    return EVALUATOR_DOC.read_text(encoding="utf-8")


def flags_emitted() -> set[str]:
    """Every check name the harness can put in a verdict's `flags`: the first argument
    of a `flag(...)` call, or the value of a literal `{"check": ...}`."""
    found: set[str] = set()
    for path in (ROOT / "evaluator" / "harness").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and node.args:
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                first = node.args[0]
                if name == "flag" and isinstance(first, ast.Constant):
                    found.add(first.value)
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if (
                        isinstance(key, ast.Constant)
                        and key.value == "check"
                        and isinstance(value, ast.Constant)
                    ):
                        found.add(value.value)
    return found


def cli_options() -> set[str]:
    found = set()
    commands = next(a for a in _parser()._actions if a.dest == "command")
    for name, sub in commands.choices.items():
        found.add(name)
        for action in sub._actions:
            found |= {o for o in action.option_strings if o.startswith("--") and o != "--help"}
    return found


def test_the_flag_scan_finds_the_harness_flags():
    # The scan itself: a refactor that hides flag names from it must fail here.
    assert {"forbidden_op", "result_channel", "reference_tampering", "library_kernel"} <= (
        flags_emitted()
    )
    assert len(flags_emitted()) >= 15


@pytest.mark.parametrize("check", sorted(flags_emitted()))
def test_every_flag_the_harness_emits_is_in_the_flags_table(check):
    assert f"| `{check}` |" in evaluator_doc()


@pytest.mark.parametrize("status", [s.value for s in Status])
def test_every_verdict_status_is_in_the_statuses_table(status):
    assert f"| `{status}` |" in evaluator_doc()


@pytest.mark.parametrize("state", sorted(set(EvaluationStatus) - set(Status)))
def test_every_queue_state_is_explained(state):
    assert f"`{state}`" in evaluator_doc()


@pytest.mark.parametrize("review", [r.value for r in Review if r.value])
def test_every_review_state_is_in_the_review_table(review):
    assert f"| `{review}` |" in evaluator_doc()


@pytest.mark.parametrize("option", sorted(cli_options()))
def test_every_option_of_the_evaluator_cli_is_documented(option):
    assert f"`{option}`" in evaluator_doc()


def test_the_cli_scan_finds_the_options():
    assert {"check", "ceilings", "--task", "--timing", "--json"} <= cli_options()


# --- what a reader cannot open ---------------------------------------------------------

READER_DOCS = sorted(
    [*ROOT.glob("docs/*.md"), ROOT / "README.md", *ROOT.glob("templates/**/*.html")]
)
UNOPENABLE = [
    re.compile(r"\bSPEC\b"),
    re.compile(r"§"),
    re.compile(r"CATALOG\.md"),
    re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE),
    re.compile(r"(?<![\w&/#])#(?:[1-9]|[12]\d|30)\b"),
]


@pytest.mark.parametrize("path", READER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_doc_cites_the_spec_or_issue_numbers(path):
    text = path.read_text(encoding="utf-8")
    hits = [m.group(0) for pattern in UNOPENABLE for m in pattern.finditer(text)]
    assert not hits, f"{path.name} cites what a reader cannot open: {hits}"


@pytest.mark.parametrize(
    "text",
    ["see SPEC §6", "(issue #3)", "issues #2 and #4", "fixed in #12", "CATALOG.md lists"],
)
def test_the_citation_patterns_catch_what_they_are_for(text):
    assert any(pattern.search(text) for pattern in UNOPENABLE)


@pytest.mark.parametrize("text", ["the issued seeds", "evaluation #31", "`#known-gaps`"])
def test_the_citation_patterns_leave_plain_prose_alone(text):
    assert not any(pattern.search(text) for pattern in UNOPENABLE)


LAB_NOTEBOOK = [
    re.compile(r"`[0-9a-f]{7}`"),  # a commit
    re.compile(r"\bseries \d"),
    re.compile(r"\blent\b"),
    re.compile(r"device_prepare|device_setup|\.device/"),
]


@pytest.mark.parametrize(
    "name", ["evaluator.md", "exploits.md", "benchmarks.md", "deploy.md", "architecture.md"]
)
def test_the_reference_pages_carry_no_lab_notebook(name):
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    hits = [m.group(0) for pattern in LAB_NOTEBOOK for m in pattern.finditer(text)]
    assert not hits, f"docs/{name}: {hits} belong in docs/lab/"


# --- raw GPU output ---------------------------------------------------------------------


def expand(pattern: str) -> list[str]:
    """`a-{x,y}.json` -> [`a-x.json`, `a-y.json`] (one level of braces, as the docs write)."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [p for option in match.group(1).split(",") for p in expand(head + option + tail)]


def gpu_run_citations() -> set[str]:
    cited = set()
    for path in [*ROOT.glob("docs/*.md"), ROOT / "README.md"]:
        for found in re.findall(r"`(docs/gpu-runs/[^`\s]*)`", path.read_text(encoding="utf-8")):
            cited.update(expand(found))
    return cited


def test_every_cited_gpu_run_exists():
    missing = [c for c in sorted(gpu_run_citations()) if not (ROOT / c.rstrip("/")).exists()]
    assert not missing


def test_every_kept_gpu_run_is_mapped_to_its_figure():
    readme = (ROOT / "docs" / "gpu-runs" / "README.md").read_text(encoding="utf-8")
    mapped = {
        name
        for cell in re.findall(r"`([^`]+)`", readme)
        for pattern in re.split(r"`,\s*`|,\s+", cell)
        for name in expand(pattern)
    }
    kept = [
        p.relative_to(ROOT / "docs" / "gpu-runs").as_posix()
        for p in (ROOT / "docs" / "gpu-runs").rglob("*")
        if p.is_file() and p.name != "README.md"
    ]
    unmapped = [
        k
        for k in kept
        if k not in mapped and Path(k).name not in mapped and k.rsplit(".", 1)[0] not in mapped
    ]
    assert kept and not unmapped, f"raw GPU output no figure cites: {unmapped} (docs/lab/)"

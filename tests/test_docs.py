"""Docs are tested too: every setting, status and flag named in code is documented."""

import re
from pathlib import Path

import pytest

from evaluator.harness.verdict import Status
from evaluator.models import EvaluationStatus

ROOT = Path(__file__).resolve().parent.parent


def read(path: str) -> str:
    return (ROOT / path).read_text()


def settings_read_in_code() -> set[str]:
    found = set()
    for path in [*ROOT.glob("d2kportal/**/*.py"), *ROOT.glob("evaluator/harness/*.py")]:
        found |= set(re.findall(r"\"(D2K_[A-Z_]+)\"", path.read_text()))
    return found


def flag_checks_in_code() -> set[str]:
    found = set()
    for path in ROOT.glob("evaluator/harness/*.py"):
        found |= set(re.findall(r"flag\(\s*\"([a-z_]+)\"", path.read_text()))
    return found


@pytest.mark.parametrize("name", sorted(settings_read_in_code()))
def test_every_setting_is_documented_and_in_env_example(name):
    assert f"`{name}`" in read("docs/settings.md")
    if not name.startswith(("D2K_SANDBOX", "D2K_EVALUATOR_CACHE")):
        assert f"{name}=" in read(".env.example")


@pytest.mark.parametrize("status", [s.value for s in Status])
def test_every_verdict_status_is_explained(status):
    assert f"| `{status}` |" in read("docs/evaluator.md")


@pytest.mark.parametrize("status", [s.value for s in EvaluationStatus])
def test_every_evaluation_status_is_a_known_state(status):
    assert status in {s.value for s in Status} | {"queued", "running"}


@pytest.mark.parametrize("check", sorted(flag_checks_in_code()))
def test_every_honesty_flag_is_explained(check):
    assert f"| `{check}` |" in read("docs/evaluator.md")


def test_some_flags_are_found_in_code():
    assert {"forbidden_op", "result_channel", "escaped_work"} <= flag_checks_in_code()


# --- runs ------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["receiving", "evaluating", "complete"])
def test_every_run_state_is_explained(state):
    from runs.models import RunState

    assert state in {s.value for s in RunState}
    assert f"| `{state}` |" in read("docs/run-format.md")


def test_every_trace_event_and_manifest_key_is_documented():
    from runformat import schema_load
    from runs.traces import KNOWN_TYPES

    doc = read("docs/run-format.md")
    for kind in KNOWN_TYPES:
        assert f"| `{kind}` |" in doc
    for key in schema_load("manifest-v1")["properties"]:
        assert f"| `{key}` |" in doc

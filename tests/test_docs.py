"""Docs are tested too: every setting, status and flag named in code is documented.

Every variable the product reads from the environment is in .env.example and in
docs/settings.md, under the same group, and .env.example holds nothing else.
"""

import re
from pathlib import Path

import pytest

from evaluator.harness.verdict import Status
from evaluator.models import EvaluationStatus

ROOT = Path(__file__).resolve().parent.parent


def read(path: str) -> str:
    return (ROOT / path).read_text()


# Read from the environment, but no setting of the portal's: the d2k client's own
# (docs/client.md), and the pool and the name a worker hands its own children
# (evaluation_worker --gpu; its heartbeat row, evaluator.services.backoff).
NOT_PORTAL_SETTINGS = {
    "D2K_CONFIG",
    "D2K_SERVER",
    "D2K_TOKEN",
    "D2K_WORKER_HARDWARE",
    "D2K_WORKER_ID",
    "D2K_WORKER_GPU_LEASE",
}
PRODUCT_CODE = [
    "d2kportal",
    "evaluator",
    "taskformat",
    "task_catalog",
    "submissions",
    "accounts",
    "leaderboard",
    "core",
    "runs",
    "scoring",
    "moderation",
]


def settings_read_in_code() -> set[str]:
    """Every `"D2K_…"` string of the product's code: what the env reader and the evaluator
    read (`env("D2K_…")`, `os.environ.get("D2K_…")`)."""
    found = set()
    for package in PRODUCT_CODE:
        for path in ROOT.glob(f"{package}/**/*.py"):
            found |= set(re.findall(r"\"(D2K_[A-Z_]+)\"", path.read_text()))
    return found - NOT_PORTAL_SETTINGS


def env_example_groups() -> dict[str, str]:
    """Variable -> the `# == Group ==` of .env.example it is listed under."""
    groups, group = {}, ""
    for line in read(".env.example").splitlines():
        if heading := re.fullmatch(r"# == (.+) ==", line):
            group = heading.group(1)
        elif variable := re.match(r"(D2K_[A-Z_]+)=", line):
            groups[variable.group(1)] = group
    return groups


def settings_doc_groups() -> dict[str, str]:
    """Variable -> the `## Group` of docs/settings.md whose table lists it."""
    groups, group = {}, ""
    for line in read("docs/settings.md").splitlines():
        if heading := re.fullmatch(r"## (.+)", line):
            group = heading.group(1)
        elif variable := re.match(r"\| `(D2K_[A-Z_]+)` \|", line):
            groups[variable.group(1)] = group
    return groups


def flag_checks_in_code() -> set[str]:
    found = set()
    for path in ROOT.glob("evaluator/harness/*.py"):
        found |= set(re.findall(r"flag\(\s*\"([a-z_]+)\"", path.read_text()))
    return found


@pytest.mark.parametrize("name", sorted(settings_read_in_code()))
def test_every_setting_is_documented_and_in_env_example(name):
    assert f"`{name}`" in read("docs/settings.md")
    assert name in env_example_groups()


@pytest.mark.parametrize("name", sorted(env_example_groups()))
def test_every_variable_of_env_example_is_read(name):
    assert name in settings_read_in_code(), f"{name} is read nowhere: drop it from .env.example"


def test_env_example_and_the_settings_page_group_alike():
    groups = env_example_groups()
    assert set(groups.values()) == {
        "Site",
        "Database and broker",
        "Evaluator",
        "Limits",
        "Experiments and tests",
    }
    documented = settings_doc_groups()
    assert {name: documented.get(name) for name in groups} == groups


def test_the_scan_sees_every_kind_of_reader():
    found = settings_read_in_code()
    # The env reader, gunicorn's os.environ, the harness's own, and the worker's.
    assert {"D2K_DATABASE_URL", "D2K_WEB_BIND", "D2K_SANDBOX", "D2K_HIDDEN_SEED"} <= found
    assert "D2K_Q_TIMEOUT" not in found and len(env_example_groups()) <= 46


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


RUN_STATES = ["receiving", "validating", "rejected", "evaluating", "complete"]


@pytest.mark.parametrize("state", RUN_STATES)
def test_every_run_state_is_explained(state):
    assert f"| `{state}` |" in read("docs/run-format.md")


def test_the_run_states_explained_are_all_of_them():
    from runs.models import RunState

    assert sorted(RUN_STATES) == sorted(s.value for s in RunState)


def test_every_trace_event_and_manifest_key_is_documented():
    from runformat import schema_load
    from runs.traces import KNOWN_TYPES

    doc = read("docs/run-format.md")
    for kind in KNOWN_TYPES:
        assert f"| `{kind}` |" in doc
    for key in schema_load("manifest-v1")["properties"]:
        assert f"| `{key}` |" in doc

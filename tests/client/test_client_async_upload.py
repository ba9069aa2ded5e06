"""`d2k submit-run` of a big bundle: the portal answers 202 with the run `validating`; the
client looks at the run until the portal has validated it, then goes on as after a 201,
or prints the bundle's problems and exits 1."""

import json

import pytest

from tests.client.fake_api import NOT_FOUND, FakeApi, json_reply
from tests.runs.bundles import good_files, make_zip, trace_lines

RUN_ID = 7
NESTED = "[" * 40 + "]" * 40  # deeper than a JSON line may nest
URL = f"http://portal.test/runs/{RUN_ID}/"
ACCEPTED = {
    "id": RUN_ID,
    "url": URL,
    "api_url": f"http://portal.test/api/runs/{RUN_ID}/",
    "state": "validating",
}


def _run(state, *statuses, errors=()):
    tasks = [
        {
            "task": f"task_{i}",
            "result": {
                "status": status,
                "is_finished": status not in ("queued", "running"),
                "submission": 100 + i,
            },
            "pair_result": None,
        }
        for i, status in enumerate(statuses)
    ]
    return {
        "id": RUN_ID,
        "url": URL,
        "owner": "cli-user",
        "model": "" if state in ("validating", "rejected") else "model-x",
        "agent": "" if state in ("validating", "rejected") else "agent-y",
        "condition": "" if state in ("validating", "rejected") else "none",
        "state": state,
        "errors": list(errors),
        "example_label": None,
        "tasks": tasks,
    }


@pytest.fixture
def fake_portal(monkeypatch):
    """`fake_portal(*runs)`: POST /api/runs/ answers 202 (validating) and
    GET /api/runs/7/ each of `runs` in turn (the last one repeats). No real waiting."""
    monkeypatch.setattr("d2k_client.follow.time.sleep", lambda seconds: None)
    fakes = []

    def start(*replies):
        left = list(replies)

        def answer(method, path, query):
            if method == "POST" and path == "/api/runs/":
                return json_reply(ACCEPTED, 202)
            if method == "GET" and path == f"/api/runs/{RUN_ID}/":
                return json_reply(left.pop(0) if len(left) > 1 else left[0])
            return NOT_FOUND

        fakes.append(FakeApi(answer))
        return fakes[-1]

    yield start
    for fake in fakes:
        fake.close()


@pytest.fixture
def bundle(tmp_path):
    path = tmp_path / "myrun.zip"
    path.write_bytes(make_zip(good_files("row_softmax")))
    return path


def _methods(api):
    return [method for method, _, _ in api.requests]


def test_a_202_is_followed_until_the_bundle_is_accepted_then_as_a_201(d2k, fake_portal, bundle):
    api = fake_portal(_run("validating"), _run("validating"), _run("evaluating", "queued"))
    result = d2k("--server", api.url, "submit-run", str(bundle))
    assert result.exit_code == 0, result.output
    assert _methods(api) == ["POST", "GET", "GET", "GET"]
    assert result.stdout == f"Run {RUN_ID}: {URL}\n"
    assert "validating the bundle" in result.stderr


def test_a_202_with_json_prints_what_a_201_prints(d2k, fake_portal, bundle):
    api = fake_portal(_run("validating"), _run("evaluating", "queued"))
    result = d2k("--server", api.url, "submit-run", str(bundle), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"id": RUN_ID, "url": URL}


def test_a_202_with_wait_follows_the_evaluations_after_the_validation(d2k, fake_portal, bundle):
    api = fake_portal(
        _run("validating"),
        _run("evaluating", "queued"),
        _run("complete", "correct"),
    )
    result = d2k("--server", api.url, "submit-run", str(bundle), "--wait", "--poll-interval", "0.1")
    assert result.exit_code == 0, result.output
    assert _methods(api) == ["POST", "GET", "GET", "GET"]
    assert f"Run {RUN_ID} · model-x / agent-y · condition none · complete" in result.stdout


def test_a_rejected_bundle_prints_its_problems_and_exits_1(d2k, fake_portal, bundle):
    problem = {"file": "traces/row_softmax.jsonl", "line": 2, "message": "JSON nested too deep."}
    whole = {"file": None, "line": None, "message": "Over a quota."}
    api = fake_portal(_run("validating"), _run("rejected", errors=[problem, whole]))
    result = d2k("--server", api.url, "submit-run", str(bundle), "--wait")
    assert result.exit_code == 1, result.output
    assert "traces/row_softmax.jsonl:2: JSON nested too deep." in result.stderr
    assert "bundle: Over a quota." in result.stderr
    assert (
        f"d2k: error: the portal rejected the bundle of run {RUN_ID} (2 problem(s)); nothing "
        "of it was kept: fix it and upload it again" in result.stderr
    )
    assert result.stdout == ""


def test_run_shows_a_rejected_run_and_its_wait_ends_with_exit_1(d2k, fake_portal):
    problem = {"file": "manifest.json", "line": 3, "message": "Bad model."}
    api = fake_portal(_run("rejected", errors=[problem]))
    shown = d2k("--server", api.url, "run", str(RUN_ID))
    assert shown.exit_code == 0, shown.output
    assert "rejected the bundle" in shown.stdout and "manifest.json:3: Bad model." in shown.stdout
    waited = d2k("--server", api.url, "run", str(RUN_ID), "--wait")
    assert waited.exit_code == 1, waited.output
    assert "manifest.json:3: Bad model." in waited.stderr


def test_a_big_bundle_against_the_portal(portal, d2k, tmp_path, settings, fake_cli):
    settings.D2K_RUN_SYNC_VALIDATION_BYTES = 100
    good = tmp_path / "good.zip"
    good.write_bytes(make_zip(good_files("row_softmax")))
    result = d2k("submit-run", str(good), "--wait", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["state"] == "complete"
    files = good_files("row_softmax")
    files["traces/row_softmax.jsonl"] = trace_lines({"type": "start", "ts": 0}) + NESTED + "\n"
    bad = tmp_path / "bad.zip"
    bad.write_bytes(make_zip(files))
    result = d2k("submit-run", str(bad))
    assert result.exit_code == 1, result.output
    assert "traces/row_softmax.jsonl:2: " in result.stderr
    assert "d2k: error: the portal rejected the bundle of run" in result.stderr

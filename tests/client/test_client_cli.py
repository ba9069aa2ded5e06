"""`d2k` commands against a live portal (pytest-django's live_server), over real HTTP."""

import dataclasses
import json
import os
import stat

import pytest
from d2k_client.config import config_path
from d2k_client.packing import bundle_check
from d2k_client.runformat import DEFAULT_LIMITS

from tests.client.fake_api import NOT_FOUND, FakeApi, json_reply
from tests.runs.bundles import KERNEL, good_files
from tests.runs.test_run_api import DAMAGED


def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_login_stores_the_token_per_server_readable_by_the_owner_only(portal, live_server):
    data = json.loads(config_path().read_text())
    assert data == {
        "default_server": live_server.url,
        "servers": {live_server.url: {"token": portal}},
    }
    assert stat.S_IMODE(os.stat(config_path()).st_mode) == 0o600


def test_login_with_a_bad_token_is_one_line_and_exit_1(live_server, d2k, db):
    result = d2k("--server", live_server.url, "login", "--token", "nope")
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("d2k: error: GET /api/submissions/: HTTP 401")
    assert not config_path().exists()


def test_an_unreachable_server_is_one_line_and_exit_1(d2k):
    result = d2k("--server", "http://127.0.0.1:9", "tasks")
    assert result.exit_code == 1
    assert result.stderr.startswith("d2k: error: cannot reach http://127.0.0.1:9")
    assert len(result.stderr.strip().splitlines()) == 1


def test_tasks_and_task_show_the_catalog(portal, d2k):
    assert [t["slug"] for t in _json(d2k("tasks", "--json"))] == ["row_softmax", "layernorm_fwd"]
    assert "row_softmax" in d2k("tasks").stdout
    shown = d2k("task", "row_softmax")
    assert shown.exit_code == 0 and "Guidance of L2." in shown.stdout
    assert "check_small" in shown.stdout
    assert _json(d2k("task", "row_softmax", "--json"))["slug"] == "row_softmax"


def test_an_unknown_task_is_404_in_one_line(portal, d2k):
    result = d2k("task", "nope")
    assert result.exit_code == 1
    assert "HTTP 404" in result.stderr and "nope" in result.stderr


def test_for_agent_prints_the_served_prompt_byte_for_byte(portal, d2k, client):
    result = d2k("task", "row_softmax", "--for-agent", "--levels", "L1,L2")
    served = client.get("/api/tasks/row_softmax/prompt/?levels=L1,L2").json()
    assert result.exit_code == 0
    assert result.stdout == served["text"]
    assert "Guidance of L2." in result.stdout and "Guidance of L3." not in result.stdout
    as_json = _json(d2k("task", "row_softmax", "--for-agent", "--json"))
    assert as_json["condition"] == "none" and "Guidance of" not in as_json["text"]


def test_submit_wait_shows_the_per_workload_table(portal, d2k, tmp_path, fake_cli):
    kernel = tmp_path / "kernel.py"
    kernel.write_text(KERNEL)
    result = d2k("submit", "--task", "row_softmax", str(kernel), "--wait")
    assert result.exit_code == 0, result.output
    assert "correct" in result.stdout and "check_small" in result.stdout
    assert len(fake_cli.calls) == 1
    pk = int(result.stdout.split()[1])
    status = _json(d2k("status", str(pk), "--json"))
    assert status["evaluation"]["status"] == "correct"
    assert d2k("status", str(pk), "--wait").exit_code == 0


def test_a_refused_submission_is_one_line(portal, d2k, tmp_path):
    kernel = tmp_path / "kernel.py"
    kernel.write_text(KERNEL)
    result = d2k("submit", "--task", "no_such_task", str(kernel))
    assert result.exit_code == 1
    assert "HTTP 400" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def _write(folder, files):
    for path, content in files.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return folder


def test_pack_run_then_submit_run_then_runs_and_run(portal, d2k, tmp_path, fake_cli):
    folder = _write(tmp_path / "myrun", good_files("row_softmax", "layernorm_fwd"))
    packed = d2k("pack-run", str(folder))
    assert packed.exit_code == 0, packed.output
    assert "2 kernel(s)" in packed.stdout
    uploaded = d2k("submit-run", str(tmp_path / "myrun.zip"))
    assert uploaded.exit_code == 0, uploaded.output
    assert "uploading myrun.zip" in uploaded.stderr
    run_id = int(uploaded.stdout.split()[1].rstrip(":"))
    assert [r["id"] for r in _json(d2k("runs", "--json"))] == [run_id]
    detail = _json(d2k("run", str(run_id), "--json"))
    assert sorted(t["task"] for t in detail["tasks"]) == ["layernorm_fwd", "row_softmax"]
    assert "row_softmax" in d2k("run", str(run_id)).stdout


def test_pack_run_refuses_what_the_portal_refuses_and_writes_nothing(portal, d2k, tmp_path):
    files = {**good_files(), "kernels/softmax_v2.py": KERNEL}
    folder = _write(tmp_path / "bad", files)
    result = d2k("pack-run", str(folder))
    assert result.exit_code == 1
    assert "kernels/softmax_v2.py: Unknown task 'softmax_v2'." in result.stderr
    assert not (tmp_path / "bad.zip").exists()


def test_the_clients_limits_are_the_portals_defaults(settings):
    from runs.services import bundle_limits

    # Two copies of one class (runformat, d2k_client.runformat): compare the values.
    assert dataclasses.asdict(bundle_limits()) == dataclasses.asdict(DEFAULT_LIMITS)


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_client_and_server_reject_the_same_damaged_bundles(
    damage, uploader, run_tasks, fake_cli, settings, django_capture_on_commit_callbacks
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from runs.services import bundle_limits

    build, _, overrides = DAMAGED[damage]
    for name, value in overrides.items():
        setattr(settings, name, value)
    data = build()
    bundle = SimpleUploadedFile("run.zip", data, content_type="application/zip")
    with django_capture_on_commit_callbacks(execute=True):
        response = uploader.post("/api/runs/", {"bundle": bundle}, format="multipart")
    assert response.status_code == 400
    local = bundle_check(
        data, task_slugs=frozenset(t.slug for t in run_tasks), limits=bundle_limits()
    )
    if damage == "oversize bundle":
        # The API refuses it by its upload size before reading it, in the same words.
        assert [e.message for e in local.errors] == [
            e["message"] for e in response.json()["errors"]
        ]
    else:
        assert [e.as_dict() for e in local.errors] == response.json()["errors"]


def test_check_without_the_evaluator_says_how_to_install_it(d2k, tmp_path, monkeypatch):
    monkeypatch.setattr("d2k_client.cli.EVALUATOR_MODULE", "no_such_evaluator")
    kernel = tmp_path / "kernel.py"
    kernel.write_text(KERNEL)
    result = d2k("check", "--task", "row_softmax", str(kernel))
    assert result.exit_code == 1
    assert "d2k check needs the portal's evaluator, which is not installed" in result.stderr
    assert "pip install -e '.[evaluator]'" in result.stderr


def test_check_runs_the_evaluator_cli_in_its_own_process(d2k, tmp_path, monkeypatch, capfd):
    # A stand-in for `python -m evaluator`: prints its arguments, exits with the
    # status a failed verdict has, so that the client's exit status is the child's.
    fake = tmp_path / "path" / "fake_evaluator"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(
        "import os, sys\nprint('evaluator', os.getpid(), sys.argv[1:])\nsys.exit(3)\n"
    )
    monkeypatch.syspath_prepend(str(fake.parent))
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    monkeypatch.setattr("d2k_client.cli.EVALUATOR_MODULE", "fake_evaluator")
    kernel = tmp_path / "kernel.py"
    kernel.write_text(KERNEL)
    result = d2k("check", "--task", "row_softmax", "--mode", "interpret", "--json", str(kernel))
    assert result.exit_code == 3
    shown = capfd.readouterr().out
    name, pid, argv = shown.split(" ", 2)
    assert name == "evaluator" and int(pid) != os.getpid()
    assert argv.strip() == str(
        ["check", str(kernel), "--task", "row_softmax", "--mode", "interpret", "--json"]
    )


ROWS = [
    {"rank": 1, "model": "model-x", "condition": "L1+L2+L3", "speedup": 2.5},
    {"rank": 2, "model": "model-y", "condition": "none", "speedup": 1.25},
]


def _board_answer(method, path, query):
    """GET /api/leaderboard/ as the board API's contract says: JSON rows, or CSV with
    ?format=csv."""
    if path != "/api/leaderboard/":
        return NOT_FOUND
    if query.get("format") == "csv":
        return 200, "text/csv", b"rank,model,condition,speedup\n1,model-x,L1+L2+L3,2.5\n"
    return json_reply({"results": ROWS})


@pytest.fixture
def board():
    fake = FakeApi(_board_answer)
    yield fake
    fake.close()


def test_leaderboard_prints_table_csv_and_json_and_passes_filters(board, d2k):
    shown = d2k("--server", board.url, "leaderboard", "--task", "row_softmax")
    assert shown.exit_code == 0, shown.output
    assert "model-x" in shown.stdout and "L1+L2+L3" in shown.stdout
    csv = d2k("--server", board.url, "leaderboard", "--format", "csv", "--condition", "none")
    assert csv.stdout == "rank,model,condition,speedup\n1,model-x,L1+L2+L3,2.5\n"
    as_json = _json(
        d2k("--server", board.url, "leaderboard", "--format", "json", "--filter", "hardware=H200")
    )
    assert as_json == {"results": ROWS}
    assert [query for _, _, query in board.requests] == [
        {"task": "row_softmax"},
        {"condition": "none", "format": "csv"},
        {"hardware": "H200"},
    ]


def test_a_bad_filter_is_one_line(board, d2k):
    result = d2k("--server", board.url, "leaderboard", "--filter", "oops")
    assert result.exit_code == 1 and "KEY=VALUE" in result.stderr


def test_login_takes_the_server_after_the_command_as_the_docs_write_it(live_server, d2k, db):
    from tests.factories import UserFactory, api_token_key

    token = api_token_key(UserFactory())

    result = d2k("login", "--server", live_server.url, "--token", token)

    assert result.exit_code == 0, result.output
    assert json.loads(config_path().read_text())["default_server"] == live_server.url


def test_leaderboard_csv_from_the_portal_is_the_csv_export(portal, d2k, client):
    from tests.leaderboard.test_board_views import scored

    scored(model="model-csv")

    result = d2k("leaderboard", "--format", "csv", "--model", "model-csv")

    assert result.exit_code == 0, result.output
    export = client.get("/api/leaderboard/", {"model": "model-csv", "format": "csv"})
    assert result.stdout == export.content.decode()
    assert "model-csv" in result.stdout.splitlines()[1]

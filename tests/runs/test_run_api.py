"""POST /api/runs/ and GET /api/runs/<id>/: the upload door and the run as JSON."""

import zipfile

import pytest
from django.core.files.storage import default_storage
from rest_framework.test import APIClient

from evaluator.models import Evaluation
from runs.models import Proposal, Run, Trace
from submissions.models import Submission
from tests.factories import RunFactory
from tests.runs.bundles import KERNEL, good_files, make_zip, manifest

pytestmark = pytest.mark.django_db


def stored_files(directory="runs"):
    if not default_storage.exists(directory):
        return set()
    folders, files = default_storage.listdir(directory)
    found = {f"{directory}/{f}" for f in files}
    for folder in folders:
        found |= stored_files(f"{directory}/{folder}")
    return found


def assert_nothing_stored(before=frozenset()):
    assert stored_files() == set(before)
    assert Run.objects.count() == 0
    assert Submission.objects.count() == 0
    assert Trace.objects.count() == 0
    assert Proposal.objects.count() == 0
    assert Evaluation.objects.count() == 0


def test_a_good_bundle_is_201_with_the_runs_id_and_url(post, uploader, run_tasks, fake_cli):
    response = post(uploader, make_zip(good_files("row_softmax", "layernorm_fwd")))
    assert response.status_code == 201, response.json()
    run = Run.objects.get()
    assert response.json() == {"id": run.pk, "url": f"http://testserver/runs/{run.pk}/"}
    assert run.owner == uploader.user
    assert run.condition == "none" and run.levels == [] and run.turn_budget == 350
    assert run.submissions.count() == 2 and run.traces.count() == 2
    # The test settings evaluate synchronously: every kernel is done, the run complete.
    assert len(fake_cli.calls) == 2
    run.refresh_from_db()
    assert run.state == "complete" and run.finished_at is not None


def test_get_returns_the_run_with_tasks_and_its_pair(post, uploader, run_tasks, fake_cli):
    first = post(uploader, make_zip(good_files("row_softmax"))).json()["id"]
    files = good_files("row_softmax", "layernorm_fwd", levels=["L1", "L2", "L3"])
    second = post(uploader, make_zip(files)).json()["id"]
    body = APIClient().get(f"/api/runs/{second}/").json()
    assert body["pair"] == first
    assert body["condition"] == "L1+L2+L3"
    assert body["state"] == "complete"
    assert body["is_example"] is False and body["example_label"] is None
    rows = {row["task"]: row for row in body["tasks"]}
    assert set(rows) == {"row_softmax", "layernorm_fwd"}
    assert rows["row_softmax"]["result"]["status"] == "correct"
    assert rows["row_softmax"]["result"]["is_finished"] is True
    assert rows["row_softmax"]["pair_result"]["status"] == "correct"
    assert rows["layernorm_fwd"]["pair_result"]["status"] == "missing"
    assert rows["layernorm_fwd"]["pair_result"]["is_finished"] is False
    trace = rows["row_softmax"]["result"]["trace"]
    assert trace["turns_used"] == 1 and trace["tokens_in"] == 10 and trace["final_submit_turn"] == 1
    assert "<strong>everything</strong>" in rows["row_softmax"]["result"]["proposal_html"]
    assert APIClient().get(f"/api/runs/{first}/").json()["pair"] == second


def test_a_private_run_is_404_to_others(post, uploader, run_tasks, fake_cli):
    pk = post(uploader, make_zip(good_files()), is_public="false").json()["id"]
    assert APIClient().get(f"/api/runs/{pk}/").status_code == 404
    assert uploader.get(f"/api/runs/{pk}/").status_code == 200
    assert Submission.objects.get().is_public is False


def test_upload_without_a_token_is_401(post, run_tasks, storage_before):
    assert post(APIClient(), make_zip(good_files())).status_code == 401
    assert_nothing_stored(storage_before)


def test_a_request_without_the_bundle_field_is_400_in_the_error_format(post, uploader, run_tasks):
    response = uploader.post("/api/runs/", {"file": "x"}, format="multipart")
    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            {
                "file": None,
                "line": None,
                "message": "Send the run bundle (a zip) as the multipart field `bundle`.",
            }
        ]
    }


def _bomb():
    files = good_files()
    files["traces/row_softmax.jsonl"] = "\n" * (3 * 1024 * 1024)
    return make_zip(files)


def _bomb_message():
    import io

    info = zipfile.ZipFile(io.BytesIO(_bomb())).getinfo("traces/row_softmax.jsonl")
    ratio = info.file_size / info.compress_size
    return (
        f"The entry expands {ratio:,.0f}-fold ({info.compress_size:,} to {info.file_size:,} "
        "bytes); the limit is 100-fold."
    )


def _with(**changes):
    files = good_files()
    for path, content in changes.items():
        if content is None:
            files.pop(path)
        else:
            files[path] = content
    return files


DAMAGED = {
    "traversal": (
        lambda: make_zip({**good_files(), "kernels/../../etc/passwd": "x"}),
        [("kernels/../../etc/passwd", None, "Paths may not contain `..`.")],
        {},
    ),
    "absolute path": (
        lambda: make_zip({**good_files(), "/etc/cron.d/evil": "x"}),
        [
            (
                "/etc/cron.d/evil",
                None,
                "Absolute paths are not allowed; paths are relative to the bundle root.",
            )
        ],
        {},
    ),
    "backslash path": (
        lambda: make_zip({**good_files(), "kernels\\layernorm_fwd.py": KERNEL}),
        [
            (
                "kernels\\layernorm_fwd.py",
                None,
                "Use forward slashes in paths; backslashes are not allowed.",
            )
        ],
        {},
    ),
    "symlink": (
        lambda: make_zip(
            _with(**{"kernels/row_softmax.py": None}),
            symlinks={"kernels/row_softmax.py": "/etc/passwd"},
        ),
        [("kernels/row_softmax.py", None, "Symbolic links are not allowed in a bundle.")],
        {},
    ),
    "zip bomb by ratio": (_bomb, None, {}),
    "total uncompressed size": (
        lambda: make_zip(good_files()),
        "unpacks",
        {"D2K_RUN_BUNDLE_MAX_UNCOMPRESSED_BYTES": 500},
    ),
    "non-UTF-8 kernel": (
        lambda: make_zip(_with(**{"kernels/row_softmax.py": b"x = 1\n" + b"\xe9t\xe9\n"})),
        [
            (
                "kernels/row_softmax.py",
                2,
                "The file is not UTF-8 text (invalid byte at offset 6).",
            )
        ],
        {},
    ),
    "non-UTF-8 trace": (
        lambda: make_zip(_with(**{"traces/row_softmax.jsonl": b'{"type": "start"}\n\xff\n'})),
        [
            (
                "traces/row_softmax.jsonl",
                2,
                "The file is not UTF-8 text (invalid byte at offset 18).",
            )
        ],
        {},
    ),
    "unknown task": (
        lambda: make_zip(_with(**{"kernels/softmax_fast.py": KERNEL})),
        [("kernels/softmax_fast.py", None, "Unknown task 'softmax_fast'.")],
        {},
    ),
    "bad manifest JSON": (
        lambda: make_zip(_with(**{"manifest.json": '{\n  "schema": 1,\n  "model": \n}'})),
        [("manifest.json", 4, "Invalid JSON: Expecting value.")],
        {},
    ),
    "manifest schema errors": (
        lambda: make_zip(
            _with(**{"manifest.json": manifest(schema=2, levels=["L1", "L1"], turn_budget=0)})
        ),
        [
            ("manifest.json", None, "levels: ['L1', 'L1'] has non-unique elements"),
            ("manifest.json", None, "schema: 1 was expected"),
            ("manifest.json", None, "turn_budget: 0 is less than the minimum of 1"),
        ],
        {},
    ),
    "unknown manifest key": (
        lambda: make_zip(_with(**{"manifest.json": manifest(modle="typo")})),
        [
            (
                "manifest.json",
                None,
                "the document: Additional properties are not allowed ('modle' was unexpected)",
            )
        ],
        {},
    ),
    "missing manifest": (
        lambda: make_zip(_with(**{"manifest.json": None})),
        [("manifest.json", None, "The bundle has no manifest.json at its root.")],
        {},
    ),
    "duplicate kernel names": (
        lambda: make_zip([*good_files().items(), ("kernels/row_softmax.py", KERNEL)]),
        [("kernels/row_softmax.py", None, "The name appears twice in the bundle.")],
        {},
    ),
    "names that differ only by case": (
        lambda: make_zip(_with(**{"Kernels/row_softmax.py": KERNEL})),
        [
            (
                "Kernels/row_softmax.py",
                None,
                "The name differs from 'kernels/row_softmax.py' only by case.",
            )
        ],
        {},
    ),
    "oversize bundle": (
        lambda: make_zip(good_files()),
        "bundle is",
        {"D2K_RUN_BUNDLE_MAX_BYTES": 300},
    ),
    "oversize kernel": (
        lambda: make_zip(_with(**{"kernels/layernorm_fwd.py": KERNEL * 20})),
        [("kernels/layernorm_fwd.py", None, "The file is over the limit of 1,000 bytes.")],
        {"D2K_MAX_UPLOAD_BYTES": 1000},
    ),
    "too many files": (
        lambda: make_zip(good_files()),
        [(None, None, "The bundle holds 4 files; the limit is 3.")],
        {"D2K_RUN_BUNDLE_MAX_FILES": 3},
    ),
    "not a zip": (
        lambda: b"PK\x03\x04 this is not really a zip",
        [(None, None, "The upload is not a zip archive.")],
        {},
    ),
    "unexpected file": (
        lambda: make_zip(_with(**{"kernels/notes.txt": "x"})),
        [
            (
                "kernels/notes.txt",
                None,
                "Unexpected file: a bundle holds manifest.json, kernels/<task>.py, "
                "traces/<task>.jsonl and proposals/<task>.md only.",
            )
        ],
        {},
    ),
    "empty kernel": (
        lambda: make_zip(_with(**{"kernels/row_softmax.py": "  \n"})),
        [("kernels/row_softmax.py", None, "The kernel file is empty.")],
        {},
    ),
    "no kernels": (
        lambda: make_zip(_with(**{"kernels/row_softmax.py": None})),
        [(None, None, "The bundle has no kernels/<task>.py files.")],
        {},
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_a_damaged_bundle_is_400_with_precise_messages_and_nothing_stored(
    post, damage, uploader, run_tasks, fake_cli, settings, storage_before
):
    build, expected, overrides = DAMAGED[damage]
    for name, value in overrides.items():
        setattr(settings, name, value)
    data = build()
    response = post(uploader, data)
    assert response.status_code == 400, response.json()
    errors = [(e["file"], e["line"], e["message"]) for e in response.json()["errors"]]
    if damage == "zip bomb by ratio":
        expected = [("traces/row_softmax.jsonl", None, _bomb_message())]
    elif damage == "oversize bundle":
        expected = [(None, None, f"The bundle is {len(data):,} bytes; the limit is 300 bytes.")]
    elif damage == "total uncompressed size":
        with zipfile.ZipFile(__import__("io").BytesIO(data)) as zf:
            total = sum(i.file_size for i in zf.infolist())
        expected = [(None, None, f"The bundle unpacks to {total:,} bytes; the limit is 500 bytes.")]
    assert sorted(errors, key=str) == sorted(expected, key=str)
    assert_nothing_stored(storage_before)
    assert fake_cli.calls == []


def test_a_kernel_the_submission_service_refuses_rolls_everything_back(
    post, uploader, run_tasks, fake_cli, storage_before
):
    files = good_files("row_softmax", "layernorm_fwd")
    files["kernels/layernorm_fwd.py"] = "x = '\x00'\n"
    response = post(uploader, make_zip(files))
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "file": "kernels/layernorm_fwd.py",
            "line": None,
            "message": "The file looks binary; a kernel is a Python source file.",
        }
    ]
    assert_nothing_stored(storage_before)


def test_the_schema_documents_the_run_endpoints(client):
    schema = client.get("/api/schema/?format=json").json()
    assert "/api/runs/" in schema["paths"]
    assert "/api/runs/{id}/" in schema["paths"]


def test_an_unknown_run_is_404():
    assert APIClient().get("/api/runs/999/").status_code == 404
    RunFactory()


def test_the_list_shows_public_runs_and_the_callers_own(post, uploader, run_tasks, fake_cli):
    public = post(uploader, make_zip(good_files())).json()["id"]
    private = post(uploader, make_zip(good_files()), is_public="false").json()["id"]
    anonymous = [r["id"] for r in APIClient().get("/api/runs/").json()["results"]]
    own = uploader.get("/api/runs/").json()["results"]
    assert anonymous == [public]
    assert [r["id"] for r in own] == [private, public]
    assert own[0]["condition"] == "none" and own[0]["owner"] == "lab-bot"

"""Private until published, on every door: the upload pages, the API and the client.

An upload that says nothing about visibility is read by its owner only; an anonymous
reader gets the same 404 as for an id that does not exist, on the page and in the API."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from runs.models import Run
from submissions.models import Submission
from tests.runs.bundles import KERNEL, good_files, make_zip


def _bundle() -> bytes:
    return make_zip(good_files("row_softmax", "layernorm_fwd"))


def _signed_in() -> Client:
    from accounts.models import User

    browser = Client()
    browser.force_login(User.objects.get(username="cli-user"))
    return browser


def _by_token(token: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return api


def _submission_page(token, d2k, tmp_path):
    kernel = SimpleUploadedFile("kernel.py", KERNEL.encode(), content_type="text/x-python")
    response = _signed_in().post("/submissions/new/", {"task": "row_softmax", "file": kernel})
    assert response.status_code == 302, response.content
    return Submission.objects.get()


def _run_page(token, d2k, tmp_path):
    bundle = SimpleUploadedFile("run.zip", _bundle(), content_type="application/zip")
    response = _signed_in().post("/runs/new/", {"bundle": bundle})
    assert response.status_code == 302, response.content
    return Run.objects.get()


def _submission_api(token, d2k, tmp_path):
    response = _by_token(token).post(
        "/api/submissions/", {"task": "row_softmax", "source": KERNEL}, format="json"
    )
    assert response.status_code == 201, response.content
    return Submission.objects.get(pk=response.json()["id"])


def _run_api(token, d2k, tmp_path):
    bundle = SimpleUploadedFile("run.zip", _bundle(), content_type="application/zip")
    response = _by_token(token).post("/api/runs/", {"bundle": bundle}, format="multipart")
    assert response.status_code == 201, response.content
    return Run.objects.get(pk=response.json()["id"])


def _submission_client(token, d2k, tmp_path):
    kernel = tmp_path / "kernel.py"
    kernel.write_text(KERNEL)
    result = d2k("submit", "--task", "row_softmax", str(kernel), "--json")
    assert result.exit_code == 0, result.output
    return Submission.objects.get(pk=json.loads(result.stdout)["id"])


def _run_client(token, d2k, tmp_path):
    bundle = tmp_path / "run.zip"
    bundle.write_bytes(_bundle())
    result = d2k("submit-run", str(bundle), "--json")
    assert result.exit_code == 0, result.output
    return Run.objects.get(pk=json.loads(result.stdout)["id"])


DOORS = {
    "upload page": _submission_page,
    "run upload page": _run_page,
    "POST /api/submissions/": _submission_api,
    "POST /api/runs/ bundle": _run_api,
    "d2k submit": _submission_client,
    "d2k submit-run": _run_client,
}


def _addresses(upload) -> list[str]:
    """The upload's page and API address; for a run, its kernels' too."""
    if isinstance(upload, Run):
        kernels = Submission.objects.filter(run=upload)
        assert kernels.count() == 2
        return [f"/runs/{upload.pk}/", f"/api/runs/{upload.pk}/", *_addresses_of(kernels)]
    return _addresses_of([upload])


def _addresses_of(submissions) -> list[str]:
    return [a for s in submissions for a in (f"/submissions/{s.pk}/", f"/api/submissions/{s.pk}/")]


@pytest.mark.parametrize("door", list(DOORS))
def test_an_upload_that_says_nothing_is_private_through_every_door(
    door, portal, d2k, tmp_path, fake_cli
):
    upload = DOORS[door](portal, d2k, tmp_path)

    assert upload.is_public is False
    for address in _addresses(upload):
        assert Client().get(address).status_code == 404, address
        assert _signed_in().get(address).status_code == 200, address


@pytest.mark.parametrize(
    ("flags", "public"), [(["--public"], True), (["--private"], False), ([], False)]
)
def test_the_client_publishes_only_when_told_to(flags, public, portal, d2k, tmp_path, fake_cli):
    kernel, bundle = tmp_path / "kernel.py", tmp_path / "run.zip"
    kernel.write_text(KERNEL)
    bundle.write_bytes(make_zip(good_files("layernorm_fwd")))

    submitted = d2k("submit", "--task", "row_softmax", str(kernel), "--json", *flags)
    uploaded = d2k("submit-run", str(bundle), "--json", *flags)

    submission = json.loads(submitted.stdout)
    run = json.loads(uploaded.stdout)
    assert submission["is_public"] is public
    assert Run.objects.get(pk=run["id"]).is_public is public
    expected = 200 if public else 404
    assert Client().get(f"/submissions/{submission['id']}/").status_code == expected
    assert Client().get(f"/api/runs/{run['id']}/").status_code == expected


def test_a_manifest_cannot_publish_a_run(uploader, run_tasks):
    files = good_files()
    manifest = json.loads(files["manifest.json"])
    files["manifest.json"] = json.dumps({**manifest, "is_public": True})
    bundle = SimpleUploadedFile("run.zip", make_zip(files), content_type="application/zip")

    response = uploader.post("/api/runs/", {"bundle": bundle}, format="multipart")

    assert response.status_code == 400
    assert "is_public" in json.dumps(response.json()["errors"])
    assert not Run.objects.exists()

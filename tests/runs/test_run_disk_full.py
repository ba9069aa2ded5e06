"""A full disk mid-upload: a 507 with a sentence on the API and the page, no partial
trace file, no folder and no rows left behind."""

import errno
from pathlib import Path

import pytest
from django.core.files.storage import FileSystemStorage

from tests.factories import UserFactory
from tests.runs.bundles import good_files, make_zip
from tests.runs.test_run_api import assert_nothing_stored

pytestmark = pytest.mark.django_db


@pytest.fixture
def disk_full(monkeypatch, on_disk):
    """The disk fills while the second trace is written: half of it reaches the disk."""
    saved = FileSystemStorage._save
    calls = []

    def save(self, name, content):
        calls.append(name)
        if len(calls) < 2:
            return saved(self, name, content)
        path = Path(self.path(name))
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.read()
        path.write_bytes(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(FileSystemStorage, "_save", save)
    return on_disk


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*")) if root.exists() else []


def test_a_full_disk_is_507_on_the_api_with_nothing_left(post, uploader, run_tasks, disk_full):
    response = post(uploader, make_zip(good_files("row_softmax", "layernorm_fwd")))
    assert response.status_code == 507
    assert "no room to store this upload" in response.json()["detail"]
    assert_nothing_stored()
    assert _files(disk_full / "runs") == []


def test_a_full_disk_is_507_on_the_page(client, run_tasks, disk_full):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(UserFactory())
    bundle = SimpleUploadedFile("run.zip", make_zip(good_files("row_softmax", "layernorm_fwd")))
    response = client.post("/runs/new/", {"bundle": bundle})
    assert response.status_code == 507
    assert "no room to store this upload" in response.content.decode()
    assert_nothing_stored()
    assert _files(disk_full / "runs") == []

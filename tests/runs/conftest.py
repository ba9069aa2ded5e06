"""Fixtures of the run tests: the upload door as API callers use it, the files stored."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.runs.test_run_api import stored_files


@pytest.fixture
def post(django_capture_on_commit_callbacks):
    """Upload as the API's callers do; the queue's on-commit work runs (synchronously)."""

    def upload(client, data: bytes, **extra):
        extra.setdefault("is_public", "true")  # these tests read the runs as the public does
        bundle = SimpleUploadedFile("run.zip", data, content_type="application/zip")
        with django_capture_on_commit_callbacks(execute=True):
            return client.post("/api/runs/", {"bundle": bundle, **extra}, format="multipart")

    return upload


@pytest.fixture
def storage_before():
    return stored_files()


@pytest.fixture
def on_disk(settings, tmp_path):
    """Trace files on a real file system, where an empty folder left behind shows."""
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "media")},
        },
    }
    return tmp_path / "media"

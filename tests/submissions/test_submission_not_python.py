"""A file that is not Python is refused as such, and an interpret-mode evaluation says on
its page that no speed was measured."""

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from submissions.models import Submission
from tests.factories import EvaluationFactory, UserFactory, token_client
from tests.runs.bundles import KERNEL

pytestmark = pytest.mark.django_db


def _zip(*, compress: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compress) as archive:
        archive.writestr("kernel.py", KERNEL)
    return buffer.getvalue()


@pytest.mark.parametrize("compress", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_zip_given_as_a_kernel_is_not_a_python_file(run_tasks, compress):
    kernel = SimpleUploadedFile("kernel.zip", _zip(compress=compress))
    response = token_client(UserFactory()).post(
        "/api/submissions/", {"task": "row_softmax", "file": kernel}, format="multipart"
    )
    assert response.status_code == 400
    assert "not a Python file" in str(response.json())
    assert not Submission.objects.exists()


def test_the_upload_page_says_a_zip_is_not_a_python_file(client, run_tasks):
    client.force_login(UserFactory())
    upload = SimpleUploadedFile("run.zip", _zip(compress=zipfile.ZIP_STORED))
    response = client.post(reverse("submissions:upload"), {"task": "row_softmax", "file": upload})
    assert response.status_code == 400
    assert "zip archive, not a Python file" in response.content.decode()


def test_a_control_character_is_named_with_its_line(run_tasks):
    response = token_client(UserFactory()).post(
        "/api/submissions/",
        {"task": "row_softmax", "source": KERNEL + "\n\x03\n"},
        format="json",
    )
    assert response.status_code == 400
    assert "U+0003" in str(response.json()) and "not a Python file" in str(response.json())


@pytest.mark.parametrize(("mode", "banner"), [("interpret", True), ("cuda", False)])
def test_an_interpret_mode_evaluation_says_no_speed_was_measured(client, mode, banner):
    evaluation = EvaluationFactory(mode=mode)
    page = client.get(reverse("submissions:detail", args=[evaluation.submission_id]))
    assert ("No speed was measured" in page.content.decode()) is banner

"""Hostile input and limits: oversized bodies, sizes in words, quotas, error pages,
production settings."""

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.sizes import size_human
from evaluator.models import Evaluation
from submissions.models import Submission
from tests.factories import EvaluationFactory, UserFactory, token_client

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1,023 bytes"),
        (1024, "1 KiB"),
        (524288, "512 KiB"),
        (524289, "512 KiB"),
        (1536 * 1024, "1.5 MiB"),
        (50 * 1024 * 1024, "50 MiB"),
        (3 * 1024**3, "3 GiB"),
    ],
)
def test_sizes_read_as_people_read_them(n, text):
    assert size_human(n) == text


@pytest.mark.django_db
def test_a_50_mb_kernel_file_through_the_api_names_its_real_size(eval_task_version, settings):
    settings.D2K_MAX_REQUEST_BYTES = 64 * 1024 * 1024
    big = SimpleUploadedFile("big.py", b"#" * (50 * 1024 * 1024))
    response = token_client(UserFactory()).post(
        "/api/submissions/", {"task": "row_softmax", "file": big}, format="multipart"
    )
    assert response.status_code == 400
    assert "The file is 50 MiB; the limit is 512 KiB." in str(response.json())


@pytest.mark.django_db
@pytest.mark.parametrize("door", ["api", "page"])
def test_a_body_over_the_request_limit_is_413_in_the_doors_format(eval_task_version, door):
    user = UserFactory()
    body = {"task": "row_softmax", "source": "#" * (5 * 1024 * 1024)}
    if door == "api":
        response = token_client(user).post("/api/submissions/", body, format="json")
        assert response.status_code == 413
        assert "the limit is" in response.json()["detail"]
    else:
        client = Client()
        client.force_login(user)
        response = client.post(reverse("submissions:upload"), body)
        assert response.status_code == 413
        assert "<html" in response.content.decode() and "the limit is" in response.content.decode()
    assert not Submission.objects.exists()


@pytest.mark.django_db
def test_form_fields_over_djangos_memory_limit_are_413_not_djangos_page(
    eval_task_version, settings
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    client = Client()
    client.force_login(UserFactory())
    file = SimpleUploadedFile("k.py", SOURCE.encode())
    response = client.post(
        reverse("submissions:upload"), {"task": "row_softmax", "file": file, "source": "#" * 4096}
    )
    assert response.status_code == 413
    assert "upload large sources as a file" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("source", "message"),
    [
        (b"\xff\xfe not utf-8", "not UTF-8"),
        (b"x = 1\x00", "binary"),
        (("x = '" + "a" * 20_000 + "'\n").encode(), "Line 1 is 20,006 characters"),
        (b"   \n", "empty"),
        (b"def f(:\n", "syntax error"),
    ],
)
def test_hostile_kernel_files_are_400_with_the_reason(eval_task_version, source, message):
    response = token_client(UserFactory()).post(
        "/api/submissions/",
        {"task": "row_softmax", "file": SimpleUploadedFile("k.py", source)},
        format="multipart",
    )
    assert response.status_code == 400
    assert message in str(response.json())


@pytest.mark.django_db
def test_a_wrong_task_is_400(eval_task_version):
    response = token_client(UserFactory()).post(
        "/api/submissions/", {"task": "no_such_task", "source": SOURCE}, format="json"
    )
    assert response.status_code == 400 and "Unknown task" in str(response.json())


@pytest.mark.django_db
def test_the_daily_upload_quota_is_429_with_retry_after(eval_task_version, settings):
    settings.D2K_QUOTA_UPLOADS_PER_DAY = 2
    user = UserFactory()
    api = token_client(user)
    for n in range(2):
        body = {"task": "row_softmax", "source": SOURCE + f"# {n}\n"}
        assert api.post("/api/submissions/", body, format="json").status_code == 201
    Submission.objects.filter(owner=user).update(created_at=timezone.now() - timedelta(hours=23))
    response = api.post(
        "/api/submissions/", {"task": "row_softmax", "source": SOURCE + "# 3\n"}, format="json"
    )
    assert response.status_code == 429
    assert 3000 < int(response["Retry-After"]) <= 3601
    assert "the limit is 2" in response.json()["detail"]


@pytest.mark.django_db
def test_uploads_that_failed_for_our_infrastructure_do_not_count(eval_task_version, settings):
    settings.D2K_QUOTA_UPLOADS_PER_DAY = 1
    user = UserFactory()
    EvaluationFactory(submission__owner=user, status="worker_error")
    response = token_client(user).post(
        "/api/submissions/", {"task": "row_softmax", "source": SOURCE}, format="json"
    )
    assert response.status_code == 201


@pytest.mark.django_db
def test_the_queued_evaluations_quota_is_429_on_the_api_and_the_page(eval_task_version, settings):
    settings.D2K_QUOTA_QUEUED_EVALUATIONS = 1
    user = UserFactory()
    EvaluationFactory(submission__owner=user, status="queued", finished_at=None)
    # Re-queued after a worker failure: never counted.
    EvaluationFactory(submission__owner=user, status="queued", attempts=1, finished_at=None)
    response = token_client(user).post(
        "/api/submissions/", {"task": "row_softmax", "source": SOURCE}, format="json"
    )
    assert response.status_code == 429 and response["Retry-After"] == "60"
    client = Client()
    client.force_login(user)
    page = client.post(reverse("submissions:upload"), {"task": "row_softmax", "source": SOURCE})
    assert page.status_code == 429 and "at most 1 may wait" in page.content.decode()
    assert Evaluation.objects.count() == 2


@pytest.mark.django_db
def test_staff_have_no_quota(eval_task_version, settings):
    settings.D2K_QUOTA_QUEUED_EVALUATIONS = 0
    response = token_client(UserFactory(is_staff=True)).post(
        "/api/submissions/", {"task": "row_softmax", "source": SOURCE}, format="json"
    )
    assert response.status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "json"), [("/no/such/page/", False), ("/api/no/such/", True)])
def test_unknown_urls_get_the_portals_404_in_the_doors_format(client, path, json):
    response = client.get(path)
    assert response.status_code == 404
    body = response.content.decode()
    assert "URLconf" not in body and "urlpatterns" not in body
    if json:
        assert response.json() == {"detail": "Not found."}
    else:
        assert "site-header" in body


def _settings_run(module, env, code="print('ok')"):
    script = f"import django; django.setup(); {code}"
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": module, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_dev_settings_have_debug_off_unless_asked():
    done = _settings_run(
        "d2kportal.settings.dev", {}, "from django.conf import settings; print(settings.DEBUG)"
    )
    assert done.stdout.strip() == "False", done.stderr


@pytest.mark.parametrize(
    "secret",
    [
        "",
        "change-me",
        "change-me-to-a-long-random-value",
        "insecure-development-key-change-me",
        "short-but-random-Zq8",
        "a" * 60,
    ],
)
def test_production_refuses_a_placeholder_secret(secret):
    done = _settings_run(
        "d2kportal.settings.production",
        {"D2K_SECRET_KEY": secret, "D2K_DATABASE_URL": "sqlite:////tmp/x.sqlite3"},
    )
    assert done.returncode != 0 and "D2K_SECRET_KEY" in done.stderr


@pytest.mark.parametrize("seed", [None, "", "short-seed", "a" * 64])
def test_production_refuses_to_start_without_a_hidden_seed(seed):
    import secrets

    environment = {
        "D2K_SECRET_KEY": secrets.token_urlsafe(50),
        "D2K_DATABASE_URL": "sqlite:////tmp/x.sqlite3",
    }
    if seed is not None:
        environment["D2K_HIDDEN_SEED"] = seed
    done = _settings_run("d2kportal.settings.production", environment)
    assert done.returncode != 0 and "D2K_HIDDEN_SEED" in done.stderr


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("sqlite:////tmp/x.sqlite3", "600"),
        ("sqlite:////tmp/x.sqlite3?conn_max_age=0", "0"),
        ("postgres://u@127.0.0.1:5432/d2k", "0"),
        ("postgres://u@127.0.0.1:5432/d2k?conn_max_age=60", "60"),
    ],
)
def test_a_sqlite_connection_is_kept_between_requests_unless_the_url_says(url, kept):
    import secrets

    done = _settings_run(
        "d2kportal.settings.production",
        {
            "D2K_SECRET_KEY": secrets.token_urlsafe(50),
            "D2K_HIDDEN_SEED": secrets.token_hex(32),
            "D2K_DATABASE_URL": url,
        },
        "from django.conf import settings; print(settings.DATABASES['default']['CONN_MAX_AGE'])",
    )
    assert done.stdout.strip() == kept, done.stderr


def test_check_deploy_is_clean_with_a_real_secret():
    import secrets

    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "DJANGO_SETTINGS_MODULE": "d2kportal.settings.production",
            "D2K_SECRET_KEY": secrets.token_urlsafe(50),
            "D2K_DATABASE_URL": "sqlite:////tmp/x.sqlite3",
            "D2K_HIDDEN_SEED": secrets.token_hex(32),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout

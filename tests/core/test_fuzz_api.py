"""The API under schemathesis: thousands of requests generated from its OpenAPI schema,
valid uploads among them, as anonymous, a user and staff. Zero answers may be 5xx.

One test, so that the count covers every operation whatever xdist does with the rest.
D2K_FUZZ_EXAMPLES sets the examples per operation and token (default 60: some
2,700 requests in about two minutes on a 2-core machine).

A second test posts valid run bundles drawn by hypothesis (tests/runs/bundle_strategies.py:
any text an agent may write in a manifest, a trace or a proposal) to both doors that take a
zip, `POST /api/runs/` (its other fields drawn by schemathesis) and the upload page;
D2K_FUZZ_BUNDLES sets how many (default 200).
"""

import io
import itertools
import os
import time
from collections import Counter

import pytest
import schemathesis
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.handlers.wsgi import WSGIHandler
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from werkzeug.datastructures import FileStorage
from werkzeug.test import stream_encode_multipart

from tests.factories import RunFactory, SubmissionFactory, UserFactory, api_token_key
from tests.runs.bundle_strategies import run_bundles
from tests.runs.bundles import good_files, make_zip

EXAMPLES = int(os.environ.get("D2K_FUZZ_EXAMPLES", "60"))
BUNDLES = int(os.environ.get("D2K_FUZZ_BUNDLES", "200"))
MIN_REQUESTS = 2000
VALID = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def _keep_the_connection() -> None:
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)


@pytest.fixture
def wsgi_inside_the_test_transaction():
    """Requests through the bare WSGI handler keep the test's connection open, as Django's
    test client does: its end-of-request hook would close a connection that is inside the
    test's transaction (PostgreSQL then answers 'the connection is closed')."""
    from django.core import signals
    from django.db import close_old_connections

    _keep_the_connection()
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.mark.fuzz
@pytest.mark.django_db
def test_no_generated_request_gets_a_5xx(run_tasks, settings, wsgi_inside_the_test_transaction):
    settings.D2K_QUOTA_UPLOADS_PER_DAY = 10**6
    settings.D2K_QUOTA_QUEUED_EVALUATIONS = 10**6
    user, staff = UserFactory(), UserFactory(is_staff=True)
    staff_key = api_token_key(staff, scopes=("upload", "judge", "moderate"))
    headers = itertools.cycle(
        [
            {},
            {"Authorization": f"Token {api_token_key(user)}"},
            {"Authorization": f"Token {staff_key}"},
            {"Authorization": "Token forged.key"},
        ]
    )
    SubmissionFactory(owner=user, is_public=False)
    SubmissionFactory(is_public=True)
    RunFactory(owner=user, is_public=False)
    schema = schemathesis.openapi.from_wsgi("/api/schema/", WSGIHandler())
    statuses: Counter[int] = Counter()
    server_errors: list[str] = []
    counter = itertools.count()

    def valid_body(case) -> dict:
        """Every third upload is a valid one: a kernel or a run bundle the portal stores
        (the bundle as a file part: what the call sends instead of the drawn body)."""
        n = next(counter)
        if n % 3 or case.method != "POST":
            return {}
        if case.path == "/api/submissions/":
            case.body = {"task": "row_softmax", "source": f"{VALID}# {n}\n"}
            case.media_type = "application/json"
        elif case.path == "/api/runs/":
            body, content_type = _multipart({}, make_zip(good_files()))
            return {"data": body, "headers": {"Content-Type": content_type}}
        return {}

    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @hsettings(
            max_examples=EXAMPLES * 3,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case) -> None:
            extra = valid_body(case)
            response = case.call(headers={**next(headers), **extra.pop("headers", {})}, **extra)
            statuses[response.status_code] += 1
            if response.status_code >= 500:
                server_errors.append(
                    f"{case.method} {case.formatted_path} → {response.status_code}: "
                    f"{response.text[:300]}"
                )

        fuzz()

    total = sum(statuses.values())
    print(f"fuzz: {total} requests, statuses {dict(sorted(statuses.items()))}")
    assert not server_errors, "\n".join(server_errors[:20])
    assert total >= MIN_REQUESTS
    assert statuses[201] > 0  # valid uploads were stored


def _multipart(fields: object, bundle: bytes) -> tuple[bytes, str]:
    parts: dict[str, object] = {
        name: str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in (fields if isinstance(fields, dict) else {}).items()
        if name != "bundle"
    }
    parts["bundle"] = FileStorage(io.BytesIO(bundle), "run.zip", "bundle", "application/zip")
    stream, _, boundary = stream_encode_multipart(parts)
    return stream.read(), f'multipart/form-data; boundary="{boundary}"'


@pytest.mark.fuzz
@pytest.mark.django_db
def test_no_generated_run_bundle_gets_a_5xx(
    run_tasks, settings, wsgi_inside_the_test_transaction, client
):
    settings.D2K_QUOTA_UPLOADS_PER_DAY = 10**6
    settings.D2K_QUOTA_QUEUED_EVALUATIONS = 10**6
    settings.D2K_QUOTA_STORED_BYTES = 10**12
    user, staff = UserFactory(), UserFactory(is_staff=True)
    headers = itertools.cycle(
        [
            {"Authorization": f"Token {api_token_key(user)}"},
            {"Authorization": f"Token {api_token_key(staff, scopes=('upload', 'judge'))}"},
        ]
    )
    client.force_login(user)
    schema = schemathesis.openapi.from_wsgi("/api/schema/", WSGIHandler())
    upload = schema["/api/runs/"]["POST"]
    tasks = tuple(sorted(t.slug for t in run_tasks))
    statuses: Counter[tuple[str, int]] = Counter()
    server_errors: list[str] = []
    refused: list[str] = []

    @given(
        case=upload.as_strategy(),
        bundle=run_bundles(tasks=tasks),
        door=st.sampled_from(["api", "api", "page"]),
        public=st.booleans(),
    )
    @hsettings(
        max_examples=BUNDLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case, bundle, door, public) -> None:
        if door == "api":
            # The drawn form's other fields, with the bundle as a file part (a part
            # without a file name is a plain field to Django, not an upload).
            body, content_type = _multipart(case.body, bundle)
            response = case.call(headers={**next(headers), "Content-Type": content_type}, data=body)
            text = response.text
        else:
            form = {"bundle": SimpleUploadedFile("run.zip", bundle, "application/zip")}
            if public:
                form["is_public"] = "on"
            response = client.post("/runs/new/", form)
            # Django's test client hooks close_old_connections back in after its request;
            # the next bare WSGI request would then close the test's connection.
            _keep_the_connection()
            text = response.content.decode(errors="replace")
            if response.status_code != 302 and response.context is not None:
                # What the page said, for the assertion below: its form's and the bundle's errors.
                form, errors = response.context.get("form"), response.context.get("errors", ())
                said = [form.errors.as_text()] if form and form.errors else []
                text = f"{'; '.join([*said, *map(str, errors)])} (public {public})"
        statuses[door, response.status_code] += 1
        if response.status_code >= 500:
            server_errors.append(f"{door} → {response.status_code}: {text[:300]}")
        elif response.status_code not in (201, 302):
            refused.append(f"{door} → {response.status_code}: {text[:500]}")

    started = time.monotonic()
    fuzz()
    seconds = time.monotonic() - started

    total = sum(statuses.values())
    print(
        f"fuzz bundles: {total} requests in {seconds:.0f} s, "
        f"{len(server_errors)} 5xx, statuses {dict(sorted(statuses.items()))}"
    )
    assert not server_errors, "\n".join(server_errors[:20])
    assert total >= min(BUNDLES, 50)
    # Every bundle is valid, so every one is stored: 201 from the API, a redirect to the
    # run from the page.
    assert statuses["api", 201] + statuses["page", 302] == total, (statuses, refused[:10])

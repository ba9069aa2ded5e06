"""Big run bundles: stored at once (202, `validating`), validated by a django-q2 task,
then accepted as a 201 would have been or rejected with the errors a 400 would list."""

from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone

from evaluator.models import Evaluation
from evaluator.services.pools import pool_queue
from evaluator.signals import worker_round
from runs.models import Proposal, Run, Trace
from runs.services import VALIDATION_MAX_ATTEMPTS, run_bundle_validate, run_validation_resume
from submissions.models import Submission
from submissions.quotas import owner_stored_bytes
from tests.factories import UserFactory, token_client
from tests.runs.bundles import good_files, make_zip, trace_lines
from tests.runs.test_run_api import stored_files

pytestmark = pytest.mark.django_db

NESTED = "[" * 40 + "]" * 40  # deeper than JSON lines may nest
START = {"type": "start", "ts": 0, "task": "layernorm_fwd", "condition": "none"}


@pytest.fixture
def big(settings):
    """Every bundle over 100 bytes is validated in the background."""
    settings.D2K_RUN_SYNC_VALIDATION_BYTES = 100


@pytest.fixture
def upload(django_capture_on_commit_callbacks):
    """POST /api/runs/, keeping the work queued on commit (the validation task) aside:
    returns the response and a function that runs it as a worker would."""

    def send(client, data: bytes, **extra):
        bundle = SimpleUploadedFile("run.zip", data, content_type="application/zip")
        with django_capture_on_commit_callbacks() as queued:
            response = client.post("/api/runs/", {"bundle": bundle, **extra}, format="multipart")

        def work():
            # The test settings run django-q2 tasks synchronously (Q_CLUSTER sync).
            with django_capture_on_commit_callbacks(execute=True):
                for callback in queued:
                    callback()

        return response, work

    return send


def _bad_bundle() -> bytes:
    """row_softmax good, layernorm_fwd's trace refused at line 2: the refusal comes while
    the first task's rows and files are being written."""
    files = good_files("row_softmax", "layernorm_fwd")
    files["traces/layernorm_fwd.jsonl"] = trace_lines(START) + NESTED + "\n"
    return make_zip(files)


def test_a_big_bundle_is_202_validating_then_accepted_as_a_201_would_be(
    big, upload, uploader, run_tasks, fake_cli, client
):
    data = make_zip(good_files("row_softmax", "layernorm_fwd"))
    response, work = upload(uploader, data, is_public="true")
    assert response.status_code == 202, response.content
    run = Run.objects.get()
    assert response.json() == {
        "id": run.pk,
        "url": f"http://testserver/runs/{run.pk}/",
        "api_url": f"http://testserver/api/runs/{run.pk}/",
        "state": "validating",
    }
    assert run.state == "validating" and run.bundle_bytes == len(data)
    assert default_storage.open(run.bundle_file.name).read() == data
    # Public only once accepted; its owner follows it meanwhile.
    assert client.get(f"/runs/{run.pk}/").status_code == 404
    body = uploader.get(f"/api/runs/{run.pk}/").json()
    assert body["state"] == "validating" and body["errors"] == [] and body["tasks"] == []
    uploader_page = client
    uploader_page.force_login(uploader.user)
    page = uploader_page.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-state">validating<' in page and "being validated" in page
    assert not Submission.objects.exists() and not Trace.objects.exists()
    # While it waits, the zip is what the owner's uploads take on the server.
    assert owner_stored_bytes(owner=uploader.user) == len(data)

    work()

    run.refresh_from_db()
    assert run.state == "complete" and run.is_public and run.model == "model-x"
    assert run.submissions.count() == 2 and run.traces.count() == 2
    assert run.proposals.count() == 2 and len(fake_cli.calls) == 2
    assert run.bundle_file.name == "" and run.bundle_bytes == 0
    assert not [name for name in stored_files() if name.endswith("bundle.zip")]
    body = client.get(f"/api/runs/{run.pk}/").json()
    assert body["state"] == "complete" and body["errors"] == []
    assert {row["result"]["status"] for row in body["tasks"]} == {"correct"}

    # The quota counts exactly what a bundle validated at once would leave.
    other = token_client(UserFactory(username="small"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("django.conf.settings.D2K_RUN_SYNC_VALIDATION_BYTES", len(data))
        response, work = upload(other, data, is_public="true")
        work()
    assert response.status_code == 201
    assert owner_stored_bytes(owner=uploader.user) == owner_stored_bytes(owner=other.user) > 0
    assert owner_stored_bytes(owner=uploader.user) == sum(
        len(s.source) for s in run.submissions.all()
    ) + sum(t.stored_bytes for t in run.traces.all())


def test_a_big_invalid_bundle_ends_rejected_with_the_errors_a_400_lists(
    settings, upload, uploader, run_tasks, fake_cli, client
):
    data = _bad_bundle()
    before = stored_files()
    refused, _ = upload(uploader, data)
    assert refused.status_code == 400
    errors = refused.json()["errors"]
    assert [(e["file"], e["line"]) for e in errors] == [("traces/layernorm_fwd.jsonl", 2)]

    settings.D2K_RUN_SYNC_VALIDATION_BYTES = 100
    response, work = upload(uploader, data)
    assert response.status_code == 202
    work()

    run = Run.objects.get()
    assert run.state == "rejected" and run.finished_at is not None
    body = uploader.get(f"/api/runs/{run.pk}/").json()
    assert body["state"] == "rejected" and body["errors"] == errors
    client.force_login(uploader.user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-state">rejected<' in page
    assert "<code>traces/layernorm_fwd.jsonl</code>, line 2: " in page
    assert errors[0]["message"].split("(")[0].strip() in page
    # Nothing half-written: no kernel, trace, proposal or evaluation, no file, no bytes.
    for model in (Submission, Trace, Proposal, Evaluation):
        assert not model.objects.exists(), model
    assert stored_files() == before
    assert run.bundle_bytes == 0 and owner_stored_bytes(owner=uploader.user) == 0


def test_a_rejected_bundle_does_not_count_as_an_upload(
    big, settings, upload, uploader, run_tasks, fake_cli
):
    settings.D2K_QUOTA_UPLOADS_PER_DAY = 1
    response, work = upload(uploader, _bad_bundle())
    assert response.status_code == 202
    work()
    response, work = upload(uploader, make_zip(good_files()))
    assert response.status_code == 202, response.content
    response, work = upload(uploader, make_zip(good_files()))
    assert response.status_code == 429, response.content
    assert Run.objects.count() == 2


def test_a_small_bundle_is_still_201_validated_within_the_request(
    settings, upload, uploader, run_tasks, fake_cli
):
    data = make_zip(good_files())
    settings.D2K_RUN_SYNC_VALIDATION_BYTES = len(data)
    response, _work = upload(uploader, data)
    run = Run.objects.get()
    assert response.status_code == 201
    assert response.json() == {"id": run.pk, "url": f"http://testserver/runs/{run.pk}/"}
    assert run.state == "evaluating" and run.submissions.count() == 1
    assert run.bundle_file.name == "" and run.bundle_bytes == 0


def test_the_waiting_zip_counts_against_the_stored_bytes_quota(
    big, settings, upload, uploader, run_tasks
):
    data = make_zip(good_files())
    before = stored_files()
    settings.D2K_QUOTA_STORED_BYTES = len(data) - 1
    response, _ = upload(uploader, data)
    assert response.status_code == 429
    assert f"would take {len(data):,} bytes" in response.json()["detail"]
    assert not Run.objects.exists() and stored_files() == before
    settings.D2K_QUOTA_STORED_BYTES = len(data)
    response, _ = upload(uploader, data)
    assert response.status_code == 202


def test_a_quota_reached_meanwhile_rejects_the_run_with_the_sentence(
    big, settings, upload, uploader, run_tasks, fake_cli
):
    _response, work = upload(uploader, make_zip(good_files("row_softmax", "layernorm_fwd")))
    settings.D2K_QUOTA_QUEUED_EVALUATIONS = 1
    work()
    run = Run.objects.get()
    assert run.state == "rejected"
    assert "at most 1 may wait at once" in run.errors[0]["message"]
    assert not Submission.objects.exists() and not Trace.objects.exists()


def test_the_validation_is_idempotent(big, upload, uploader, run_tasks, fake_cli):
    _response, work = upload(uploader, make_zip(good_files()))
    run = Run.objects.get()
    assert run_bundle_validate(run_id=run.pk).state == "evaluating"
    work()  # the queued task comes late: the run is accepted already
    assert run_bundle_validate(run_id=run.pk) is None
    assert Submission.objects.count() == 1 and Trace.objects.count() == 1
    assert Evaluation.objects.count() == 1


def test_a_run_whose_task_was_lost_is_sent_again_by_the_workers_round(
    big, upload, uploader, run_tasks, fake_cli, django_capture_on_commit_callbacks
):
    upload(uploader, make_zip(good_files()))  # the work is never run: a restart lost it
    run = Run.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        worker_round.send(sender=None)
    run.refresh_from_db()
    assert run.state == "validating"  # too fresh: its task may still be on its way
    Run.objects.filter(pk=run.pk).update(updated_at=timezone.now() - timedelta(minutes=6))
    with django_capture_on_commit_callbacks(execute=True):
        worker_round.send(sender=None)  # what each worker's main process does every round
    run.refresh_from_db()
    assert run.state == "complete" and run.submissions.count() == 1 and len(fake_cli.calls) == 1
    assert run_validation_resume(now=timezone.now() + timedelta(minutes=6)) == []


def test_a_message_still_queued_is_not_sent_twice(
    big, upload, uploader, run_tasks, monkeypatch, settings
):
    settings.D2K_DEFAULT_HARDWARE = "NVIDIA H200"
    sent = []
    monkeypatch.setattr(
        "runs.services.async_task", lambda *args, **kw: sent.append((args, kw["cluster"]))
    )
    _response, work = upload(uploader, make_zip(good_files()))
    work()
    run = Run.objects.get()
    # The default pool's queue: some worker serves it wherever uploads are evaluated.
    assert sent == [(("runs.tasks.run_bundle_validate", run.pk), pool_queue("NVIDIA H200"))]

    class Busy:
        def queue_size(self):
            return 1

    monkeypatch.setattr("runs.services.get_broker", lambda queue: Busy())
    later = timezone.now() + timedelta(minutes=6)
    assert run_validation_resume(now=later) == []
    monkeypatch.undo()
    assert run_validation_resume(now=later) == [run.pk]


def test_the_command_resumes_stuck_runs_and_gives_up_after_the_last_attempt(
    big, upload, uploader, run_tasks, capsys
):
    upload(uploader, make_zip(good_files()))
    run = Run.objects.get()
    Run.objects.filter(pk=run.pk).update(
        upload_options={**run.upload_options, "attempts": VALIDATION_MAX_ATTEMPTS},
        updated_at=timezone.now() - timedelta(minutes=6),
    )
    zip_name = run.bundle_file.name
    call_command("run_validation_resume")
    assert capsys.readouterr().out.strip() == f"1 run(s) validated again: #{run.pk}."
    run.refresh_from_db()
    assert run.state == "rejected"
    assert (
        f"could not be validated in {VALIDATION_MAX_ATTEMPTS} attempts" in run.errors[0]["message"]
    )
    assert not default_storage.exists(zip_name) and run.bundle_bytes == 0


def test_the_upload_page_sends_a_big_bundle_to_its_run_page(
    big, django_capture_on_commit_callbacks, client, run_tasks, fake_cli
):
    user = UserFactory()
    client.force_login(user)
    form = " ".join(client.get("/runs/new/").content.decode().split())
    assert "A bundle over 100 bytes is checked after the upload" in form
    bundle = SimpleUploadedFile("run.zip", make_zip(good_files()))
    with django_capture_on_commit_callbacks():
        response = client.post("/runs/new/", {"bundle": bundle}, follow=True)
    page = response.content.decode()
    assert "is being validated" in page and 'id="run-state">validating<' in page


def test_a_validating_run_is_no_pair_candidate(big, upload, uploader, run_tasks, fake_cli):
    from runs.selectors import run_pair_candidates, run_pair_refusal

    upload(uploader, make_zip(good_files()))
    waiting = Run.objects.get()
    accepted = run_bundle_validate(run_id=waiting.pk)
    upload(uploader, make_zip(good_files(levels=["L1"])))
    guided = Run.objects.get(state="validating")
    assert list(run_pair_candidates(run=accepted)) == []
    assert "being validated" in run_pair_refusal(run=accepted, other=guided)


def test_a_full_disk_while_the_zip_is_stored_is_507_with_nothing_left(
    big, monkeypatch, on_disk, upload, uploader, run_tasks
):
    from django.core.files.storage import FileSystemStorage

    def half_written(self, name, content):
        path = on_disk / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.read()[:10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(FileSystemStorage, "_save", half_written)
    response, _ = upload(uploader, make_zip(good_files()))
    assert response.status_code == 507
    assert "no room to store this upload" in response.json()["detail"]
    assert not Run.objects.exists()
    assert list(on_disk.rglob("*")) == []  # no partial zip, no folder

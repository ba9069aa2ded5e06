"""The evaluation row as a job: claims, leases, hand-backs, the reaper, a worker's start."""

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.db.models import QuerySet
from django.utils import timezone

from evaluator import tasks
from evaluator.models import EvaluationStatus
from evaluator.selectors import evaluation_job_view
from evaluator.services import (
    evaluation_reap,
    evaluation_run,
    jobs,
    reaping,
    workdirs,
    worker_start,
)
from evaluator.services.evaluations import _evaluation_store
from evaluator.services.runner import worker_error_verdict
from tests.factories import EvaluationFactory, SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(eval_task_version):
    submission = SubmissionFactory(task_version=eval_task_version)
    return EvaluationFactory(
        submission=submission,
        status=EvaluationStatus.QUEUED,
        mode="",
        finished_at=None,
        enqueued_at=timezone.now(),
    )


@pytest.fixture
def sent(monkeypatch):
    calls = []
    monkeypatch.setattr(jobs, "async_task", lambda *args, **kw: calls.append(args))
    return calls


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _running(evaluation, *, worker_name, lease_s=60, attempts=1):
    now = timezone.now()
    evaluation.status = EvaluationStatus.RUNNING
    evaluation.worker = worker_name
    evaluation.attempts = attempts
    evaluation.heartbeat_at = now - timedelta(seconds=5)
    evaluation.lease_expires_at = now + timedelta(seconds=lease_s)
    evaluation.save()
    return evaluation


def test_a_claim_is_won_once(queued):
    first = jobs.evaluation_claim(evaluation_id=queued.pk, worker="host-a:1")
    second = jobs.evaluation_claim(evaluation_id=queued.pk, worker="host-b:2")
    assert first is not None and second is None
    queued.refresh_from_db()
    assert (queued.status, queued.worker, queued.attempts) == ("running", "host-a:1", 1)
    assert queued.lease_expires_at > timezone.now() > queued.heartbeat_at - timedelta(seconds=5)


def test_a_heartbeat_extends_only_the_holders_lease(queued, settings):
    settings.D2K_EVALUATION_LEASE_S = 600
    jobs.evaluation_claim(evaluation_id=queued.pk, worker="host-a:1")
    assert jobs.evaluation_heartbeat(evaluation_id=queued.pk, worker="host-a:1")
    assert not jobs.evaluation_heartbeat(evaluation_id=queued.pk, worker="host-b:2")
    queued.refresh_from_db()
    assert queued.lease_expires_at > timezone.now() + timedelta(seconds=500)


def test_a_worker_that_lost_its_lease_stores_nothing(queued):
    _running(queued, worker_name="host-a:1")
    verdict = worker_error_verdict(evaluation=queued, reason="x", log="")
    _evaluation_store(evaluation_id=queued.pk, worker="host-b:2", verdict=verdict)
    queued.refresh_from_db()
    assert queued.status == EvaluationStatus.RUNNING


def test_the_reaper_queues_again_an_evaluation_whose_lease_ran_out(
    queued, sent, django_capture_on_commit_callbacks
):
    _running(queued, worker_name="gpu-7:4242", lease_s=-1)
    with django_capture_on_commit_callbacks(execute=True):
        report = evaluation_reap()
    assert report.requeued == [queued.pk]
    queued.refresh_from_db()
    assert queued.status == EvaluationStatus.QUEUED
    assert "worker gpu-7:4242 stopped sending heartbeats" in queued.last_error
    assert sent == [("evaluator.tasks.evaluation_run_next", queued.pk)]


@pytest.mark.parametrize("attempts", [1, 3])
def test_the_reaper_removes_the_scratch_folder_a_dead_worker_left(
    queued, eval_task_version, sent, settings, tmp_path, attempts
):
    # Whether the evaluation goes back to the queue or ends worker_error after its last
    # attempt, what its dead worker left in its scratch folder is killed and removed.
    settings.D2K_WORK_DIR = tmp_path / "work"
    dead, alive = _dead_pid(), os.getpid()
    host = jobs.socket.gethostname()
    _running(queued, worker_name=f"{host}:{dead}", lease_s=-1, attempts=attempts)
    wedged = _running(
        EvaluationFactory(submission=queued.submission, status="running", finished_at=None),
        worker_name=f"{host}:{alive}",
        lease_s=-1,
    )
    left = tmp_path / "work" / f"{workdirs.work_dir_prefix(pid=dead)}eval{queued.pk}-abc"
    kept = tmp_path / "work" / f"{workdirs.work_dir_prefix(pid=alive)}eval{wedged.pk}-def"
    other = tmp_path / "work" / f"{workdirs.work_dir_prefix(pid=dead)}eval{wedged.pk}-ghi"
    for folder in (left, kept, other):
        (folder / "tmp" / "d2k-eval-x").mkdir(parents=True)
        (folder / "tmp" / "d2k-eval-x" / "big").write_bytes(b"x" * 4096)
    child = subprocess.Popen(["sleep", "300"], cwd=left / "tmp" / "d2k-eval-x")

    report = evaluation_reap()

    assert sorted(report.requeued + report.failed) == sorted([queued.pk, wedged.pk])
    assert child.wait(timeout=30) == -9, "what still ran in the folder is killed"
    assert not left.exists()
    # A live worker whose lease ran out removes its own folder when its attempt ends; the
    # reaper touches no folder of another evaluation.
    assert kept.exists() and other.exists()


def test_the_reaper_leaves_a_live_lease_alone(queued, sent):
    _running(queued, worker_name="gpu-7:4242", lease_s=60)
    assert evaluation_reap().requeued == []
    queued.refresh_from_db()
    assert queued.status == EvaluationStatus.RUNNING and sent == []


def test_after_the_last_attempt_a_lost_evaluation_is_a_worker_error_not_the_submitters(
    queued, settings, sent
):
    _running(queued, worker_name="gpu-7:4242", lease_s=-1, attempts=3)
    settings.D2K_EVALUATION_MAX_ATTEMPTS = 3
    report = evaluation_reap()
    assert report.failed == [queued.pk]
    queued.refresh_from_db()
    assert queued.status == EvaluationStatus.WORKER_ERROR
    assert "not of the submission" in queued.message
    assert "stopped sending heartbeats" in queued.message
    assert sent == []


def test_a_queued_evaluation_whose_message_was_lost_is_sent_again(
    queued, sent, settings, django_capture_on_commit_callbacks
):
    settings.D2K_EVALUATION_REQUEUE_S = 60
    queued.enqueued_at = timezone.now() - timedelta(seconds=61)
    queued.save()
    fresh = EvaluationFactory(
        submission=queued.submission, status="queued", finished_at=None, enqueued_at=timezone.now()
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert evaluation_reap().reenqueued == [queued.pk]
    assert sent == [("evaluator.tasks.evaluation_run_next", queued.pk)]
    assert fresh.pk not in [args[1] for args in sent]
    # Sent once, not at every round.
    assert evaluation_reap().reenqueued == []


def test_nothing_is_sent_again_while_the_broker_still_has_messages(
    queued, sent, settings, monkeypatch
):
    settings.D2K_EVALUATION_REQUEUE_S = 0
    queued.enqueued_at = timezone.now() - timedelta(hours=1)
    queued.save()

    class Busy:
        def queue_size(self):
            return 3

    monkeypatch.setattr(reaping, "get_broker", Busy)
    assert evaluation_reap().reenqueued == []


def test_a_workers_start_takes_back_at_once_what_dead_workers_of_this_host_held(
    queued, eval_task_version, sent, settings, tmp_path
):
    settings.D2K_WORK_DIR = tmp_path / "work"
    dead, alive = _dead_pid(), os.getpid()
    _running(queued, worker_name=f"{jobs.socket.gethostname()}:{dead}", lease_s=600)
    other = _running(
        EvaluationFactory(submission=queued.submission, status="running", finished_at=None),
        worker_name=f"{jobs.socket.gethostname()}:{alive}",
        lease_s=600,
    )
    remote = _running(
        EvaluationFactory(submission=queued.submission, status="running", finished_at=None),
        worker_name=f"another-host:{dead}",
        lease_s=600,
    )
    stale = tmp_path / "work" / f"{workdirs.work_dir_prefix(pid=dead)}eval{queued.pk}-abc"
    live = tmp_path / "work" / f"{workdirs.work_dir_prefix(pid=alive)}eval{other.pk}-def"
    for folder in (stale, live):
        (folder / "catalog").mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "300"], cwd=stale)

    report = worker_start()

    assert report.requeued == [queued.pk]
    assert report.removed_dirs == [stale]
    assert sleeper.wait(timeout=30) == -9, "what the dead worker left running is killed"
    assert not stale.exists() and live.exists()
    for evaluation, status in ((queued, "queued"), (other, "running"), (remote, "running")):
        evaluation.refresh_from_db()
        assert evaluation.status == status


def test_a_workers_start_sends_its_pools_waiting_evaluations_again_when_its_queue_is_idle(
    queued, sent, settings, tmp_path, django_capture_on_commit_callbacks
):
    # A stopped cluster's messages stay locked in the broker until they time out:
    # a worker starting on an idle queue sends its pool's waiting rows again at once.
    settings.D2K_WORK_DIR = tmp_path / "work"
    settings.D2K_EVALUATION_REQUEUE_S = 3600
    queued.enqueued_at = timezone.now() - timedelta(seconds=5)
    queued.target_hardware = "NVIDIA H200"
    queued.save()
    elsewhere = EvaluationFactory(
        submission=queued.submission,
        status="queued",
        finished_at=None,
        enqueued_at=timezone.now() - timedelta(seconds=5),
        target_hardware="NVIDIA H100",
    )

    with django_capture_on_commit_callbacks(execute=True):
        report = worker_start(hardware="NVIDIA H200")

    assert report.resent == [queued.pk]
    assert [args[1] for args in sent] == [queued.pk]
    assert elsewhere.pk not in [args[1] for args in sent]


def test_db_retry_waits_out_a_locked_database_and_then_gives_up():
    answers = iter([OperationalError("database is locked"), OperationalError("locked"), 7])

    def operation():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert jobs.db_retry(operation, what="test", first_delay_s=0.001) == 7
    with pytest.raises(OperationalError):
        jobs.db_retry(
            lambda: (_ for _ in ()).throw(OperationalError("locked")),
            what="test",
            attempts=3,
            first_delay_s=0.001,
        )


def test_a_claim_that_meets_a_locked_database_is_retried_not_dropped(fake_cli, queued, monkeypatch):
    real_update = QuerySet.update
    locked = {"left": 2}

    def update(self, **kwargs):
        if kwargs.get("status") == EvaluationStatus.RUNNING and locked["left"]:
            locked["left"] -= 1
            raise OperationalError("database is locked")
        return real_update(self, **kwargs)

    monkeypatch.setattr(QuerySet, "update", update)
    monkeypatch.setattr(jobs.time, "sleep", lambda s: None)
    finished = evaluation_run(evaluation_id=queued.pk)
    assert locked["left"] == 0
    assert finished.status == EvaluationStatus.CORRECT
    assert finished.attempts == 1


def test_the_job_view_says_what_happens_next(queued):
    view = evaluation_job_view(evaluation=queued)
    assert view.state == "queued" and view.queue_position == 0
    assert view.next_step == "Waiting for a worker (next in line)."
    _running(queued, worker_name="gpu-7:4242", lease_s=-1)
    view = evaluation_job_view(evaluation=queued)
    assert "stopped sending heartbeats" in view.next_step and "reaper" in view.next_step
    _running(queued, worker_name="gpu-7:4242", lease_s=60)
    assert (
        "Running on gpu-7:4242 (attempt 1 of 3)" in evaluation_job_view(evaluation=queued).next_step
    )


def test_the_reaper_task_reports_what_it_did(queued, sent):
    _running(queued, worker_name="gpu-7:4242", lease_s=-1)
    assert tasks.evaluation_reap().startswith("1 lost evaluation(s) queued again")


def test_the_reaper_schedule_exists_after_migrate():
    """The migration's step, run as migrate runs it: a transactional test that ran before
    this one in the same process flushed the tables, the migrations' rows with them."""
    import importlib

    from django.apps import apps
    from django_q.models import Schedule

    migration = importlib.import_module("evaluator.migrations.0003_reaper_schedule")
    [step] = migration.Migration.operations
    reaper = Schedule.objects.filter(func="evaluator.tasks.evaluation_reap", minutes=1)
    reaper.delete()
    for _ in range(2):  # once, however often it runs
        step.code(apps, None)
        assert reaper.count() == 1


def test_a_message_runs_the_oldest_queued_evaluation_first(queued, fake_cli, sent):
    newer = EvaluationFactory(
        submission=SubmissionFactory(task_version=queued.submission.task_version),
        status="queued",
        finished_at=None,
    )
    finished = tasks.evaluation_run_next(newer.pk)  # woken by the newer one's message
    assert finished == "correct"
    queued.refresh_from_db()
    newer.refresh_from_db()
    assert (queued.status, newer.status) == ("correct", "queued")


def test_a_message_queued_under_the_tasks_old_name_still_runs(queued, fake_cli):
    # Brokers hold messages across a deploy: one sent before the task was renamed
    # names evaluator.tasks.evaluation_run, and django-q2 (sync in tests) resolves it.
    from django_q.tasks import async_task, result

    task_id = async_task("evaluator.tasks.evaluation_run", queued.pk)
    assert result(task_id) == "correct"
    queued.refresh_from_db()
    assert queued.status == "correct"

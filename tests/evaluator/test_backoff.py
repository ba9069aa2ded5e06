"""A worker that cannot write its scratch folder hands the evaluation back without using an
attempt, records why on its heartbeat row and backs off (5 s, doubling, at most 5 min).

We run as root, so neither a read-only or foreign folder nor a full disk can be made
for real here: those answers (ENOSPC, EDQUOT, EROFS, EACCES) are injected where the folder
is made; one real refusal (ENOTDIR: a file where the folder's parent should be) runs too."""

import errno
import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db.models import F
from django.utils import timezone

from evaluator import tasks
from evaluator.models import EvaluationStatus, WorkerBeat, WorkerState
from evaluator.services import backoff, jobs, workdirs
from evaluator.services.backoff import (
    BACKOFF_FIRST_S,
    BACKOFF_MAX_S,
    WORKER_ENV,
    worker_backoff_record,
    worker_scratch_check,
)
from evaluator.services.workdirs import ScratchUnwritable
from tests.factories import EvaluationFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

MAIN = "gpu-host:4242"


@pytest.fixture
def work(settings, tmp_path) -> Path:
    settings.D2K_WORK_DIR = tmp_path / "work"
    return settings.D2K_WORK_DIR


@pytest.fixture
def beat(monkeypatch):
    """The worker's main process: its heartbeat row, named in its evaluation processes."""
    monkeypatch.setenv(WORKER_ENV, MAIN)
    now = timezone.now()
    return WorkerBeat.objects.create(worker=MAIN, queue="d2k", started_at=now, seen_at=now)


@pytest.fixture
def slept(monkeypatch) -> list[float]:
    """The back-off's sleeps, recorded; each one lets its time pass (the row's deadline
    moves back by as much) instead of waiting for it."""
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(round(seconds))
        WorkerBeat.objects.filter(backoff_until__isnull=False).update(
            backoff_until=F("backoff_until") - timedelta(seconds=seconds)
        )

    monkeypatch.setattr(backoff, "sleep", sleep)
    return sleeps


@pytest.fixture
def queued(eval_task_version):
    return EvaluationFactory(
        submission=SubmissionFactory(task_version=eval_task_version),
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


def _failing(monkeypatch, work: Path, code: int, *, name: str = "") -> None:
    """os.mkdir under `work` answers as a full (ENOSPC) or read-only (EROFS) disk would;
    with `name`, only for a folder of that name (the evaluation's own is made)."""
    real = os.mkdir

    def mkdir(path, *args, **kwargs):
        path = Path(path)
        if work in path.parents and (not name or path.name == name):
            raise OSError(code, os.strerror(code), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)


@pytest.mark.parametrize(
    ("code", "name", "state", "said"),
    [
        (errno.ENOSPC, "", WorkerState.DISK_FULL, "[ENOSPC] No space left on device"),
        (errno.EDQUOT, "tmp", WorkerState.DISK_FULL, "[EDQUOT] Disk quota exceeded"),
        (errno.EROFS, "catalog", WorkerState.SCRATCH_UNWRITABLE, "[EROFS] Read-only file system"),
        (errno.EACCES, "", WorkerState.SCRATCH_UNWRITABLE, "[EACCES] Permission denied"),
    ],
)
def test_an_unwritable_scratch_folder_hands_the_evaluation_back_without_an_attempt(
    fake_cli, work, beat, slept, queued, sent, monkeypatch,
    django_capture_on_commit_callbacks, code, name, state, said,
):  # fmt: skip
    _failing(monkeypatch, work, code, name=name)

    with django_capture_on_commit_callbacks(execute=True):
        tasks.evaluation_run_next(queued.pk)

    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (EvaluationStatus.QUEUED, 0)
    assert said in queued.message and "the attempt does not count" in queued.message
    assert queued.last_error == queued.message
    assert sent == [(jobs.TASK_PATH, queued.pk)], "a message, for another worker to take it"
    assert fake_cli.calls == [], "the evaluator never ran"
    assert slept == [BACKOFF_FIRST_S]
    beat.refresh_from_db()
    assert (beat.state, beat.backoff_s) == (state, BACKOFF_FIRST_S)
    assert said in beat.state_reason
    assert not any(work.iterdir()) if work.exists() else True, "no half-made folder is left"


def test_the_back_off_doubles_until_the_disk_takes_files_again(
    fake_cli, work, beat, slept, queued, sent, monkeypatch
):
    _failing(monkeypatch, work, errno.ENOSPC)
    for _ in range(8):
        tasks.evaluation_run_next(queued.pk)

    assert slept == [5, 10, 20, 40, 80, 160, 300, 300]
    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (EvaluationStatus.QUEUED, 0)

    monkeypatch.undo()  # the disk has room again
    monkeypatch.setenv(WORKER_ENV, MAIN)
    monkeypatch.setattr(backoff, "sleep", lambda s: slept.append(s))
    WorkerBeat.objects.update(backoff_until=timezone.now())  # its back-off is over

    assert tasks.evaluation_run_next(queued.pk) == "correct"
    queued.refresh_from_db()
    assert queued.attempts == 1, "the only attempt it used is the one that ran"
    beat.refresh_from_db()
    assert (beat.state, beat.state_reason) == (WorkerState.OK, "")


def test_a_worker_backing_off_sleeps_before_it_claims(fake_cli, work, beat, slept, queued):
    WorkerBeat.objects.update(
        state=WorkerState.DISK_FULL,
        backoff_s=40,
        backoff_until=timezone.now() + timedelta(seconds=30),
    )
    assert tasks.evaluation_run_next(queued.pk) == "correct"
    assert slept == [30]


def _unwritable(code: int = errno.ENOSPC) -> ScratchUnwritable:
    return ScratchUnwritable(OSError(code, os.strerror(code), "/srv/work"))


@pytest.mark.parametrize(
    ("failures", "delays"),
    [
        # each failure (seconds after the first) and the back-off it starts
        ([0, 5, 15, 35, 75, 155, 315, 615], [5, 10, 20, 40, 80, 160, 300, 300]),
        # a failure long after the last back-off ended starts again at 5 s
        ([0, 5, 15 + BACKOFF_MAX_S + 1], [5, 10, 5]),
        # a sibling process failing inside the back-off keeps it (no second doubling)
        ([0, 2, 5], [5, 3, 10]),
    ],
)
def test_the_back_off_starts_at_5_s_doubles_and_stops_at_5_min(beat, failures, delays):
    start = timezone.now()
    got = [
        worker_backoff_record(worker=MAIN, error=_unwritable(), now=start + timedelta(seconds=t))
        for t in failures
    ]
    assert [round(d) for d in got] == delays


def test_a_command_run_by_hand_says_it_cannot_write_and_leaves_the_evaluation_queued(
    fake_cli, work, queued, sent, monkeypatch, django_capture_on_commit_callbacks
):
    _failing(monkeypatch, work, errno.ENOSPC)
    refused = pytest.raises(CommandError, match=r"cannot write the scratch folder: \[ENOSPC\]")
    with django_capture_on_commit_callbacks(execute=True), refused:
        call_command("evaluate_submission", queued.submission.pk)
    evaluation = queued.submission.evaluations.order_by("-pk").first()
    assert (evaluation.status, evaluation.attempts) == (EvaluationStatus.QUEUED, 0)
    assert sent == [(jobs.TASK_PATH, evaluation.pk)]


def _probe_fails(monkeypatch, work: Path, code: int) -> None:
    real = os.open

    def open_(path, *args, **kwargs):
        if work in Path(path).parents:
            raise OSError(code, os.strerror(code), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)


def test_the_main_process_finds_a_full_disk_before_an_evaluation_does_and_sees_it_freed(
    work, beat, monkeypatch
):
    now = timezone.now()
    _probe_fails(monkeypatch, work, errno.ENOSPC)
    assert worker_scratch_check(worker=MAIN, now=now) == WorkerState.DISK_FULL
    beat.refresh_from_db()
    assert beat.backoff_until == now + timedelta(seconds=BACKOFF_FIRST_S)
    assert "[ENOSPC]" in beat.state_reason

    monkeypatch.undo()
    # Inside its back-off it does not try again; once it is over, a folder that takes a
    # file ends it.
    assert worker_scratch_check(worker=MAIN, now=now + timedelta(seconds=1)) == "disk_full"
    assert worker_scratch_check(worker=MAIN, now=now + timedelta(seconds=6)) == WorkerState.OK
    beat.refresh_from_db()
    assert (beat.state, beat.state_reason) == (WorkerState.OK, "")
    assert not [p for p in work.iterdir()], "the probe's file is gone"


def test_the_error_names_the_state_by_errno():
    assert _unwritable(errno.ENOSPC).state == WorkerState.DISK_FULL
    assert _unwritable(errno.EDQUOT).state == WorkerState.DISK_FULL
    assert _unwritable(errno.EROFS).state == WorkerState.SCRATCH_UNWRITABLE
    assert _unwritable(errno.EIO).state == WorkerState.SCRATCH_UNWRITABLE
    assert "/srv/work" in _unwritable().reason


def test_a_removal_gives_back_permissions_a_child_took(tmp_path):
    folder = tmp_path / "eval"
    (folder / "locked" / "deep").mkdir(parents=True)
    (folder / "locked" / "deep" / "file").write_text("x")
    (folder / "locked").chmod(0)
    try:
        assert workdirs.work_dir_remove(folder)
        assert not folder.exists()
    finally:
        if folder.exists():
            (folder / "locked").chmod(0o700)


def test_a_scratch_folder_the_file_system_refuses_for_real_backs_the_worker_off(
    fake_cli, beat, slept, queued, sent, settings, tmp_path
):
    # As root no permission stops us; a regular file where the folder's parent should be
    # does: every mkdir under it fails with ENOTDIR, no error injected.
    (tmp_path / "a-file").write_text("not a folder")
    settings.D2K_WORK_DIR = tmp_path / "a-file" / "work"

    tasks.evaluation_run_next(queued.pk)

    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (EvaluationStatus.QUEUED, 0)
    assert "[ENOTDIR] Not a directory" in queued.message
    assert fake_cli.calls == [] and slept == [BACKOFF_FIRST_S]
    beat.refresh_from_db()
    assert beat.state == WorkerState.SCRATCH_UNWRITABLE
    # The main process's own try of the folder says the same once the back-off is over.
    later = timezone.now() + timedelta(seconds=BACKOFF_FIRST_S + 1)
    assert worker_scratch_check(worker=MAIN, now=later) == WorkerState.SCRATCH_UNWRITABLE

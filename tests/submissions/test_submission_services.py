import pytest
from django.core.exceptions import ValidationError

from core.unavailable import ServiceUnavailable
from evaluator.models import Evaluation, EvaluationStatus
from evaluator.services import jobs
from submissions import services as services_module
from submissions.models import Submission
from submissions.services import submission_create, submission_filename_clean, submission_upload
from tests.factories import TaskFactory, TaskVersionFactory, UserFactory

pytestmark = pytest.mark.django_db

SOURCE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


@pytest.fixture
def task(eval_task_version):
    return eval_task_version.task


def test_create_pins_the_current_version_stores_the_hash_and_queues_an_evaluation(task):
    owner = UserFactory()
    submission = submission_create(owner=owner, task=task, source=SOURCE, filename="k.py")

    submission.refresh_from_db()
    assert submission.owner == owner
    assert submission.task_version == task.current_version
    assert submission.source == SOURCE
    assert submission.sha256 == Submission.digest(SOURCE)
    assert submission.filename == "k.py"
    assert not submission.is_public  # private until its owner publishes it
    [evaluation] = submission.evaluations.all()
    assert evaluation.status == EvaluationStatus.QUEUED


def test_a_new_task_version_does_not_move_old_submissions(task):
    old = submission_create(owner=UserFactory(), task=task, source=SOURCE, filename="k.py")
    TaskVersionFactory(task=task)
    task.refresh_from_db()
    new = submission_create(owner=UserFactory(), task=task, source=SOURCE, filename="k.py")
    old.refresh_from_db()
    assert old.task_version != new.task_version == task.current_version


def test_the_evaluation_is_enqueued_by_primary_key_after_commit(
    task, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(jobs, "async_task", lambda *args, **kw: sent.append(args))

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        submission = submission_create(owner=UserFactory(), task=task, source=SOURCE, filename="")
    assert sent == [], "nothing is enqueued before the commit"
    assert len(callbacks) == 1
    callbacks[0]()
    assert sent == [("evaluator.tasks.evaluation_run_next", submission.evaluations.get().pk)]


def test_bytes_are_decoded_and_a_byte_order_mark_dropped(task):
    raw = "\ufeff# café\nclass ModelNew: pass\n".encode()
    submission = submission_create(owner=UserFactory(), task=task, source=raw, filename="k.py")
    assert submission.source == "# café\nclass ModelNew: pass\n"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def broken(:\n", "Python syntax error at line 1"),
        ("import torch\n\n\nclass ModelNew(torch.nn.Module):\n  x = (\n", "at line 5"),
        ("class Model:\n    pass\n", "defines no `ModelNew`"),
        ("def f():\n    class ModelNew:\n        pass\n", "defines no `ModelNew`"),
        ("# class ModelNew(nn.Module)\nx = 'class ModelNew'\n", "defines no `ModelNew`"),
    ],
)
def test_a_file_that_cannot_be_a_kernel_is_refused_at_upload_with_nothing_stored(
    task, source, message
):
    with pytest.raises(ValidationError) as info:
        submission_upload(owner=UserFactory(), task=task, source=source, filename="k.py")
    assert message in info.value.message_dict["source"][0]
    assert not Submission.objects.exists()
    assert not Evaluation.objects.exists()


@pytest.mark.parametrize(
    "source",
    [
        "class ModelNew:\n    pass\n",
        "from mylib import Fast as ModelNew\n",
        "import torch\nModelNew = torch.nn.Identity\n",
        "import os\nif os.environ.get('X'):\n    class ModelNew: pass\n"
        "else:\n    class ModelNew: pass\n",
        "try:\n    import triton\n    class ModelNew: pass\nexcept ImportError:\n    raise\n",
    ],
)
def test_every_way_of_defining_model_new_at_module_level_is_accepted(task, source):
    upload = submission_upload(owner=UserFactory(), task=task, source=source, filename="k.py")
    assert upload.submission.evaluations.get().status == EvaluationStatus.QUEUED


def test_a_runs_kernel_with_a_syntax_error_is_stored_for_the_evaluator_to_judge(task):
    # Inside a run a broken final kernel is the agent's result (compile_error), not a
    # reason to refuse the bundle.
    submission = submission_create(owner=UserFactory(), task=task, source="def f(:\n")
    assert submission.evaluations.get().status == EvaluationStatus.QUEUED


def test_the_same_file_again_is_the_stored_submission_not_a_second_evaluation(task):
    owner = UserFactory()
    first = submission_upload(owner=owner, task=task, source=SOURCE, filename="a.py")
    again = submission_upload(owner=owner, task=task, source=SOURCE.encode(), filename="b.py")
    assert first.created and not again.created
    assert again.submission == first.submission
    assert Evaluation.objects.count() == 1


def test_the_same_file_by_another_owner_or_for_a_new_version_is_new(task):
    owner = UserFactory()
    first = submission_upload(owner=owner, task=task, source=SOURCE)
    other = submission_upload(owner=UserFactory(), task=task, source=SOURCE)
    assert other.created and other.submission != first.submission
    task.current_version = TaskVersionFactory(task=task, number=2)
    task.save()
    newer = submission_upload(owner=owner, task=task, source=SOURCE)
    assert newer.created and newer.submission.task_version == task.current_version


def test_an_unavailable_queue_refuses_the_upload_and_stores_nothing(task, monkeypatch):
    def down():
        raise ConnectionError("redis: connection refused")

    monkeypatch.setattr(services_module, "broker_ping", down)
    with pytest.raises(ServiceUnavailable, match="queue is unavailable"):
        submission_create(owner=UserFactory(), task=task, source=SOURCE)
    assert not Submission.objects.exists()


def test_the_task_can_be_given_by_slug(task):
    submission = submission_create(
        owner=UserFactory(), task="row_softmax", source=SOURCE, filename="k.py"
    )
    assert submission.task == task


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("", "The file is empty."),
        ("  \n\t\n", "The file is empty."),
        (b"", "The file is empty."),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "looks binary"),
        ("class ModelNew:\x00 pass", "looks binary"),
        (b"caf\xe9 = 1\n", "not UTF-8 text"),
        ("x = 1\n" * 50, "the limit is 100 bytes"),
        (b"x" * 101, "the limit is 100 bytes"),
    ],
)
def test_bad_sources_are_rejected_with_a_message(task, settings, source, message):
    settings.D2K_MAX_UPLOAD_BYTES = 100
    with pytest.raises(ValidationError) as info:
        submission_create(owner=UserFactory(), task=task, source=source, filename="k.py")
    assert message in " ".join(info.value.message_dict["source"])
    assert not Submission.objects.exists()


def test_exactly_the_limit_is_accepted(task, settings):
    settings.D2K_MAX_UPLOAD_BYTES = 100
    source = "class ModelNew: pass\n"
    source += "#" * (99 - len(source)) + "\n"
    assert len(source) == 100
    submission_create(owner=UserFactory(), task=task, source=source, filename="k.py")


@pytest.mark.parametrize("slug", ["no_such_task", "", None])
def test_an_unknown_task_is_rejected(db, slug):
    with pytest.raises(ValidationError) as info:
        submission_create(owner=UserFactory(), task=slug, source=SOURCE, filename="k.py")
    assert "Unknown task" in info.value.message_dict["task"][0]


def test_a_task_without_a_loaded_version_is_rejected(db):
    task = TaskFactory(slug="draft")
    with pytest.raises(ValidationError) as info:
        submission_create(owner=UserFactory(), task=task, source=SOURCE, filename="k.py")
    assert "no version" in info.value.message_dict["task"][0]


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("kernel.py", "kernel.py"),
        ("../../etc/passwd", "passwd.py"),
        ("C:\\Users\\me\\my kernel.py", "my_kernel.py"),
        ("", "kernel.py"),
        (None, "kernel.py"),
        ("...", "kernel.py"),
        ("a" * 300 + ".py", "a" * 197 + ".py"),
    ],
)
def test_filenames_are_reduced_to_a_safe_base_name(given, stored):
    assert submission_filename_clean(given) == stored

"""Curating measured content from the admin: a new version is always prefilled from the
current one; a version that changes what is measured says "baseline not yet measured on
<GPU>" on the task page and the board until `queue_expert_baselines` has re-measured it."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from evaluator.models import Evaluation
from evaluator.selectors import BaselinePending, baselines_pending
from tests.evaluator.test_baselines import FIXTURE_GPU
from tests.factories import TaskVersionFactory, UserFactory, task_with_workloads
from tests.task_catalog.test_catalog_baseline import imported

pytestmark = pytest.mark.django_db

ADD = "admin:task_catalog_taskversion_add"
BANNER = f"Baseline not yet measured on {FIXTURE_GPU}"


@pytest.fixture
def task():
    return task_with_workloads(task__slug="row_softmax", task__title="Row-wise softmax")


@pytest.fixture
def admin_client(client):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


# --- "Add task version", wherever it is opened -------------------------------------------


def test_add_without_a_task_asks_which_task_first(admin_client, task):
    response = admin_client.get(reverse(ADD))
    page = response.content.decode()
    assert response.status_code == 200
    assert f'<a href="?task={task.pk}">row_softmax</a>' in page
    assert f"from v{task.current_version.number}" in page


def test_add_from_a_list_filtered_by_task_opens_that_tasks_prefilled_form(admin_client, task):
    url = reverse(ADD) + f"?_changelist_filters=task__id__exact%3D{task.pk}"
    response = admin_client.get(url)
    assert response.status_code == 302 and response.url.endswith(f"?task={task.pk}")
    form = admin_client.get(response.url).content.decode()
    assert "bf16_4096x4096" in form  # the current version's workloads


def test_the_task_list_links_each_task_to_its_prefilled_new_version(admin_client, task):
    listing = admin_client.get(reverse("admin:task_catalog_task_changelist")).content.decode()
    link = f'{reverse(ADD)}?task={task.pk}">Add a version from v{task.current_version.number}'
    assert link in listing
    form = admin_client.get(f"{reverse(ADD)}?task={task.pk}").content.decode()
    assert "bf16_4096x4096" in form  # the current version's workloads, as JSON


# --- baseline not yet measured ----------------------------------------------------------


@pytest.fixture
def new_version(task):
    """The expert measured on v1 on the fixture GPU, then a version that changed what is
    measured (as the admin's "Add task version" or a reloaded task.toml makes it)."""
    imported(task)
    return TaskVersionFactory(task=task, expert_source="class ModelNew:\n    pass\n")


def test_a_new_version_shows_baseline_not_yet_measured_on_the_task_page_and_board(
    client, task, new_version
):
    assert baselines_pending() == [
        BaselinePending(slug="row_softmax", version=new_version.number, gpu=FIXTURE_GPU)
    ]
    page = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()
    assert f"{BANNER}: version v{new_version.number} changed what is measured" in page
    board = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert f"{BANNER} for" in board and f"row_softmax</a> v{new_version.number}" in board


def test_without_a_new_version_there_is_no_banner(client, task):
    imported(task)
    assert baselines_pending() == []
    page = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()
    assert "not yet measured" not in page


def _queue(*args) -> str:
    out = StringIO()
    call_command("queue_expert_baselines", *args, stdout=out)
    return out.getvalue()


def test_the_command_queues_the_re_measure_on_the_gpus_pool_until_it_is_measured(
    client, task, new_version, settings, django_capture_on_commit_callbacks
):
    settings.D2K_HARDWARE_POOLS = [FIXTURE_GPU]

    with django_capture_on_commit_callbacks(execute=False):
        out = _queue()
    assert "row_softmax: queued (evaluation #" in out and f"v{new_version.number} on" in out
    evaluation = Evaluation.objects.get(status="queued")
    assert evaluation.target_hardware == FIXTURE_GPU
    assert evaluation.submission.task_version == new_version
    assert evaluation.submission.owner.username == "d2k-experts"
    assert "already queued" in _queue()  # idempotent
    assert Evaluation.objects.filter(status="queued").count() == 1

    # The pool's worker measures it: the banner goes.
    Evaluation.objects.filter(pk=evaluation.pk).update(
        status="correct", mode="cuda", hardware=FIXTURE_GPU, finished_at=timezone.now()
    )
    assert baselines_pending() == []
    page = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()
    assert "not yet measured" not in page


def test_the_command_skips_a_gpu_without_a_pool_and_refuses_an_unknown_pool(task, new_version):
    assert f"skipped: no pool {FIXTURE_GPU!r}" in _queue()
    assert not Evaluation.objects.filter(status="queued").exists()
    with pytest.raises(CommandError, match="No pool 'NVIDIA B300'"):
        _queue("--hardware", "NVIDIA B300")


def test_a_named_task_is_queued_on_a_named_pool_even_when_nothing_is_pending(task, settings):
    settings.D2K_HARDWARE_POOLS = ["NVIDIA H200"]
    out = _queue("--task", "row_softmax", "--hardware", "NVIDIA H200")
    assert "row_softmax: queued" in out
    assert Evaluation.objects.get(status="queued").target_hardware == "NVIDIA H200"
    with pytest.raises(CommandError, match="Unknown task"):
        _queue("--task", "nope")

"""Pages are cached under the data version and never stale: an evaluation, a review, a
moderation decision or a change of visibility shows on the very next request; values that
follow from their inputs alone (bootstrap intervals) are cached by those inputs."""

import re

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluator.models import Evaluation
from evaluator.services import EXPERT_USERNAME, baseline_import, evaluation_review
from evaluator.signals import evaluation_result_changed
from leaderboard.caching import by_content, versioned
from leaderboard.generate import leaderboard_example_generate
from moderation.services import cell_verdict_set, moderation_act
from runs.models import Run
from runs.services import run_visibility_set
from scoring.intervals import entry_scores
from scoring.selectors import scores_version
from scoring.services import scores_refresh, scores_version_bump
from tests.evaluator.test_baselines import gpu_verdict
from tests.factories import (
    EvaluationFactory,
    RunFactory,
    SubmissionFactory,
    TaskVersionFactory,
    UserFactory,
    WorkloadFactory,
    WorkloadResultFactory,
    task_with_workloads,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def task():
    return task_with_workloads(task__slug="row_softmax", expert_source="class ModelNew: pass\n")


def page(client, url):
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def ranked(task, *, owner, run=None, status="correct", review=""):
    submission = SubmissionFactory(
        owner=owner, task_version=task.current_version, run=run, source=f"# {owner}\n"
    )
    evaluation = EvaluationFactory(submission=submission, status=status, review=review)
    for name in ("bf16_4096x4096", "fp32_1024x50000"):
        WorkloadResultFactory(evaluation=evaluation, name=name, speedup=2.0)
    scores_refresh(submission_ids=[submission.pk])  # as the verdict's commit does
    return evaluation


def test_a_value_is_built_once_per_data_version():
    calls = []

    def build():
        calls.append(1)
        return {"n": len(calls)}

    assert versioned(name="t", key="k", build=build) == {"n": 1}
    assert versioned(name="t", key="k", build=build) == {"n": 1}
    assert versioned(name="t", key="other", build=build) == {"n": 2}
    before = scores_version()
    UserFactory()
    assert scores_version() != before
    assert versioned(name="t", key="k", build=build) == {"n": 3}


def test_a_finished_evaluation_shows_on_the_next_request(
    client, task, django_capture_on_commit_callbacks
):
    url = reverse("task_catalog:detail", args=[task.slug])
    assert "No ranked result yet" in page(client, url)

    with django_capture_on_commit_callbacks(execute=True):
        baseline_import(data={task.slug: gpu_verdict()}, source_label="fixture.json")

    html = page(client, url)
    assert f"<td>{EXPERT_USERNAME} " in html and "No ranked result yet" not in html


def test_an_admins_review_shows_on_the_next_request(
    client, task, django_capture_on_commit_callbacks
):
    flagged = ranked(task, owner=UserFactory(username="alice"), status="flagged", review="pending")
    url = reverse("task_catalog:detail", args=[task.slug])
    assert "<td>alice</td>" not in page(client, url)

    with django_capture_on_commit_callbacks(execute=True):
        evaluation_review(evaluation=flagged, decision="cleared", reviewer=UserFactory())

    assert "<td>alice</td>" in page(client, url)


def test_a_moderation_decision_shows_on_the_next_request(client, task):
    evaluation = ranked(task, owner=UserFactory(username="alice"))
    url = reverse("task_catalog:detail", args=[task.slug])
    assert "<td>alice</td>" in page(client, url)

    moderation_act(
        actor=UserFactory(is_staff=True),
        kind="flag",
        reason="a timer patch?",
        submission=evaluation.submission,
    )

    assert "<td>alice</td>" not in page(client, url)


def test_a_run_withdrawn_or_made_private_leaves_the_leaderboard_at_once(client, task):
    owner = UserFactory()
    withdrawn, private = RunFactory(owner=owner, model="m-withdrawn"), RunFactory(owner=owner)
    for run in (withdrawn, private):
        ranked(task, owner=owner, run=run)
    url = reverse("leaderboard:leaderboard")
    html = page(client, url)
    assert f'id="entry-{withdrawn.pk}"' in html and f'id="entry-{private.pk}"' in html

    moderation_act(actor=UserFactory(is_staff=True), kind="withdraw", reason="x", run=withdrawn)
    run_visibility_set(run=private, user=owner, is_public=False)

    html = page(client, url)
    assert f'id="entry-{withdrawn.pk}"' not in html and f'id="entry-{private.pk}"' not in html


def test_a_value_by_content_is_built_once_per_inputs_whatever_the_data_version():
    calls = []

    def build():
        calls.append(1)
        return {"n": len(calls)}

    assert by_content(name="t", inputs=[1, {"a": 2}], build=build) == {"n": 1}
    scores_version_bump()
    assert by_content(name="t", inputs=[1, {"a": 2}], build=build) == {"n": 1}
    assert by_content(name="t", inputs=[1, {"a": 3}], build=build) == {"n": 2}
    assert by_content(name="other", inputs=[1, {"a": 2}], build=build) == {"n": 3}


def generated_board(runs=22):
    """A generated board (leaderboard_example's data) on 3 tasks where the entries have
    two attempts: runs 10 pairs apart share their model and agent."""
    for i in range(3):
        version = TaskVersionFactory(task__slug=f"task_{i}", task__position=i)
        WorkloadFactory(version=version, name="timed_a")
    leaderboard_example_generate(runs=runs)


def test_a_changed_evaluation_result_changes_the_cached_interval(
    client, django_capture_on_commit_callbacks
):
    generated_board()
    before = {tuple(r["run_ids"]): r for r in client.get("/api/leaderboard/").json()}
    ids, entry = next((k, r) for k, r in before.items() if len(k) > 1 and r["correctness_rate"])
    # One of the entry's correct kernels is judged again, incorrect, through the evaluator's
    # signal (scores follow it, as after a stored verdict).
    evaluation = Evaluation.objects.filter(submission__run_id=ids[0], status="correct").first()
    Evaluation.objects.filter(pk=evaluation.pk).update(status="incorrect")
    with django_capture_on_commit_callbacks(execute=True):
        evaluation_result_changed.send(
            sender=Evaluation,
            evaluation_id=evaluation.pk,
            submission_id=evaluation.submission_id,
            run_id=ids[0],
            change="verdict",
        )

    after = {tuple(r["run_ids"]): r for r in client.get("/api/leaderboard/").json()}
    assert after[ids]["correctness_rate"] < entry["correctness_rate"]
    assert after[ids]["correctness_rate_ci"] != entry["correctness_rate_ci"]
    cache.clear()  # and what was served is what a fresh computation gives
    assert {tuple(r["run_ids"]): r for r in client.get("/api/leaderboard/").json()} == after


def test_an_entrys_intervals_are_computed_once_while_its_scores_stay(client, monkeypatch):
    generated_board()
    cache.clear()  # the same generated parts may have been cached by another test
    computed = []

    def counted(**kwargs):
        computed.append(kwargs["seed"])
        return entry_scores(**kwargs)

    monkeypatch.setattr("leaderboard.selectors.entries.entry_scores", counted)
    rows = client.get("/api/leaderboard/").json()
    several = [r for r in rows if r["attempts"] > 1]
    assert several and len(computed) == len(several)

    UserFactory()  # a new data version: the table is built again, the intervals are not
    assert client.get(reverse("leaderboard:leaderboard")).status_code == 200
    assert client.get("/api/leaderboard/").json() == rows
    assert len(computed) == len(several)

    run = Run.objects.get(pk=several[0]["run_ids"][0])
    scores_refresh(run_ids=[run.pk])  # rewritten alike: same parts, same intervals
    client.get("/api/leaderboard/")
    assert len(computed) == len(several)


def result_changed(evaluation, status):
    """The evaluation's verdict becomes `status`, as the evaluator stores it (its signal,
    after the commit, refreshes the scores)."""
    Evaluation.objects.filter(pk=evaluation.pk).update(status=status)
    evaluation_result_changed.send(
        sender=Evaluation,
        evaluation_id=evaluation.pk,
        submission_id=evaluation.submission_id,
        run_id=evaluation.submission.run_id,
        change="verdict",
    )


def task_row(html, slug):
    return re.search(rf'<tr id="task-{slug}">(.*?)</tr>', html, re.S).group(1)


def test_the_public_run_page_shows_a_changed_result_and_a_moderators_word_at_once(client):
    generated_board(runs=2)
    run = Run.objects.order_by("pk").first()
    url = reverse("runs:detail", args=[run.pk])
    evaluation = Evaluation.objects.filter(submission__run=run, status="correct").first()
    slug = evaluation.submission.task.slug
    assert "status-correct" in task_row(page(client, url), slug)
    assert "status-correct" in task_row(page(client, url), slug)  # served as built

    result_changed(evaluation, "incorrect")
    assert "status-incorrect" in task_row(page(client, url), slug)

    moderator = UserFactory(is_staff=True)
    cell_verdict_set(
        actor=moderator,
        run=run,
        task=evaluation.submission.task,
        verdict="reward_hack",
        reason="It reads the expected output.",
    )
    html = page(client, url)
    assert "verdict-reward_hack" in task_row(html, slug)
    assert "It reads the expected output." in html and moderator.username not in html
    # The moderator's own view is built for them: the forms, and who acted.
    client.force_login(moderator)
    html = page(client, url)
    assert 'id="verdict-' in html and moderator.username in html


def test_the_public_submission_page_shows_a_changed_result_at_once(client):
    generated_board(runs=2)
    evaluation = Evaluation.objects.filter(status="correct").order_by("pk").first()
    url = reverse("submissions:detail", args=[evaluation.submission_id])
    assert 'status-correct" id="live-status"' in page(client, url)
    assert 'status-correct" id="live-status"' in page(client, url)  # served as built

    result_changed(evaluation, "incorrect")
    assert 'status-incorrect" id="live-status"' in page(client, url)


def test_a_submission_page_that_follows_its_job_is_built_per_request(client):
    evaluation = EvaluationFactory(status="queued", submission__is_public=True)
    url = reverse("submissions:detail", args=[evaluation.submission_id])
    assert 'id="live-job"' in page(client, url)
    # The job's heartbeat is no data version change; the page still shows the job as it is.
    with CaptureQueriesContext(connection) as queries:
        assert 'id="live-job"' in page(client, url)
    assert len(queries) > 2


def test_the_public_run_page_hides_a_twin_made_private_and_is_gone_once_its_run_is(client):
    generated_board(runs=2)
    run = Run.objects.order_by("pk").first()
    twin = run.pair
    url = reverse("runs:detail", args=[run.pk])
    assert f'href="/runs/{twin.pk}/"' in page(client, url)

    owner = UserFactory(is_staff=True)  # the generated runs' owner is not a person
    run_visibility_set(run=twin, user=owner, is_public=False)
    html = page(client, url)
    assert f'href="/runs/{twin.pk}/"' not in html and 'id="no-twin"' in html

    run_visibility_set(run=run, user=owner, is_public=False)
    assert client.get(url).status_code == 404


def test_a_public_run_page_with_a_kernel_in_progress_follows_its_job(client):
    generated_board(runs=2)
    run = Run.objects.order_by("pk").first()
    submission = run.submissions.order_by("pk").first()
    url = reverse("runs:detail", args=[run.pk])
    page(client, url)
    rerun = EvaluationFactory(submission=submission, status="queued")  # a re-run: a new row
    assert "status-queued" in task_row(page(client, url), submission.task.slug)

    # A worker claims it with a queryset update, as evaluator.services.jobs does: no new
    # data version, and the page still shows it.
    Evaluation.objects.filter(pk=rerun.pk).update(status="running")
    assert "status-running" in task_row(page(client, url), submission.task.slug)

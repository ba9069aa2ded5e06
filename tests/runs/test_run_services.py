"""Run services on the real database: storing a bundle, state, pairing, the examples."""

import pytest
from django.core.exceptions import ValidationError
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command

from accounts.models import ApiToken
from evaluator.models import Evaluation
from runs.models import Run
from runs.services import (
    run_create_from_bundle,
    run_pair,
    run_refresh_state,
    run_unpair,
)
from tests.evaluator.fake_cli import verdict_dict
from tests.factories import EvaluationFactory, RunFactory, SubmissionFactory, UserFactory
from tests.runs.bundles import good_files, make_zip

pytestmark = pytest.mark.django_db


def create(owner, *tasks, levels=(), **kwargs):
    return run_create_from_bundle(
        owner=owner, data=make_zip(good_files(*tasks, levels=levels)), **kwargs
    )


def test_a_bundle_becomes_a_run_with_submissions_traces_and_proposals(run_tasks, fake_cli):
    owner = UserFactory()
    run = create(owner, "row_softmax", "layernorm_fwd", levels=["L2"])
    assert (run.model, run.agent, run.hardware, run.condition) == (
        "model-x",
        "agent-y",
        "NVIDIA H200",
        "L2",
    )
    assert len(run.catalog_version) == 12
    submissions = run.submissions.order_by("task__slug")
    assert [s.filename for s in submissions] == ["layernorm_fwd.py", "row_softmax.py"]
    assert all(s.owner == owner and s.run == run for s in submissions)
    # Queued now, run on commit (the test transaction never commits).
    assert {e.status for e in Evaluation.objects.all()} == {"queued"}
    assert run.state == "evaluating"
    trace = run.traces.get(task__slug="row_softmax")
    assert default_storage.exists(trace.file.name) and trace.stored_bytes > 0
    assert trace.turns_used == 1 and trace.final_submit_turn == 1
    assert run.proposals.count() == 2


def test_the_state_follows_the_latest_evaluations(run_tasks):
    run = RunFactory()
    first = SubmissionFactory(run=run, task_version=run_tasks[0].current_version)
    second = SubmissionFactory(run=run, task_version=run_tasks[1].current_version)
    EvaluationFactory(submission=first, status="correct")
    pending = EvaluationFactory(submission=second, status="running", finished_at=None)
    assert run_refresh_state(run_id=run.pk).state == "evaluating"
    pending.status = "incorrect"
    pending.save()
    refreshed = run_refresh_state(run_id=run.pk)
    assert refreshed.state == "complete" and refreshed.finished_at is not None
    # An admin's re-run makes it evaluating again.
    EvaluationFactory(submission=first, status="queued", finished_at=None)
    assert run_refresh_state(run_id=run.pk).state == "evaluating"
    assert run_refresh_state(run_id=run.pk + 100) is None


def test_storing_an_evaluation_refreshes_its_runs_state(
    run_tasks, fake_cli, django_capture_on_commit_callbacks
):
    fake_cli.reply(verdict_dict("incorrect"))
    with django_capture_on_commit_callbacks(execute=True):
        run = create(UserFactory(), "row_softmax")
    run.refresh_from_db()
    assert run.state == "complete"
    assert Evaluation.objects.get().status == "incorrect"


def test_runs_pair_automatically_by_owner_model_agent_and_catalog_version(run_tasks, fake_cli):
    owner = UserFactory()
    plain = create(owner, "row_softmax")
    other_owner = create(UserFactory(), "row_softmax", levels=["L1"])
    guided = create(owner, "row_softmax", levels=["L1", "L2", "L3"])
    plain.refresh_from_db(), other_owner.refresh_from_db()
    assert guided.pair_id == plain.pk and plain.pair_id == guided.pk
    assert other_owner.pair_id is None
    # A second guided run finds no unpaired twin.
    again = create(owner, "row_softmax", levels=["L1"])
    assert again.pair_id is None


def test_a_different_model_does_not_pair(run_tasks, fake_cli):
    owner = UserFactory()
    create(owner, "row_softmax")
    files = good_files("row_softmax", levels=["L1"])
    files["manifest.json"] = files["manifest.json"].replace("model-x", "model-z")
    assert run_create_from_bundle(owner=owner, data=make_zip(files)).pair_id is None


def test_pairing_by_hand_breaks_old_pairs_and_checks_the_sides_and_owner(run_tasks):
    owner = UserFactory()
    plain = RunFactory(owner=owner)
    guided = RunFactory(owner=owner, levels=["L1"])
    later = RunFactory(owner=owner, levels=["L1", "L2"])
    run_pair(run=plain, other=guided, user=owner)
    run_pair(run=plain, other=later, user=owner)
    guided.refresh_from_db(), later.refresh_from_db()
    assert plain.pair_id == later.pk and later.pair_id == plain.pk and guided.pair_id is None
    with pytest.raises(ValidationError, match="one run without guidance and one with"):
        run_pair(run=guided, other=later, user=owner)
    with pytest.raises(ValidationError, match="Only the run's owner"):
        run_pair(run=guided, other=plain, user=UserFactory())
    run_unpair(run=later, user=owner)
    plain.refresh_from_db()
    assert plain.pair_id is None and later.pair_id is None


def test_load_example_runs_loads_the_labelled_pair_once(run_tasks, fake_cli, settings):
    call_command("load_example_runs")
    runs = list(Run.objects.order_by("pk"))
    assert [r.condition for r in runs] == ["none", "L1+L2+L3"]
    assert all(r.is_example and r.owner.username == "example" for r in runs)
    assert runs[0].pair_id == runs[1].pk
    assert "Example data written by hand" in runs[0].notes
    # Only this catalog's tasks are in the database: the loader takes what fits.
    assert {s.task.slug for s in runs[1].submissions.all()} <= {"row_softmax", "layernorm_fwd"}
    call_command("load_example_runs")
    assert Run.objects.count() == 2


def test_load_example_runs_with_three_attempts_per_condition(run_tasks, fake_cli, settings):
    call_command("load_example_runs", "--attempts", "3")
    runs = list(Run.objects.order_by("pk"))
    assert [r.condition for r in runs] == ["none", "L1+L2+L3"] * 3
    assert all(r.is_example and "Example data written by hand" in r.notes for r in runs)
    # Each attempt pairs with its own twin; later attempts leave a quarter of the tasks out.
    assert [r.pair_id for r in runs] == [runs[i ^ 1].pk for i in range(6)]
    kernels = [sorted(s.task.slug for s in r.submissions.all()) for r in runs[::2]]
    assert kernels[0] == ["layernorm_fwd", "row_softmax"] and kernels[1] == ["layernorm_fwd"]
    with pytest.raises(CommandError, match="--attempts"):
        call_command("load_example_runs", "--attempts", "0")


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [(0, list("abcdefgh")), (1, list("acdegh")), (2, list("abdefh")), (3, list("abcefg"))],
)
def test_each_example_attempt_leaves_out_another_quarter_of_the_tasks(attempt, expected):
    from runs.services import example_attempt_tasks

    assert example_attempt_tasks(tasks=list("abcdefgh"), attempt=attempt) == expected


def test_load_example_runs_needs_a_catalog(db):
    with pytest.raises(CommandError, match="load_catalog"):
        call_command("load_example_runs")


def test_api_token_prints_a_fresh_token_and_creates_a_bot_on_request(capsys, db):
    with pytest.raises(CommandError, match="--create"):
        call_command("api_token", "lab-bot")
    call_command("api_token", "lab-bot", "--create")
    first = capsys.readouterr().out.strip()
    assert ApiToken.objects.get_from_key(first).user.username == "lab-bot"
    call_command("api_token", "lab-bot")
    second = capsys.readouterr().out.strip()
    assert second != first
    assert ApiToken.objects.get_from_key(second).scopes == ["upload"]
    with pytest.raises(ApiToken.DoesNotExist):
        ApiToken.objects.get_from_key(first)  # the same name's older token is revoked
    assert not ApiToken.objects.get_from_key(second).user.has_usable_password()


def test_deleting_a_run_deletes_its_trace_files(
    run_tasks, fake_cli, django_capture_on_commit_callbacks
):
    run = create(UserFactory(), "row_softmax")
    name = run.traces.get().file.name
    with django_capture_on_commit_callbacks(execute=True):
        run.delete()
    assert not default_storage.exists(name)


@pytest.mark.django_db
def test_a_run_s_task_speedup_leaves_hidden_workloads_out():
    # A hidden row's figures reach staff only; the task's speedup on the run page,
    # which everyone sees, is over the public timed workloads alone (the stored score).
    from runs.selectors import run_detail
    from scoring.services import scores_refresh
    from tests.factories import WorkloadResultFactory

    run = RunFactory(is_public=True)
    submission = SubmissionFactory(run=run, owner=run.owner)
    evaluation = EvaluationFactory(submission=submission)
    WorkloadResultFactory(evaluation=evaluation, median_ms=1.0, ref_median_ms=2.0)
    WorkloadResultFactory(
        evaluation=evaluation, role="untimed", hidden=True, median_ms=1.0, ref_median_ms=32.0
    )
    scores_refresh(submission_ids=[submission.pk], machine=False)
    [row] = run_detail(run=run, user=run.owner).rows
    assert row.mine.speedup == pytest.approx(2.0)

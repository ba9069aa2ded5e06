"""Cell verdicts: staff decide per (run, task) cell with a quote and a reason, each change
logged; the scanners' nominations and held verdicts keep cells off the rankings."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from leaderboard.selectors import task_ranking
from leaderboard.selectors.audit import leaderboard_entry_audit
from moderation.models import CellVerdict, ModerationAction
from moderation.selectors import (
    cell_verdicts_search,
    held_verdicts,
    run_rankable_q,
)
from moderation.services import cell_verdict_set, cells_nominate, moderation_act
from runs.models import Run, ScanHit, Trace
from scoring.services import scores_refresh
from tests.factories import (
    EvaluationFactory,
    RunFactory,
    SubmissionFactory,
    UserFactory,
    WorkloadResultFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff():
    return UserFactory(is_staff=True)


@pytest.fixture
def cell():
    """A public run with one correct kernel timed in cuda mode, scored."""
    run = RunFactory()
    evaluation = EvaluationFactory(
        status="correct", mode="cuda", hardware="NVIDIA H200", submission__run=run
    )
    WorkloadResultFactory(evaluation=evaluation)
    submission = evaluation.submission
    scores_refresh(submission_ids=[submission.pk])
    return submission


def ranked(submission):
    return [row.submission_id for row in task_ranking(task=submission.task)]


def run_ranks(run):
    return Run.objects.filter(run_rankable_q(), pk=run.pk).exists()


@pytest.mark.parametrize(
    ("verdict", "ranks"),
    [
        ("clean", True),
        ("infra", True),
        ("reward_hack", False),
        ("contaminated", False),
        ("needs_review", False),
    ],
)
def test_a_verdict_is_logged_and_held_verdicts_leave_the_rankings(staff, cell, verdict, ranks):
    run = cell.run
    assert ranked(cell) == [cell.pk] and run_ranks(run)
    saved = cell_verdict_set(
        actor=staff,
        run=run,
        task=cell.task,
        verdict=verdict,
        reason="  read the trace  ",
        quote="cat ../grader.py",
        line=4,
    )
    assert (saved.verdict, saved.reason, saved.quote, saved.line) == (
        verdict,
        "read the trace",
        "cat ../grader.py",
        4,
    )
    assert saved.decided_by == staff
    action = ModerationAction.objects.get()
    assert (action.kind, action.run, action.task, action.verdict, action.actor) == (
        "cell_verdict",
        run,
        cell.task,
        verdict,
        staff,
    )
    assert (ranked(cell) == [cell.pk]) is ranks
    assert run_ranks(run) is ranks


def test_a_second_verdict_replaces_the_first_and_both_are_logged(staff, cell):
    for verdict in ("needs_review", "clean"):
        cell_verdict_set(
            actor=staff, run=cell.run, task=cell.task, verdict=verdict, reason="because"
        )
    assert CellVerdict.objects.get().verdict == "clean"
    assert list(ModerationAction.objects.values_list("verdict", flat=True)) == [
        "clean",
        "needs_review",
    ]


def test_only_staff_give_verdicts_with_a_reason_a_known_verdict_and_a_cell_of_the_run(staff, cell):
    args = {"run": cell.run, "task": cell.task, "verdict": "clean", "reason": "ok"}
    with pytest.raises(PermissionDenied):
        cell_verdict_set(actor=cell.owner, **args)
    with pytest.raises(ValidationError, match="Say why"):
        cell_verdict_set(actor=staff, **{**args, "reason": "  "})
    with pytest.raises(ValidationError, match="Unknown verdict"):
        cell_verdict_set(actor=staff, **{**args, "verdict": "guilty"})
    with pytest.raises(ValidationError, match="counted from 1"):
        cell_verdict_set(actor=staff, **args, line=0)
    other = SubmissionFactory().task
    with pytest.raises(ValidationError, match="no kernel or trace"):
        cell_verdict_set(actor=staff, **{**args, "task": other})
    assert not CellVerdict.objects.exists() and not ModerationAction.objects.exists()


def test_the_run_moderation_door_refuses_the_cell_verdict_kind(staff, cell):
    with pytest.raises(ValidationError, match="Unknown action"):
        moderation_act(actor=staff, kind="cell_verdict", reason="x", run=cell.run)


def _hit(run, task, rule, line, quote="q"):
    trace = Trace.objects.filter(run=run, task=task).first() or Trace.objects.create(
        run=run, task=task, file="runs/x.jsonl.gz"
    )
    return ScanHit.objects.create(
        run=run, task=task, trace=trace, rule=rule, line=line, event_type="tool_call", quote=quote
    )


def test_the_scanners_nominate_cells_but_never_overrule_a_moderator(staff, cell):
    run, task = cell.run, cell.task
    other = SubmissionFactory(run=run).task
    hits = [
        _hit(run, task, "process-kill", 9, "pkill -9 x"),
        _hit(run, task, "process-kill", 4, "kill 12"),
        _hit(run, task, "grader-files", 7),
        _hit(run, other, "network-fetch", 2),
    ]
    cell_verdict_set(actor=staff, run=run, task=other, verdict="clean", reason="fine")
    made = cells_nominate(run=run, hits=hits)
    assert [(c.task, c.verdict) for c in made] == [(task, "needs_review")]
    nominated = CellVerdict.objects.get(task=task)
    assert nominated.reason == "Scanner hits: grader-files, process-kill ×2."
    assert (nominated.quote, nominated.line, nominated.decided_by) == ("kill 12", 4, None)
    assert CellVerdict.objects.get(task=other).verdict == "clean"
    assert ModerationAction.objects.count() == 1  # the nomination is not a moderator's act


def test_a_deployment_can_let_needs_review_rank(settings, staff, cell):
    cell_verdict_set(
        actor=staff, run=cell.run, task=cell.task, verdict="needs_review", reason="look"
    )
    assert not run_ranks(cell.run)
    settings.D2K_AUDIT_HOLD_NEEDS_REVIEW = False
    assert "needs_review" not in held_verdicts()
    assert run_ranks(cell.run) and ranked(cell) == [cell.pk]


def test_staff_search_cells_by_verdict_and_by_rule(staff, cell):
    run = cell.run
    _hit(run, cell.task, "grader-files", 3)
    cell_verdict_set(actor=staff, run=run, task=cell.task, verdict="reward_hack", reason="r")
    assert list(cell_verdicts_search(verdict="reward_hack")) == [CellVerdict.objects.get()]
    assert list(cell_verdicts_search(rule="grader-files")) == [CellVerdict.objects.get()]
    assert not cell_verdicts_search(verdict="clean").exists()
    assert not cell_verdicts_search(rule="secrets").exists()


def test_the_verified_badge_needs_every_kernel_on_the_boards_gpu(cell):
    run = cell.run
    RunFactory(owner=run.owner)  # a second upload for the same model, agent, condition
    RunFactory(owner=run.owner, agent="other-agent")
    row = {"run_id": run.pk, "hardware": "NVIDIA H200"}
    audit = leaderboard_entry_audit(rows=[row])
    assert audit[run.pk].verified and audit[run.pk].uploads == 2
    assert not leaderboard_entry_audit(rows=[{**row, "hardware": "NVIDIA B200"}])[run.pk].verified
    # A kernel evaluated in the interpreter (or not yet) is not verified on a GPU.
    interpreted = EvaluationFactory(status="correct", mode="interpret", submission__run=run)
    scores_refresh(submission_ids=[interpreted.submission_id])
    assert not leaderboard_entry_audit(rows=[row])[run.pk].verified

"""Assessments and materialised scores follow every verdict, review, assessment and pair."""

import pytest
from django.core.exceptions import ValidationError

from evaluator.services.evaluations import evaluation_review
from runs.services import run_pair
from scoring.models import Assessment, RunScore, TaskScore
from scoring.selectors import run_scores_view
from scoring.services import AssessmentsInvalid, assessment_admin_save, assessment_record
from tests.factories import RunFactory, SubmissionFactory, TaskVersionFactory, UserFactory
from tests.scoring.conftest import SOURCE_GOOD

pytestmark = pytest.mark.django_db


def kernel(task, run=None, source=SOURCE_GOOD):
    return SubmissionFactory(task=task, task_version=task.current_version, run=run, source=source)


def sources(submission):
    return {
        (a.property.key, a.source): a.value
        for a in Assessment.objects.filter(submission=submission).select_related("property")
    }


def test_detectors_assess_the_source_when_the_evaluation_finishes(scored_task, finish):
    submission = kernel(scored_task)
    assert not Assessment.objects.exists()
    finish(submission, mode="interpret")
    # "single_pass" is manual and has no counters (interpret mode): no assessment at all.
    assert sources(submission) == {
        ("max", "detector"): True,
        ("online", "detector"): False,
        ("exp2", "detector"): True,
    }
    found = Assessment.objects.get(submission=submission, property__key="max")
    assert found.rationale and found.kind == "implemented" and found.who is None


def test_a_rerun_recomputes_the_machine_assessments(scored_task, finish):
    submission = kernel(scored_task)
    finish(submission, counters=[{"dram_bytes": 120, "min_bytes": 100, "tool": "ncu"}])
    assert sources(submission)[("single_pass", "counters")] is True
    scored_task.properties.filter(key="exp2").update(detector={"kind": "regex", "pattern": "nope"})
    finish(submission, counters=None, environment={"gpu": "NVIDIA H200", "counters": "no ncu"})
    got = sources(submission)
    assert got[("exp2", "detector")] is False
    assert ("single_pass", "counters") not in got  # counters not read this time: no guess


@pytest.mark.parametrize(
    ("note", "counted"),
    [
        # The pass started and read nothing: its counter rules find nothing implemented.
        ("not read: the profiling pass was killed (timeout)", False),
        ("not read: the profiled call failed (RuntimeError)", False),
        ("not read: ncu printed no table of kernels", False),
        # The worker reads counters for no one: no guess either way.
        ("not read: Nsight Compute (ncu) is not installed on this worker", None),
        ("not read: switched off (--no-counters)", None),
    ],
)
def test_a_counters_pass_that_read_nothing_leaves_its_rules_no_source_to_fall_back_on(
    scored_task, finish, note, counted
):
    # `max` has a detector (true on this source) and, here, a counter rule too.
    scored_task.properties.filter(key="max").update(counters={"kind": "tensor_share", "min": 0.5})
    submission = kernel(scored_task, RunFactory())
    finish(submission, environment={"gpu": "NVIDIA H200", "counters": note})
    got = sources(submission)
    assert got[("max", "detector")] is True
    assert got.get(("max", "counters")) is counted
    assert got.get(("single_pass", "counters")) is counted
    credited = TaskScore.objects.get(submission=submission).implementation["L1"]
    assert (credited == 0.0) is (counted is False)


def test_task_score_holds_the_task_geomean_and_the_implementation(scored_task, finish):
    submission = kernel(scored_task)
    finish(submission, speedups=(2.0, 8.0))
    score = TaskScore.objects.get(submission=submission)
    assert score.counts and score.status == "correct" and score.hardware == "NVIDIA H200"
    assert score.speedup == pytest.approx(4.0) and score.sol_fraction == pytest.approx(0.5)
    # max (1) credited, online (2) not found, single_pass (2) not assessed, exp2 (1) found
    assert score.implementation == pytest.approx(
        {"L1": 100 / 3, "L2": 0.0, "L3": 100.0, "combined": 100 * 2 / 6}
    )


def test_the_run_score_changes_with_every_new_verdict(scored_task, finish):
    other = TaskVersionFactory(task__slug="other", task__position=1).task
    run = RunFactory()
    first, second = kernel(scored_task, run), kernel(other, run)
    finish(first, speedups=(2.0, 8.0))
    finish(second, speedups=(9.0,))
    score = RunScore.objects.get(run=run)
    assert score.timed and score.hardware == "NVIDIA H200"
    assert (score.tasks_total, score.tasks_correct, score.correctness_rate) == (2, 2, 1.0)
    assert score.performance_score == pytest.approx((4.0 + 9.0) / 2)
    assert score.geomean_speedup == pytest.approx(6.0) and score.geomean_n == 2  # sqrt(36)
    finish(second, status="incorrect", speedups=(9.0,))
    score.refresh_from_db()
    assert score.tasks_correct == 1 and score.correctness_rate == 0.5
    assert score.performance_score == pytest.approx(4.0 / 2)
    assert score.geomean_speedup == pytest.approx(4.0) and score.geomean_n == 1
    assert dict(map(tuple, score.fast_p))[1.0] == 0.5


def test_interpret_mode_gives_no_speed_scores(scored_task, finish):
    run = RunFactory()
    submission = kernel(scored_task, run)
    finish(submission, mode="interpret")
    # Judged from the source alone: the run's implementation score is provisional.
    assert run_scores_view(run=run, pair=None).mine["implementation_provisional"] == 1
    finish(submission)
    assert run_scores_view(run=run, pair=None).mine["implementation_provisional"] == 0
    finish(submission, mode="interpret")
    score = RunScore.objects.get(run=run)
    assert score.correctness_rate == 1.0 and not score.timed
    assert score.performance_score is None and score.geomean_speedup is None
    assert score.fast_p is None and "interpret" in score.untimed_reason


def test_only_a_correct_kernel_earns_implementation_credit(scored_task, finish):
    other = TaskVersionFactory(task__slug="other", task__position=1).task
    run = RunFactory()
    submission = kernel(scored_task, run)
    kernel(other, run)  # a task without properties: in no level's count
    finish(submission, speedups=(2.0, 8.0))
    score = RunScore.objects.get(run=run)
    assert score.implementation["L3"] == 100.0
    counted = run_scores_view(run=run, pair=None).mine["implementation_tasks"]
    assert counted["L3"] == counted["combined"] == {"counted": 1, "total": 1}
    finish(submission, status="incorrect", speedups=(2.0, 8.0))
    score.refresh_from_db()
    # The detectors still found exp2 (the page shows it), but nothing is credited.
    assert sources(submission)[("exp2", "detector")] is True
    assert score.implementation["L3"] == 0.0 and score.implementation["combined"] == 0.0
    assert TaskScore.objects.get(submission=submission).implementation["combined"] == 0.0
    counted = run_scores_view(run=run, pair=None).mine["implementation_tasks"]
    assert counted["L3"] == {"counted": 0, "total": 1}


@pytest.mark.parametrize(("decision", "counts"), [("cleared", True), ("hacked", False)])
def test_a_review_decides_whether_a_flagged_result_counts(
    scored_task, finish, decision, counts, django_capture_on_commit_callbacks
):
    run = RunFactory()
    submission = kernel(scored_task, run)
    evaluation = finish(submission, status="flagged")
    assert RunScore.objects.get(run=run).tasks_correct == 0
    with django_capture_on_commit_callbacks(execute=True):
        evaluation_review(evaluation=evaluation, decision=decision, reviewer=UserFactory())
    score = RunScore.objects.get(run=run)
    assert score.tasks_correct == int(counts)
    assert (score.implementation["L3"] == 100.0) is counts  # a hack scores as a missing kernel


def test_precedence_is_admin_over_judge_over_counters_over_detector(
    scored_task, finish, django_capture_on_commit_callbacks
):
    run = RunFactory()
    submission = kernel(scored_task, run)
    finish(submission)
    judge, admin = UserFactory(), UserFactory(is_staff=True)
    assert RunScore.objects.get(run=run).implementation["L3"] == 100.0
    item = {"kind": "implemented", "submission": submission.pk, "property": "exp2"}
    with django_capture_on_commit_callbacks(execute=True):
        assessment_record(
            items=[{**item, "value": False, "rationale": "exp2 of a constant"}], user=judge
        )
    assert RunScore.objects.get(run=run).implementation["L3"] == 0.0
    detector = Assessment.objects.get(
        submission=submission, property__key="exp2", source="detector"
    )
    detector.value = True
    detector.rationale = "checked by hand"
    with django_capture_on_commit_callbacks(execute=True):
        assessment_admin_save(assessment=detector, user=admin)
    got = sources(submission)
    # The detector's own row is kept as it was; the admin's is stored beside it.
    assert (got[("exp2", "detector")], got[("exp2", "judge")], got[("exp2", "admin")]) == (
        True,
        False,
        True,
    )
    assert RunScore.objects.get(run=run).implementation["L3"] == 100.0
    view = run_scores_view(run=run, pair=None)
    assert view.mine["implementation"]["L3"] == 100.0


def test_a_judge_batch_with_one_bad_item_stores_nothing(scored_task, finish):
    submission = kernel(scored_task)
    finish(submission)
    good = {
        "kind": "implemented",
        "submission": submission.pk,
        "property": "max",
        "value": True,
        "rationale": "tl.max over the row",
    }
    bad = {**good, "property": "nope", "value": "yes"}
    with pytest.raises(AssessmentsInvalid) as caught:
        assessment_record(items=[good, bad], user=UserFactory())
    assert [e["index"] for e in caught.value.errors] == [1]
    assert len(caught.value.errors[0]["errors"]) == 2
    assert not Assessment.objects.filter(source="judge").exists()


def test_proposed_assessments_make_the_discovery_score(
    scored_task, finish, django_capture_on_commit_callbacks
):
    from runs.models import Proposal

    run = RunFactory()
    Proposal.objects.create(run=run, task=scored_task, text="Use an online normalizer.")
    finish(kernel(scored_task, run))
    assert RunScore.objects.get(run=run).discovery["combined"] is None  # not assessed yet
    base = {"kind": "proposed", "run": run.pk, "task": "softmax", "rationale": "stated"}
    with django_capture_on_commit_callbacks(execute=True):
        assessment_record(
            items=[
                {**base, "property": "max", "value": True},
                {**base, "property": "online", "value": True},
                {**base, "property": "exp2", "value": False},
            ],
            user=UserFactory(),
        )
    discovery = RunScore.objects.get(run=run).discovery
    assert discovery == pytest.approx({"L1": 100.0, "L2": 0.0, "L3": 0.0, "combined": 50.0})


def test_a_proposed_assessment_needs_the_runs_proposal(scored_task):
    run = RunFactory()
    item = {"kind": "proposed", "run": run.pk, "task": "softmax", "property": "max"}
    with pytest.raises(AssessmentsInvalid) as caught:
        assessment_record(items=[{**item, "value": True, "rationale": "x"}], user=UserFactory())
    assert "proposed no design" in caught.value.errors[0]["errors"][0]


def test_pairing_gives_the_geomean_over_tasks_correct_in_both_and_the_uplift(
    scored_task, finish, django_capture_on_commit_callbacks
):
    other = TaskVersionFactory(task__slug="other", task__position=1).task
    owner = UserFactory()
    plain, guided = RunFactory(owner=owner), RunFactory(owner=owner, levels=["L1"])
    finish(kernel(scored_task, plain), speedups=(2.0,))
    finish(kernel(other, plain), status="incorrect")
    finish(kernel(scored_task, guided), speedups=(4.0,))
    finish(kernel(other, guided), speedups=(9.0,))
    assert RunScore.objects.get(run=guided).geomean_n == 2  # single run: its correct tasks
    with django_capture_on_commit_callbacks(execute=True):
        run_pair(run=plain, other=guided, user=owner)
    mine = RunScore.objects.get(run=guided)
    assert (mine.geomean_speedup, mine.geomean_n) == (pytest.approx(4.0), 1)
    plain.refresh_from_db()
    view = run_scores_view(run=plain, pair=guided)
    assert view.uplift["correctness_rate"] == pytest.approx(1.0 - 0.5)
    assert view.uplift["performance_score"] == pytest.approx((4 + 9) / 2 - 2 / 2)
    assert view.uplift["geomean_speedup"] == pytest.approx(4.0 - 2.0)
    assert view.uplift["without"] == plain.pk and view.uplift["with"] == guided.pk


def test_an_admin_assessment_of_another_tasks_property_is_refused(scored_task, finish):
    other = TaskVersionFactory(task__slug="other").task
    from tests.factories import DesignPropertyFactory

    foreign = DesignPropertyFactory(task=other, key="x")
    submission = kernel(scored_task)
    bad = Assessment(
        kind="implemented", submission=submission, task=scored_task, property=foreign, value=True
    )
    with pytest.raises(ValidationError):
        assessment_admin_save(assessment=bad, user=UserFactory(is_staff=True))


def test_a_machine_assessment_names_its_evidence_kind(scored_task, finish):
    submission = kernel(scored_task)
    finish(submission, counters=[{"dram_bytes": 120, "min_bytes": 100, "tool": "ncu"}])
    kinds = {
        (a.property.key, a.source): a.evidence_kind
        for a in Assessment.objects.filter(submission=submission).select_related("property")
    }
    assert kinds[("max", "detector")] == "source"
    assert kinds[("single_pass", "counters")] == "counter"


def test_only_the_kernels_the_profiler_saw_launched_count(scored_task, finish):
    submission = kernel(scored_task)
    finish(submission, environment={"gpu": "NVIDIA H200", "launched_kernels": ["_softmax"]})
    assert sources(submission)[("exp2", "detector")] is True
    # The same source, but the verdict saw another kernel run: `_softmax` earns nothing.
    finish(submission, environment={"gpu": "NVIDIA H200", "launched_kernels": ["_other"]})
    got = sources(submission)
    assert got[("exp2", "detector")] is False and got[("max", "detector")] is False


def test_the_page_marks_judge_assessed_properties_and_an_interpreter_verdict(
    client, scored_task, finish
):
    submission = kernel(scored_task)
    submission.is_public = True
    submission.save()
    finish(submission, mode="interpret")
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert 'id="properties-provisional"' in page
    # single_pass has a counter rule: a machine can judge it on the GPU; none is manual-only.
    assert "judge/admin-assessed</span>" not in page
    assert "from <code>source</code>" in page
    single_pass = scored_task.properties.get(key="single_pass")
    single_pass.counters = None  # as the catalog's loader saves a changed property
    single_pass.save()
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert page.count("judge/admin-assessed</span>") == 1
    data = client.get(f"/api/submissions/{submission.pk}/").json()
    by_key = {p["key"]: p for p in data["properties"]}
    assert by_key["single_pass"]["judge_assessed"] is True
    assert by_key["max"]["evidence_kind"] == "source" and not by_key["max"]["judge_assessed"]
    finish(submission)  # a cuda verdict is not provisional
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert 'id="properties-provisional"' not in page


def test_the_run_page_marks_an_interpreter_implementation_score_provisional(
    client, scored_task, finish
):
    run = RunFactory(is_public=True)
    submission = kernel(scored_task, run)
    finish(submission, mode="interpret")
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="implementation-provisional"' in page and "1 task ran in the interpreter" in page
    assert "(1/1 tasks)" in page  # L3 and combined: the one task counted
    finish(submission)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="implementation-provisional"' not in page

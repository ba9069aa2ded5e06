"""An unfinished run's progress: its evaluations counted, its place in its pool's fair
queue and the time to its last verdict at the pool's measured pace, in the run API's
`progress` and in words on the run page (runs.selectors.run_progress)."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from evaluator.models import Evaluation, WorkerBeat
from evaluator.services.pools import pool_queue
from runs.selectors import run_progress
from tests.factories import EvaluationFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"


def _beat(worker, *, hardware=H200, slots=1, age_s=1.0):
    now = timezone.now()
    WorkerBeat.objects.create(
        worker=worker, hardware=hardware, queue=pool_queue(hardware), started_at=now,
        seen_at=now - timedelta(seconds=age_s), slots=slots,
    )  # fmt: skip


def _evaluation(*, status, hardware=H200, created_s, started_s=None, ended_s=None, **submission):
    """An evaluation made `created_s` seconds ago (started and ended so many seconds ago)."""
    now = timezone.now()
    evaluation = EvaluationFactory(
        status=status,
        target_hardware=hardware,
        started_at=None if started_s is None else now - timedelta(seconds=started_s),
        finished_at=None if ended_s is None else now - timedelta(seconds=ended_s),
        **{f"submission__{k}": v for k, v in submission.items()},
    )
    Evaluation.objects.filter(pk=evaluation.pk).update(
        created_at=now - timedelta(seconds=created_s)
    )
    return evaluation


@pytest.fixture
def busy():
    """Run R of lab A on the H200 pool (3 slots live: 30 s an evaluation, a verdict every
    10 s): 2 of its 5 kernels finished, 3 waiting. Ahead of them in the pool, lab B: one
    running and 4 waiting, older; B was served less recently than A, so the fair queue
    gives B the first claim of each turn. Lab C's 10 waiting on the H100 pool do not count.
    """
    _beat("gpu-a:1", slots=2)
    _beat("gpu-a:2", slots=1)
    _beat("gpu-a:3", slots=4, age_s=600)  # stopped reporting
    _beat("gpu-b:1", hardware=H100, slots=8)
    lab, b, c = UserFactory(username="lab-a"), UserFactory(), UserFactory()
    run = RunFactory(owner=lab, hardware=H200)
    mine = {"run": run, "owner": lab}
    # The pool's last six verdicts, 30 s each, one every 10 s: the two newest are R's.
    for i, ended in enumerate((10, 20, 30, 40, 50, 60)):
        who = mine if i < 2 else {}
        _evaluation(status="correct", created_s=500, started_s=ended + 30, ended_s=ended, **who)
    _evaluation(status="running", created_s=400, started_s=60, owner=b)
    for i in range(4):
        _evaluation(status="queued", created_s=300 - i, owner=b)
    for i in range(3):
        _evaluation(status="queued", created_s=200 - i, **mine)
    for i in range(10):
        _evaluation(status="queued", hardware=H100, created_s=900 - i, owner=c)
    return run


BUSY = {
    "total": 5,
    "finished": 2,
    "running": 0,
    "waiting": 3,
    "hardware": H200,
    # B's running one, then B's first claim of the turn in which R's first is claimed.
    "queue_position": 2,
    # 6 ahead of R's last (1 running, R's 2 and B's 3 claimed before it): it starts after
    # 4 verdicts (10 s apart), then takes 30 s.
    "eta_seconds": 70,
    "per_evaluation_s": 30.0,
    "slots": 3,
    "basis": "throughput of the pool's last 6 verdicts",
}


def test_the_progress_counts_the_fair_queue_of_the_runs_own_pool_only(busy):
    assert run_progress(run=busy).as_dict() == BUSY


def test_a_run_being_evaluated_is_at_position_0(busy):
    first = Evaluation.objects.filter(submission__run=busy, status="queued").earliest("created_at")
    Evaluation.objects.filter(pk=first.pk).update(status="running", started_at=timezone.now())
    progress = run_progress(run=busy)
    assert (progress.running, progress.waiting, progress.queue_position) == (1, 2, 0)


def test_a_run_with_nothing_waiting_has_no_position_and_waits_for_its_last_start(busy):
    Evaluation.objects.filter(submission__run=busy, status="queued").update(status="correct")
    last = Evaluation.objects.filter(submission__run=busy).earliest("created_at")
    started = timezone.now() - timedelta(seconds=12)
    Evaluation.objects.filter(pk=last.pk).update(status="running", started_at=started)
    progress = run_progress(run=busy)
    assert (progress.finished, progress.running, progress.waiting) == (4, 1, 0)
    assert progress.queue_position is None
    assert progress.eta_seconds in (17, 18)  # 30 s, 12 of them gone


def test_no_live_worker_means_no_estimate(busy):
    WorkerBeat.objects.filter(hardware=H200).update(seen_at=timezone.now() - timedelta(hours=1))
    progress = run_progress(run=busy).as_dict()
    assert progress == {
        **BUSY,
        "eta_seconds": None,
        "per_evaluation_s": None,
        "slots": 0,
        "basis": "no live worker for this pool",
    }


def test_a_pool_that_has_finished_nothing_yet_gives_no_estimate():
    _beat("gpu-b:1", hardware=H100)
    run = RunFactory(hardware=H100)
    _evaluation(status="queued", hardware=H100, created_s=5, run=run, owner=run.owner)
    progress = run_progress(run=run)
    assert (progress.queue_position, progress.eta_seconds) == (0, None)
    assert (progress.slots, progress.basis) == (1, "no measured evaluation yet")


def test_the_progress_takes_a_fixed_number_of_queries(busy, django_assert_num_queries):
    # kernels, their latest evaluations, live slots, recent verdicts, the pool's queue per
    # owner, when those owners were last served, the owner's queue in claim order
    with django_assert_num_queries(7):
        run_progress(run=busy)


def _text(html):
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


WORDS = (
    "2 of 5 evaluations finished · 2 ahead in the NVIDIA H200 queue · about 1 min to the "
    "last verdict (measured: 30 s per evaluation, 3 at once)"
)


def test_the_api_and_the_page_show_the_progress_of_an_unfinished_run(client, busy):
    body = APIClient().get(f"/api/runs/{busy.pk}/").json()
    assert (body["state"], body["progress"]) == ("evaluating", BUSY)
    assert WORDS in _text(client.get(f"/runs/{busy.pk}/").content.decode())


def test_the_page_is_never_served_with_a_stale_progress(client, busy):
    assert WORDS in _text(client.get(f"/runs/{busy.pk}/").content.decode())
    # A claim changes no data version: the page is built again all the same.
    first = Evaluation.objects.filter(submission__run=busy, status="queued").earliest("created_at")
    Evaluation.objects.filter(pk=first.pk).update(status="running", started_at=timezone.now())
    text = _text(client.get(f"/runs/{busy.pk}/").content.decode())
    assert (
        "2 of 5 evaluations finished · being evaluated on the NVIDIA H200 pool (1 running)" in text
    )


def test_the_owner_sees_it_too_and_no_estimate_says_why(client, busy):
    WorkerBeat.objects.all().delete()
    client.force_login(busy.owner)
    text = _text(client.get(f"/runs/{busy.pk}/").content.decode())
    assert (
        "2 ahead in the NVIDIA H200 queue · no estimate of the time to the last verdict: "
        "no live worker for this pool"
    ) in text


def test_a_finished_run_shows_no_progress(client, busy):
    Evaluation.objects.filter(submission__run=busy).update(status="correct")
    body = APIClient().get(f"/api/runs/{busy.pk}/").json()
    assert (body["state"], body["progress"]) == ("complete", None)
    html = client.get(f"/runs/{busy.pk}/").content.decode()
    assert 'id="run-progress"' not in html and "to the last verdict" not in html


def test_the_schema_documents_the_progress(client):
    schema = client.get("/api/schema/?format=json").json()
    described = schema["paths"]["/api/runs/{id}/"]["get"]["responses"]["200"]["description"]
    assert "`progress`" in described and "`queue_position`" in described

"""The queue is fair across owners: a worker takes the next evaluation of the owner
served least recently, so one lab's long campaign does not hold back another's. Within
an owner, oldest first, a run and its twin together, task by task."""

from datetime import timedelta

import pytest
from django.utils import timezone

from evaluator.models import EvaluationStatus
from evaluator.selectors import pool_ahead
from evaluator.services.jobs import evaluation_claim_next
from runs.models import Run
from tests.factories import EvaluationFactory, RunFactory, TaskVersionFactory, UserFactory

pytestmark = pytest.mark.django_db


def _queued(owner, n, **submission):
    """A queued evaluation of `owner`'s, as if created `n` seconds from now (the model
    stamps its creation itself); `submission` sets its submission's fields."""
    evaluation = EvaluationFactory(
        submission__owner=owner,
        **{f"submission__{k}": v for k, v in submission.items()},
        status=EvaluationStatus.QUEUED,
        mode="",
        started_at=None,
        finished_at=None,
        target_hardware="",
    )
    created = timezone.now() + timedelta(seconds=n)
    type(evaluation).objects.filter(pk=evaluation.pk).update(created_at=created)
    return evaluation


def test_workers_take_evaluations_round_robin_across_owners():
    big, small, late = UserFactory(), UserFactory(), UserFactory()
    campaign = [_queued(big, n) for n in range(6)]  # uploaded first
    lab = [_queued(small, 10 + n) for n in range(2)]
    newcomer = _queued(late, 20)
    taken = [evaluation_claim_next(worker="w1").pk for _ in range(9)]
    assert (
        taken
        == [
            campaign[0].pk,  # nobody has been served: the oldest
            lab[0].pk,  # never served: before the campaign's second
            newcomer.pk,
            campaign[1].pk,
            lab[1].pk,
            *[e.pk for e in campaign[2:]],
        ]
    )
    assert evaluation_claim_next(worker="w1") is None


def _run_kernels(owner, run, tasks, n):
    """Queued evaluations of `run`'s kernels for `tasks`, created one a second from `n`
    seconds from now."""
    return {
        version.task.slug: _queued(owner, n + i, run=run, task_version=version)
        for i, version in enumerate(tasks)
    }


def test_a_run_and_its_twin_are_claimed_task_by_task():
    # A paired campaign: the run without guidance uploaded first, its twin ten seconds
    # later. The queue takes each task's two kernels one after the other (they can share
    # the GPU's clean reference measurement), then the owner's later upload.
    lab = UserFactory()
    tasks = [TaskVersionFactory(task__slug=slug) for slug in ("conv", "gemm", "softmax")]
    plain = RunFactory(owner=lab)
    guided = RunFactory(owner=lab, levels=["L1", "L2", "L3"], pair=plain)
    Run.objects.filter(pk=plain.pk).update(pair=guided)
    Run.objects.filter(pk=guided.pk).update(created_at=timezone.now() + timedelta(seconds=10))
    first = _run_kernels(lab, plain, tasks, 1)
    lone = _queued(lab, 5)
    second = _run_kernels(lab, guided, tasks, 11)
    order = [first["conv"], second["conv"], first["gemm"], second["gemm"]]
    order += [first["softmax"], second["softmax"], lone]

    # Where a run's page says its kernels are in the queue: the claim order's places.
    ahead = pool_ahead(hardware="", owner_id=lab.pk, among=[e.pk for e in second.values()])
    assert ahead == (1, 5)

    taken = [evaluation_claim_next(worker="w1").pk for _ in range(7)]
    assert taken == [e.pk for e in order]


def test_an_unpaired_run_goes_before_the_owners_later_uploads_and_after_earlier_ones():
    lab = UserFactory()
    tasks = [TaskVersionFactory(task__slug=slug) for slug in ("b_task", "a_task")]
    earlier = _queued(lab, 0)
    run = RunFactory(owner=lab)
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() + timedelta(seconds=1))
    kernels = _run_kernels(lab, run, tasks, 2)
    later = _queued(lab, 30)
    taken = [evaluation_claim_next(worker="w1").pk for _ in range(4)]
    assert taken == [earlier.pk, kernels["a_task"].pk, kernels["b_task"].pk, later.pk]

"""The queue is fair across owners: a worker takes the next evaluation of the owner
served least recently, so one lab's long campaign does not hold back another's."""

from datetime import timedelta

import pytest
from django.utils import timezone

from evaluator.models import EvaluationStatus
from evaluator.services.jobs import evaluation_claim_next
from tests.factories import EvaluationFactory, UserFactory

pytestmark = pytest.mark.django_db


def _queued(owner, n):
    return EvaluationFactory(
        submission__owner=owner,
        status=EvaluationStatus.QUEUED,
        mode="",
        started_at=None,
        finished_at=None,
        target_hardware="",
        created_at=timezone.now() + timedelta(seconds=n),
    )


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

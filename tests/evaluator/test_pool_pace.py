"""A pool's measured pace and the fair queue's count of what goes first
(evaluator.selectors.pool_pace, fair_claims_before, pace_eta_s), and the slots a worker
reports (pools.worker_beat)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.conf import Conf

from evaluator.models import WorkerBeat
from evaluator.selectors import PoolPace, fair_claims_before, pace_eta_s, pool_pace
from evaluator.services.pools import pool_queue, worker_beat
from tests.factories import EvaluationFactory

pytestmark = pytest.mark.django_db

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"


def beat(worker, *, hardware=H200, slots=1, age_s=1.0, now=None):
    now = now or timezone.now()
    return WorkerBeat.objects.create(
        worker=worker, hardware=hardware, queue=pool_queue(hardware), started_at=now,
        seen_at=now - timedelta(seconds=age_s), slots=slots,
    )  # fmt: skip


def verdicts(*, hardware=H200, wall_s, every_s, count, now):
    """`count` finished evaluations of `wall_s` seconds each, the last one `every_s` ago
    and each earlier one `every_s` before the next."""
    for i in range(count):
        end = now - timedelta(seconds=every_s * (i + 1))
        EvaluationFactory(
            target_hardware=hardware,
            started_at=end - timedelta(seconds=wall_s),
            finished_at=end,
        )


def test_a_busy_pool_is_measured_by_its_throughput():
    now = timezone.now()
    beat("gpu-a:1", slots=2, now=now)
    beat("gpu-a:2", slots=1, now=now)
    beat("gpu-a:3", slots=4, age_s=500, now=now)  # stopped reporting: not counted
    beat("gpu-b:1", hardware=H100, slots=8, now=now)  # another pool
    verdicts(wall_s=30, every_s=10, count=6, now=now)
    verdicts(hardware=H100, wall_s=5, every_s=1, count=6, now=now)

    pace = pool_pace(hardware=H200, now=now)

    assert (pace.slots, pace.per_evaluation_s) == (3, 30.0)
    assert pace.interval_s == pytest.approx(10.0)  # 6 verdicts over 50 s
    assert pace.basis == "throughput of the pool's last 6 verdicts"


def test_a_pool_idle_between_its_verdicts_is_measured_by_time_over_slots():
    now = timezone.now()
    beat("gpu-a:1", slots=3, now=now)
    verdicts(wall_s=30, every_s=3600, count=4, now=now)  # one an hour: the span is idle time

    pace = pool_pace(hardware=H200, now=now)

    assert (pace.per_evaluation_s, pace.interval_s) == (30.0, 10.0)
    assert pace.basis == "median time of the pool's last 4 evaluations over 3 at once"


def test_verdicts_older_than_a_day_or_beyond_the_sample_are_not_measured():
    now = timezone.now()
    beat("gpu-a:1", now=now)
    verdicts(wall_s=500, every_s=3600 * 25, count=3, now=now)  # all over a day old
    assert pool_pace(hardware=H200, now=now).basis == "no measured evaluation yet"
    verdicts(wall_s=20, every_s=20, count=60, now=now)
    pace = pool_pace(hardware=H200, now=now)
    assert (pace.per_evaluation_s, pace.basis) == (
        20.0,
        "throughput of the pool's last 50 verdicts",
    )


def test_no_live_worker_and_nothing_measured_give_no_pace():
    now = timezone.now()
    verdicts(wall_s=30, every_s=10, count=3, now=now)
    beat("gpu-a:1", age_s=500, now=now)
    pace = pool_pace(hardware=H200, now=now)
    assert (pace.slots, pace.interval_s, pace.basis) == (0, None, "no live worker for this pool")
    assert pace_eta_s(pace=pace, ahead=3) is None

    beat("gpu-b:1", hardware=H100, now=now)
    pace = pool_pace(hardware=H100, now=now)
    assert (pace.slots, pace.interval_s, pace.basis) == (1, None, "no measured evaluation yet")
    assert pace_eta_s(pace=pace, ahead=3) is None


def test_an_unfinished_or_never_started_evaluation_is_not_measured():
    now = timezone.now()
    beat("gpu-a:1", now=now)
    EvaluationFactory(target_hardware=H200, status="running", started_at=now, finished_at=None)
    EvaluationFactory(target_hardware=H200, started_at=None, finished_at=now)  # imported
    assert pool_pace(hardware=H200, now=now).basis == "no measured evaluation yet"


@pytest.mark.parametrize(
    ("own_before", "others", "claims"),
    [
        (0, [], 0),  # alone and first
        (3, [], 3),  # its owner's three older ones go first
        (0, [(5, True)], 1),  # another owner's turn comes first: one of its five
        (0, [(5, False)], 0),  # this owner's turn comes first
        (2, [(5, True), (1, False), (9, False)], 2 + 3 + 1 + 2),
        (4, [(2, True)], 4 + 2),  # an owner with less waiting than the turns
    ],
)
def test_the_fair_queue_claims_one_per_owner_per_turn(own_before, others, claims):
    assert fair_claims_before(own_before=own_before, others=others) == claims


@pytest.mark.parametrize(
    ("ahead", "eta"),
    [
        (0, 30),  # a free slot: one evaluation's time
        (2, 30),  # still a free slot among three
        (3, 40),  # one must finish first
        (8, 90),
    ],
)
def test_the_eta_waits_for_a_slot_then_takes_one_evaluation(ahead, eta):
    pace = PoolPace(hardware=H200, slots=3, per_evaluation_s=30.0, interval_s=10.0, basis="")
    assert pace_eta_s(pace=pace, ahead=ahead) == eta


def test_a_worker_reports_the_evaluations_it_runs_at_once(monkeypatch):
    monkeypatch.setattr(Conf, "WORKERS", 3)
    now = timezone.now()
    beat_row = worker_beat(worker="gpu-a:1", hardware=H200, gpu=None, started_at=now)
    assert WorkerBeat.objects.get(pk=beat_row.pk).slots == 3
    monkeypatch.setattr(Conf, "WORKERS", 0)
    worker_beat(worker="gpu-a:1", hardware=H200, gpu=None, started_at=now)
    assert WorkerBeat.objects.get(pk=beat_row.pk).slots == 1

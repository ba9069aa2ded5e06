"""The example pair's scores on its run pages and in `GET /api/runs/<id>/`, against
figures this test works out by hand. The kernels are the example's; the verdicts are
written as a GPU worker would write them (no GPU here), so the speed scores exist."""

import math
from pathlib import Path

import pytest
from django.db import transaction

from evaluator.services.evaluations import evaluation_verdict_write
from runs.models import Trace
from runs.services import example_runs_load
from scoring.models import SOURCE_PRECEDENCE, Assessment
from submissions.models import Submission
from task_catalog.models import DesignProperty, Task
from task_catalog.services import catalog_load
from tests.scoring.conftest import make_verdict, timed_workload

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["layernorm_fwd", "prefix_scan", "row_softmax"]
# (status, speedup of the one timed workload written) per run and task
PLAIN = {"row_softmax": ("correct", 1.5), "layernorm_fwd": ("correct", 2.0),
         "prefix_scan": ("incorrect", None)}  # fmt: skip
GUIDED = {"row_softmax": ("correct", 3.0), "layernorm_fwd": ("correct", 8.0),
          "prefix_scan": ("correct", 2.0)}  # fmt: skip
pytestmark = pytest.mark.django_db


def verdict(status, speedup):
    return make_verdict(
        status,
        workloads=[timed_workload("timed_0", status=status, speedup=speedup)],
        environment={"gpu": "NVIDIA H200", "counters": "ncu is not installed on this worker"},
    )


@pytest.fixture
def example_pair(django_capture_on_commit_callbacks):
    catalog_load(directory=ROOT / "catalog")
    with django_capture_on_commit_callbacks(execute=False):
        plain, guided = example_runs_load(tasks=TASKS)  # queued, not run
    for run, outcomes in ((plain, PLAIN), (guided, GUIDED)):
        for submission in Submission.objects.filter(run=run).select_related("task"):
            evaluation = submission.evaluations.get()
            with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
                evaluation_verdict_write(
                    evaluation=evaluation, verdict=verdict(*outcomes[submission.task.slug])
                )
    plain.refresh_from_db()
    guided.refresh_from_db()
    return plain, guided


def implementation_by_hand(run):
    """Σ credited weight / Σ weight over every catalog task, per level, from the stored
    assessments: effective = the first source in precedence order; credit needs every
    dependency credited; a task without a correct kernel earns nothing."""
    rank = {s: i for i, s in enumerate(SOURCE_PRECEDENCE)}
    earned = {"L1": 0.0, "L2": 0.0, "L3": 0.0, "combined": 0.0}
    total = dict(earned)
    for task in Task.objects.all():
        props = {p.key: p for p in DesignProperty.objects.filter(task=task)}
        value = {}
        for a in sorted(
            Assessment.objects.filter(
                submission__run=run, task=task, submission__score__counts=True
            ),
            key=lambda a: rank[a.source],
        ):
            value.setdefault(a.property.key, a.value)

        def credited(key, depth=0, props=props, value=value):
            p = props.get(key)
            return bool(p and value.get(key) and depth < 10) and all(
                credited(d, depth + 1) for d in p.depends_on
            )

        for p in props.values():
            for bucket in (p.level, "combined"):
                total[bucket] += p.weight
                earned[bucket] += p.weight if credited(p.key) else 0
    return {b: 100 * earned[b] / total[b] for b in total}


def test_the_example_pair_scores_match_the_figures_worked_out_by_hand(client, example_pair):
    plain, guided = example_pair
    n = Task.objects.count()  # every catalog task is in the runs; the missing ones score 0
    mine = client.get(f"/api/runs/{plain.pk}/").json()["scores"]
    theirs = client.get(f"/api/runs/{guided.pk}/").json()["scores"]
    assert mine["tasks_total"] == n == 26
    assert mine["correctness_rate"] == pytest.approx(2 / n)
    assert theirs["correctness_rate"] == pytest.approx(3 / n)
    assert mine["performance_score"] == pytest.approx((1.5 + 2.0) / n)
    assert theirs["performance_score"] == pytest.approx((3.0 + 8.0 + 2.0) / n)
    # over the tasks correct in both runs: row_softmax and layernorm_fwd
    assert mine["geomean_speedup"] == {"value": pytest.approx(math.sqrt(1.5 * 2.0)), "n": 2}
    assert theirs["geomean_speedup"] == {"value": pytest.approx(math.sqrt(3.0 * 8.0)), "n": 2}
    assert dict(map(tuple, theirs["fast_p"]))[2.0] == pytest.approx(2 / n)  # 3.0 and 8.0
    for scores, run in ((mine, plain), (theirs, guided)):
        assert scores["implementation"] == pytest.approx(implementation_by_hand(run))
        traces = Trace.objects.filter(run=run)
        assert scores["turns"] == sum(t.turns_used for t in traces)
        assert scores["tokens"] == sum(t.tokens_in + t.tokens_out for t in traces)
        assert scores["discovery"] == {"L1": None, "L2": None, "L3": None, "combined": None}
    up = mine["uplift"]
    assert theirs["implementation"]["combined"] > 0
    assert up == theirs["uplift"] and (up["without"], up["with"]) == (plain.pk, guided.pk)
    assert up["correctness_rate"] == pytest.approx(1 / n)
    assert up["performance_score"] == pytest.approx((13.0 - 3.5) / n)
    assert up["geomean_speedup"] == pytest.approx(math.sqrt(24) - math.sqrt(3))
    assert up["implementation"]["combined"] == pytest.approx(
        theirs["implementation"]["combined"] - mine["implementation"]["combined"]
    )
    assert mine["twin"]["performance_score"] == theirs["performance_score"]

    page = client.get(f"/runs/{plain.pk}/").content.decode()
    assert "Example data written by hand" in page
    assert f"{100 * 2 / n:.1f} %" in page and f"{(1.5 + 2.0) / n:.2f}" in page
    assert f"{math.sqrt(3):.2f}×" in page and f"{math.sqrt(24):.2f}×" in page
    assert f"{(13.0 - 3.5) / n:+.2f}" in page and "100 × implemented weight / total weight" in page
    assert f"{mine['implementation']['combined']:.1f}" in page


def test_the_example_kernels_show_their_properties_and_why_counters_are_absent(
    client, example_pair
):
    _, guided = example_pair
    submission = Submission.objects.get(run=guided, task__slug="row_softmax")
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "Design properties" in page and "Online max/sum normalizer" in page
    assert "detector" in page
    assert "counters not read: ncu is not installed on this worker" in page

"""The expert baseline on the task page and in the task API (numbers are test fixtures)."""

import pytest
from django.urls import reverse

from evaluator.services import EXPERT_USERNAME, baseline_import
from leaderboard.selectors import task_expert_baseline
from scoring.services import scores_refresh
from submissions.models import Submission
from tests.evaluator.test_baselines import FIXTURE_GPU, gpu_verdict, gpu_workload
from tests.factories import (
    EvaluationFactory,
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
    return task_with_workloads(task__slug="row_softmax", task__title="Row-wise softmax")


# The fixture workloads run at 12.5 TFLOP/s and 3.25 TB/s: against these ceilings they
# are bound by FLOPs (12.5 / 20 > 3.25 / 10), against the second by bytes.
FLOP_BOUND = {"peak_tflops_bf16": 20.0, "peak_tbps": 10.0}
BYTE_BOUND = {"peak_tflops_bf16": 100.0, "peak_tbps": 4.0}


def with_ceilings(verdict, ceilings):
    verdict["environment"] = {**verdict["environment"], "ceilings": ceilings}
    return verdict


@pytest.fixture
def gemm():
    version = TaskVersionFactory(
        task__slug="gemm_bf16",
        task__title="BF16 GEMM",
        baseline_source="class Model:\n    pass\n",
    )
    WorkloadFactory(version=version, name="bf16_8192", role="timed")
    verdict = gpu_verdict(
        "gemm_bf16", workloads=[gpu_workload("bf16_8192", ref_ms=1.0, ms=1.25, sol=0.6)]
    )
    baseline_import(
        data={"gemm_bf16": with_ceilings(verdict, FLOP_BOUND)}, source_label="fixture.json"
    )
    return version.task


def imported(task, **extra):
    report = baseline_import(data={task.slug: gpu_verdict(**extra)}, source_label="fixture.json")
    assert report.lines[0].outcome == "created"
    return report.lines[0].evaluation_id


# --- selector -------------------------------------------------------------------------


def test_selector_returns_none_without_an_expert_result(task):
    EvaluationFactory(submission=SubmissionFactory(task_version=task.current_version))
    assert task_expert_baseline(task=task) is None


def test_selector_gives_public_timed_workloads_environment_and_geomean(
    task, django_assert_num_queries
):
    evaluation_id = imported(task)
    task.refresh_from_db()

    # the expert's newest evaluation, then its public timed results
    with django_assert_num_queries(2):
        baseline = task_expert_baseline(task=task)

    assert baseline.evaluation_id == evaluation_id
    assert baseline.owner == EXPERT_USERNAME
    assert (baseline.gpu, baseline.driver, baseline.evaluator_version) == (
        FIXTURE_GPU,
        "000.00-fixture",
        "0.2.0",
    )
    assert [row.name for row in baseline.rows] == ["bf16_4096x4096", "fp32_1024x50000"]
    first = baseline.rows[0]
    assert (first.ref_us, first.expert_us, first.speedup) == pytest.approx((200, 100, 2))
    assert (first.sol_percent, first.tflops, first.tbps) == pytest.approx((80, 12.5, 3.25))
    assert baseline.geomean_speedup == pytest.approx(6**0.5)
    assert baseline.geomean_sol_percent == pytest.approx(100 * 0.56**0.5)
    assert baseline.timed_against == "reference.py"  # the fixture task has no baseline.py
    assert baseline.catalog_bar.meets
    assert baseline.catalog_bar.sentence == (
        "Meets the catalog's bar: beats its baseline (geomean 2.45× over `reference.py`)."
    )


def test_selector_takes_the_newest_expert_result_on_the_current_version_only(task):
    imported(task)
    newest = imported(task, message="re-measured")
    # Other users' results and interpret-mode runs are no baseline.
    WorkloadResultFactory(
        evaluation=EvaluationFactory(
            submission=SubmissionFactory(task_version=task.current_version)
        )
    )
    expert = UserFactory(username=EXPERT_USERNAME)
    EvaluationFactory(
        submission=SubmissionFactory(owner=expert, task_version=task.current_version),
        mode="interpret",
    )

    assert task_expert_baseline(task=task).evaluation_id == newest

    TaskVersionFactory(task=task)  # a new current version without a GPU run yet
    task.refresh_from_db()
    assert task_expert_baseline(task=task) is None


# --- page -----------------------------------------------------------------------------


def test_task_page_says_when_there_is_no_gpu_baseline(client, task):
    html = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()

    assert "Expert baseline" in html
    assert "No GPU baseline yet." in html


def test_task_page_shows_the_experts_numbers_and_the_gpu(client, task):
    imported(task)

    html = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()

    assert "No GPU baseline yet." not in html
    assert f"<strong>{FIXTURE_GPU}</strong> (driver 000.00-fixture), evaluator 0.2.0" in html
    assert (
        '<td><code>fp32_1024x50000</code></td>\n        <td class="num">900.0</td>\n'
        '        <td class="num">300.0</td>\n        <td class="num">3.00×</td>\n'
        '        <td class="num">70.0</td>\n        <td class="num">12.50</td>\n'
        '        <td class="num">3.25</td>'
    ) in html
    assert "over the timed workloads): <strong>2.45×</strong>" in html
    assert "hidden_tail" not in html
    assert "Meets the catalog's bar: beats its baseline" in html


def test_task_page_marks_a_baseline_bound_by_its_host(client, task):
    imported(
        task,
        workloads=[
            gpu_workload("bf16_4096x4096", ref_ms=0.2, ms=0.1, ref_host_bound=150),
            gpu_workload("fp32_1024x50000", ref_ms=0.9, ms=0.3, ref_host_bound=3),
            gpu_workload("hidden_tail", ref_ms=0.1, ms=0.1, role="untimed", hidden=True),
        ],
    )

    html = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()

    assert (
        '<td class="num">200.0 <span title="Host-bound: 150 of 200 timed calls outlasted '
        'their launch cover">†</span></td>'
    ) in html
    assert '<td class="num">900.0</td>' in html
    assert "† Host-bound baseline: <code>bf16_4096x4096</code> 150 of 200 timed calls" in html
    assert "fp32_1024x50000</code> 3 of" not in html
    rows = client.get(f"/api/tasks/{task.slug}/").json()["baseline"]["rows"]
    assert [row["ref_host_bound"] for row in rows] == [True, False]


def test_task_page_has_no_host_bound_note_when_no_baseline_is(client, task):
    imported(task)

    html = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()

    assert "host-bound-baseline" not in html
    assert "†" not in html


def test_task_page_labels_the_time_column_by_the_reference_without_a_baseline(client, task):
    imported(task)

    html = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()

    assert '<th class="num">Reference µs</th>' in html
    assert "Baseline µs" not in html
    assert "the task has no <code>baseline.py</code>" in html


def test_task_page_labels_the_time_column_by_the_baseline_where_the_task_has_one(client, gemm):
    html = client.get(reverse("task_catalog:detail", args=[gemm.slug])).content.decode()

    assert '<th class="num">Baseline µs</th>' in html
    assert "Reference µs" not in html
    assert "the task's <code>baseline.py</code>, the PyTorch a practitioner runs" in html


def test_task_page_says_when_the_expert_is_below_the_bar_and_what_it_reaches(client, gemm):
    html = client.get(reverse("task_catalog:detail", args=[gemm.slug])).content.decode()

    assert "<strong>0.80×</strong>" in html
    assert 'data-meets="no"' in html
    assert (
        "Below the catalog's bar: 0.80× of its baseline's speed "
        "(<code>baseline.py</code>), under the 90% asked of a compute-bound task; 60% of "
        "speed of light on its largest workload by FLOPs (<code>bf16_8192</code>)."
    ) in html


def test_a_memory_bound_expert_meets_the_bar_at_80_percent_of_speed_of_light(client, task):
    verdict = gpu_verdict(
        workloads=[
            gpu_workload("bf16_4096x4096", ref_ms=0.9, ms=1.0, sol=0.5),
            gpu_workload("fp32_1024x50000", ref_ms=1.8, ms=2.0, sol=0.85),
            gpu_workload("hidden_tail", ref_ms=0.1, ms=0.1, role="untimed", hidden=True),
        ]
    )
    report = baseline_import(
        data={task.slug: with_ceilings(verdict, BYTE_BOUND)}, source_label="fixture.json"
    )
    assert report.lines[0].outcome == "created"

    html = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()

    assert 'data-meets="yes"' in html
    assert (
        "Meets the catalog's bar: 85% of speed of light on its largest workload by bytes "
        "(<code>fp32_1024x50000</code>), at least the 80% asked of a memory-bound task"
    ) in html


def test_the_experts_ranking_row_is_marked(client, task):
    imported(task)
    other = SubmissionFactory(task_version=task.current_version, owner__username="alice")
    WorkloadResultFactory(evaluation=EvaluationFactory(submission=other), speedup=5.0)
    # As the verdicts' commits do.
    scores_refresh(submission_ids=Submission.objects.values_list("pk", flat=True))

    html = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()

    assert f'<td>{EXPERT_USERNAME} <span class="status">expert</span></td>' in html
    assert "<td>alice</td>" in html


def test_task_page_with_a_baseline_query_count_is_pinned(client, task, django_assert_num_queries):
    imported(task)
    scores_refresh(submission_ids=Submission.objects.values_list("pk", flat=True))
    # data version, task + version, workloads, guidance, properties, current guidance
    # version, ranking (3: scores, their results, the expert's timings), baseline (2),
    # baselines pending
    with django_assert_num_queries(12):
        assert client.get(reverse("task_catalog:detail", args=[task.slug])).status_code == 200


# --- API ------------------------------------------------------------------------------


def test_api_detail_has_the_baseline(client, task):
    evaluation_id = imported(task)

    baseline = client.get(f"/api/tasks/{task.slug}/").json()["baseline"]

    assert baseline["evaluation_id"] == evaluation_id
    assert baseline["owner"] == EXPERT_USERNAME
    assert baseline["gpu"] == FIXTURE_GPU
    assert baseline["driver"] == "000.00-fixture"
    assert baseline["evaluator_version"] == "0.2.0"
    assert baseline["geomean_speedup"] == pytest.approx(6**0.5)
    assert [row["name"] for row in baseline["rows"]] == ["bf16_4096x4096", "fp32_1024x50000"]
    assert baseline["timed_against"] == "reference.py"
    assert baseline["catalog_bar"] == {
        "meets": True,
        "sentence": "Meets the catalog's bar: beats its baseline (geomean 2.45× over "
        "`reference.py`).",
    }
    assert baseline["rows"][1] == pytest.approx(
        {
            "name": "fp32_1024x50000",
            "ref_us": 900.0,
            "expert_us": 300.0,
            "speedup": 3.0,
            "sol_percent": 70.0,
            "tflops": 12.5,
            "tbps": 3.25,
            "ref_host_bound": False,
        }
    )


def test_api_detail_baseline_is_null_without_one(client, task):
    assert client.get(f"/api/tasks/{task.slug}/").json()["baseline"] is None

import json

import pytest
from django.urls import reverse

from scoring.services import scores_refresh
from tests.factories import (
    DesignPropertyFactory,
    EvaluationFactory,
    GuidanceFactory,
    SubmissionFactory,
    UserFactory,
    WorkloadResultFactory,
    task_with_workloads,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def task():
    task = task_with_workloads(
        task__slug="row_softmax",
        task__title="Row-wise softmax",
        task__statement="Softmax of **each row**.\n\n<script>alert('x')</script>",
        reference_source="import torch\n\nclass Model(torch.nn.Module):\n    pass\n",
        timed={"bf16_8192x1024": {"flops": 2.5e9, "bytes": 4e6}},
        hidden=["hidden_big"],
        hidden_checks=["check_hidden_small"],
    )
    GuidanceFactory(task=task, level="L1", text="Keep an *online* max.")
    GuidanceFactory(task=task, level="L2", text="One row per program.", depends_on=["L1"])
    DesignPropertyFactory(task=task, key="max_sub", level="L1", title="Max subtraction")
    DesignPropertyFactory(
        task=task,
        key="online",
        level="L2",
        depends_on=["max_sub"],
        detector={"kind": "regex", "pattern": "x"},
    )
    return task


def test_catalog_list_shows_tasks(client, task):
    response = client.get(reverse("task_catalog:list"))
    assert response.status_code == 200
    assert b"Row-wise softmax" in response.content
    assert reverse("task_catalog:detail", args=[task.slug]).encode() in response.content


def test_catalog_list_with_an_empty_catalog(client):
    response = client.get(reverse("task_catalog:list"))
    assert response.status_code == 200
    assert b"load_catalog" in response.content


def test_task_detail_shows_statement_code_workloads_guidance_properties(client, task):
    response = client.get(reverse("task_catalog:detail", args=[task.slug]))
    html = response.content.decode()

    assert response.status_code == 200
    assert "<strong>each row</strong>" in html
    assert "alert(" not in html  # sanitised
    assert '<div class="highlight">' in html  # pygments, class based
    assert 'class="k"' in html
    assert "bf16_8192x1024" in html
    assert "2.5" in html and "4" in html  # GFLOP, MB
    assert "hidden_big" not in html and "check_hidden_small" not in html
    assert "<em>online</em>" in html
    assert 'href="#guidance-L1">L1</a>' in html
    assert "Max subtraction" in html and "regex" in html
    assert 'data-figure="property-figure"' in html
    figure = json.loads(
        html.split('id="property-figure" type="application/json">')[1].split("<")[0]
    )
    assert figure["layout"]["annotations"]
    assert "vendor/plotly/plotly.min.js" in html and "js/charts.js" in html
    assert "<script>alert" not in html


def test_task_detail_ranking_table_and_chart(client, task):
    submission = SubmissionFactory(
        owner=UserFactory(username="alice"), task=task, task_version=task.current_version
    )
    evaluation = EvaluationFactory(submission=submission)
    WorkloadResultFactory(evaluation=evaluation, name="bf16_8192x1024", speedup=3.0)
    scores_refresh(submission_ids=[submission.pk])  # as the verdict's commit does

    html = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()

    assert "alice" in html and "3.00\u00d7" in html
    assert f'href="/submissions/{submission.pk}/"' in html
    assert 'data-figure="ranking-figure-0"' in html
    assert '<h3 class="ranking-gpu">NVIDIA H200</h3>' in html


def test_task_detail_unknown_slug_is_404(client):
    assert client.get(reverse("task_catalog:detail", args=["nope"])).status_code == 404


def test_catalog_list_query_count_is_pinned(client, task, django_assert_num_queries):
    # the data version and the catalog's rows; then, until the data changes, the version
    with django_assert_num_queries(2):
        assert client.get(reverse("task_catalog:list")).status_code == 200
    with django_assert_num_queries(1):
        assert client.get(reverse("task_catalog:list")).status_code == 200


def test_task_detail_query_count_is_pinned(client, task, django_assert_num_queries):
    for _ in range(3):
        submission = SubmissionFactory(task=task, task_version=task.current_version)
        WorkloadResultFactory(evaluation=EvaluationFactory(submission=submission), speedup=2.0)
        scores_refresh(submission_ids=[submission.pk])
    # the data version, task + version, public workloads, guidance, properties, the current
    # guidance version, ranking scores + results + the expert's timings, the expert baseline
    # (one query when there is none; see test_catalog_baseline.py), baselines pending; then,
    # until the data changes, the version only
    with django_assert_num_queries(11):
        assert client.get(reverse("task_catalog:detail", args=[task.slug])).status_code == 200
    with django_assert_num_queries(1):
        assert client.get(reverse("task_catalog:detail", args=[task.slug])).status_code == 200


def test_plotly_is_served_from_our_static_files():
    from django.contrib.staticfiles import finders

    assert finders.find("vendor/plotly/plotly.min.js")
    assert finders.find("js/charts.js")
    assert finders.find("css/pygments.css")


BASELINE_SOURCE = '''"""torch.matmul on the bf16 operands.

What a practitioner calls: cuBLAS in the <workload's> dtype.

Not shown: later paragraphs.
"""

import torch
'''


def test_task_detail_says_what_the_baseline_runs_from_its_docstring(client, task):
    version = task.current_version
    version.baseline_source = BASELINE_SOURCE
    version.save(update_fields=["baseline_source"])

    html = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()

    assert (
        '<p class="baseline-note">Speedups are measured against the task\'s '
        "<code>baseline.py</code>: torch.matmul on the bf16 operands. What a practitioner "
        "calls: cuBLAS in the &lt;workload&#x27;s&gt; dtype.</p>"
    ) in html
    assert "Not shown" not in html


def test_task_detail_has_no_baseline_note_without_a_baseline(client, task):
    html = client.get(reverse("task_catalog:detail", args=[task.slug])).content.decode()
    assert 'class="baseline-note"' not in html

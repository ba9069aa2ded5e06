"""Every page's SQL query count is pinned and does not grow with the number of runs: the
same count on a small and a larger generated dataset (leaderboard_example's data); the
submissions API's, whatever the number of kernels."""

import pytest
from django.urls import reverse

from leaderboard.generate import leaderboard_example_generate
from runs.models import Run
from scoring.services import scores_version_bump
from submissions.models import Submission
from tests.factories import (
    DesignPropertyFactory,
    EvaluationFactory,
    TaskVersionFactory,
    UserFactory,
    WorkloadFactory,
    token_client,
)

pytestmark = pytest.mark.django_db

# Queries of an anonymous request that builds the page (the first after a change of the
# data version), and of one served from what was built (None: the page is not cached).
PAGES = {
    # version; the board's catalog version and GPU, the pairs of entries' run scores,
    # the current catalog (the experts' reference joins only its board: not here),
    # catalog size, latest evaluations
    "home": (6, 1),
    # version; the board's catalog version and GPU, filter choices, the entries' run
    # scores, the current catalog (the experts' rows join only its board: not here), the
    # baselines a new task version lacks, the entries' provenance (their kernels' last
    # evaluations, their owners' uploads)
    "leaderboard": (8, 1),
    # version; the board's catalog version and GPU, filter choices, the entries' scores,
    # their provenance
    "paired": (6, 1),
    # version; task + version, public workloads, guidance, properties, the current guidance
    # version; ranking scores, their workload results, the expert's timings per GPU; the
    # expert baseline; the baselines a new version lacks
    "task": (11, 1),
    # version; run count, the page's runs, tasks, cells, filter choices
    "matrix": (6, 1),
    # version; the catalog's rows
    "catalog": (2, 1),
    # the run; version; the run again (as of that version); per side: kernels, latest
    # evaluations (status and mode), traces, (proposals); both runs' stored task scores;
    # the tasks of the run's catalog version (its pinned row, and for a run made before
    # versions were pinned, the catalog's digest); both runs' scores; the cell verdicts;
    # the moderation log. Served: the run (may the viewer see it?) and the version.
    "run": (17, 2),
    # the submission; version; the submission again (as of that version); its latest
    # evaluation + results; the expert's results on its GPU; properties + assessments; the
    # moderation log. Served: the submission (may the viewer see it?) and the version.
    "submission": (9, 2),
    # version; the board's catalog version and GPU, the entries' run scores (the same
    # table as the page's CSV export)
    "api-leaderboard": (3, 1),
    "api-paired": (3, 1),
}


def catalog(tasks=3):
    for i in range(tasks):
        version = TaskVersionFactory(task__slug=f"task_{i}", task__position=i)
        for name in ("timed_a", "timed_b"):
            WorkloadFactory(version=version, name=name)
        for key in ("p1", "p2"):
            DesignPropertyFactory(task=version.task, key=key)


def urls():
    run = Run.objects.order_by("pk").first()
    submission = Submission.objects.filter(run=run).order_by("pk").first()
    return {
        "home": reverse("leaderboard:home"),
        "leaderboard": reverse("leaderboard:leaderboard"),
        "paired": reverse("leaderboard:paired"),
        "task": reverse("task_catalog:detail", args=["task_0"]),
        "matrix": reverse("leaderboard:matrix"),
        "catalog": reverse("task_catalog:list"),
        "run": reverse("runs:detail", args=[run.pk]),
        "submission": reverse("submissions:detail", args=[submission.pk]),
        "api-leaderboard": "/api/leaderboard/?format=csv",
        "api-paired": "/api/leaderboard/paired/",
    }


@pytest.mark.parametrize("runs", [2, 12])
@pytest.mark.parametrize("page", sorted(PAGES))
def test_a_page_takes_the_same_queries_whatever_the_number_of_runs(
    client, runs, page, django_assert_num_queries
):
    catalog()
    leaderboard_example_generate(runs=runs)
    url = urls()[page]
    built, served = PAGES[page]
    scores_version_bump()

    with django_assert_num_queries(built):
        assert client.get(url).status_code == 200
    if served is not None:
        with django_assert_num_queries(served):
            assert client.get(url).status_code == 200


@pytest.mark.parametrize("kernels", [2, 12])
def test_the_submissions_api_takes_the_same_queries_whatever_the_number_of_kernels(
    kernels, django_assert_num_queries
):
    owner = UserFactory()
    for i in range(kernels):
        EvaluationFactory(submission__owner=owner, submission__source=f"# kernel {i}\n")
    client = token_client(owner)
    newest = Submission.objects.filter(owner=owner).latest("created_at", "pk")
    client.get("/api/submissions/")  # the token's first use writes when it was used

    # the token with its user, the count, the page (owner, task and version joined)
    with django_assert_num_queries(3):
        assert client.get("/api/submissions/").status_code == 200
    # the token with its user, the submission, its latest evaluation, its results, the
    # task's properties, their assessments
    with django_assert_num_queries(6):
        assert client.get(f"/api/submissions/{newest.pk}/").status_code == 200

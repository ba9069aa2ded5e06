"""The runs admin renders its lists and forms."""

import pytest

from runs.services import run_create_from_bundle
from tests.factories import UserFactory
from tests.runs.bundles import good_files, make_zip

pytestmark = pytest.mark.django_db


def test_the_admin_pages_of_runs_traces_and_proposals_render(admin_client, run_tasks, fake_cli):
    run = run_create_from_bundle(owner=UserFactory(), data=make_zip(good_files()))
    trace, proposal = run.traces.get(), run.proposals.get()
    for url in (
        "/admin/runs/run/",
        f"/admin/runs/run/{run.pk}/change/",
        "/admin/runs/trace/",
        f"/admin/runs/trace/{trace.pk}/change/",
        "/admin/runs/proposal/",
        f"/admin/runs/proposal/{proposal.pk}/change/",
    ):
        assert admin_client.get(url).status_code == 200, url

"""`manage.py load_example_runs` says what it loaded in one line."""

import logging
from io import StringIO

from django.core.management import call_command

from runs.management.commands import load_example_runs
from runs.models import Run


def test_load_example_runs_prints_one_summary_line_and_no_enqueued_lines(
    transactional_db, run_tasks, fake_cli, monkeypatch
):
    queue_log = logging.getLogger("django-q")
    monkeypatch.setattr(queue_log, "level", logging.INFO)
    loud = []

    def load(**kwargs):
        # django-q logs "Enqueued [queue] id" at INFO for every kernel sent to the broker
        # (not in the tests' synchronous mode): the command keeps it to warnings meanwhile.
        loud.append(queue_log.isEnabledFor(logging.INFO))
        return example_runs_load(**kwargs)

    example_runs_load = load_example_runs.example_runs_load
    monkeypatch.setattr(load_example_runs, "example_runs_load", load)
    out = StringIO()

    call_command("load_example_runs", stdout=out)

    assert loud == [False] and queue_log.level == logging.INFO
    none, guided = Run.objects.order_by("pk")
    [line] = out.getvalue().splitlines()
    assert f"#{none.pk} (none, /runs/{none.pk}/) and #{guided.pk} (L1+L2+L3" in line
    assert ", paired;" in line and "#None" not in line
    kernels = none.submissions.count() + guided.submissions.count()
    assert f"{kernels} kernels queued for evaluation" in line

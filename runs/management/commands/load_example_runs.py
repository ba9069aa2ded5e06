"""Load the example pair of agent runs (example data written by hand)."""

import logging

from django.core.management.base import BaseCommand, CommandError

from runs.models import Run
from runs.services import BundleRejected, example_runs_load
from submissions.models import Submission
from task_catalog.models import Task


class Command(BaseCommand):
    help = (
        "Upload the example campaign (a run without guidance paired with one with it, per "
        "attempt) as user 'example'; idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--attempts",
            type=int,
            default=1,
            help="Runs per condition (default 1); with 3, the leaderboard shows each "
            "entry's mean over its attempts, intervals and tied ranks.",
        )

    def handle(self, *args, **options):
        if not 1 <= options["attempts"] <= 10:
            raise CommandError("--attempts: a number from 1 to 10.")
        if not Task.objects.filter(current_version__isnull=False).exists():
            raise CommandError("The catalog is empty: run `python manage.py load_catalog` first.")
        # django-q logs one "Enqueued" line per kernel: the summary below says it once.
        queue_log = logging.getLogger("django-q")
        level = queue_log.level
        queue_log.setLevel(logging.WARNING)
        try:
            runs = example_runs_load(attempts=options["attempts"])
        except BundleRejected as exc:
            problems = "; ".join(f"{e.file}: {e.message}" for e in exc.errors)
            raise CommandError(
                f"The example bundles no longer fit the catalog: {problems}"
            ) from exc
        finally:
            queue_log.setLevel(level)
        if not runs:
            self.stdout.write("The example runs are loaded already for this catalog version.")
            return
        stored = Run.objects.filter(pk__in=[run.pk for run in runs]).order_by("pk")
        kernels = Submission.objects.filter(run__in=stored).count()
        pages = " and ".join(f"#{run.pk} ({run.condition}, /runs/{run.pk}/)" for run in stored)
        paired = "paired" if all(run.pair_id for run in stored) else "not paired"
        self.stdout.write(
            f"Example runs {pages}, {paired}; {kernels} kernels queued for evaluation. "
            "Example data written by hand, not an agent's output."
        )

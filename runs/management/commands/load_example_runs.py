"""Load the example pair of agent runs (example data written by hand)."""

from django.core.management.base import BaseCommand, CommandError

from runs.services import BundleRejected, example_runs_load
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
        try:
            runs = example_runs_load(attempts=options["attempts"])
        except BundleRejected as exc:
            problems = "; ".join(f"{e.file}: {e.message}" for e in exc.errors)
            raise CommandError(
                f"The example bundles no longer fit the catalog: {problems}"
            ) from exc
        if not runs:
            self.stdout.write("The example runs are loaded already for this catalog version.")
            return
        for run in runs:
            self.stdout.write(
                f"Run #{run.pk} ({run.condition}): /runs/{run.pk}/, paired with #{run.pair_id}. "
                "Example data written by hand, not an agent's output."
            )

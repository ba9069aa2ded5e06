"""Load the example pair of agent runs (example data written by hand)."""

from django.core.management.base import BaseCommand, CommandError

from runs.services import BundleRejected, example_runs_load
from task_catalog.models import Task


class Command(BaseCommand):
    help = "Upload the example campaign (two paired runs) as user 'example'; idempotent."

    def handle(self, *args, **options):
        if not Task.objects.filter(current_version__isnull=False).exists():
            raise CommandError("The catalog is empty: run `python manage.py load_catalog` first.")
        try:
            runs = example_runs_load()
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

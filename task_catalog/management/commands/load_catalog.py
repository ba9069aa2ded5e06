from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from task_catalog.services import catalog_load
from taskformat.package import TaskPackageError


class Command(BaseCommand):
    help = "Upsert every task folder of the catalog into the database (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--dir", type=Path, default=None, help="default: D2K_CATALOG_DIR")

    def handle(self, *args, **options):
        directory = options["dir"] or Path(settings.D2K_CATALOG_DIR)
        try:
            report = catalog_load(directory=directory)
        except (TaskPackageError, ValidationError) as exc:
            raise CommandError(f"catalog not loaded: {exc}") from exc
        for result in report.results:
            self.stdout.write(str(result))
        self.stdout.write(self.style.SUCCESS(f"{len(report.results)} tasks from {directory}"))

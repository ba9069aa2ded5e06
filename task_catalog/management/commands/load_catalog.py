from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from task_catalog.services import catalog_load
from taskformat.package import TaskPackageError


class Command(BaseCommand):
    help = (
        "Upsert every task folder of the catalog into the database (idempotent). Guidance "
        "an admin edited since the last load is kept, and the command says so."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dir", type=Path, default=None, help="default: D2K_CATALOG_DIR")
        parser.add_argument(
            "--guidance-from-disk",
            action="store_true",
            help="where guidance changed both in the admin and on disk, load the disk's as a "
            "new guidance version (the admin's stays in the history)",
        )

    def handle(self, *args, **options):
        directory = options["dir"] or Path(settings.D2K_CATALOG_DIR)
        try:
            report = catalog_load(
                directory=directory, guidance_from_disk=options["guidance_from_disk"]
            )
        except (TaskPackageError, ValidationError) as exc:
            raise CommandError(f"catalog not loaded: {exc}") from exc
        for result in report.results:
            line = str(result)
            self.stdout.write(self.style.WARNING(line) if result.guidance_kept else line)
        self.stdout.write(self.style.SUCCESS(f"{len(report.results)} tasks from {directory}"))

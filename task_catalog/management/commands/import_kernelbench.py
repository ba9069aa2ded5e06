from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from task_catalog.services.kernelbench import kernelbench_import
from taskformat.kernelbench import KernelBenchError
from taskformat.package import TaskPackageError


class Command(BaseCommand):
    help = "Import KernelBench problem files (a file or a folder) as kb-… tasks (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="a problem file or a folder of them")
        parser.add_argument(
            "--catalog-dir",
            type=Path,
            default=None,
            help="where the generated task packages go (default: MEDIA_ROOT/kernelbench)",
        )

    def handle(self, *args, **options):
        if not options["path"].exists():
            raise CommandError(f"no such file or folder: {options['path']}")
        catalog_dir = options["catalog_dir"] or Path(settings.MEDIA_ROOT) / "kernelbench"
        catalog_dir.mkdir(parents=True, exist_ok=True)
        try:
            report = kernelbench_import(path=options["path"], catalog_dir=catalog_dir)
        except (KernelBenchError, TaskPackageError, ValidationError) as exc:
            raise CommandError(f"not imported: {exc}") from exc
        for result in report.results:
            self.stdout.write(str(result))
        self.stdout.write(self.style.SUCCESS(f"{len(report.results)} tasks from {catalog_dir}"))

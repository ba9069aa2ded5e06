import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluator.services import BaselineImportError, baseline_import


class Command(BaseCommand):
    help = "Store the experts' GPU verdicts (bench/gpu_check.py experts) as results (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="e.g. docs/baselines.json")

    def handle(self, *args, file: Path, **options) -> None:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CommandError(f"Cannot read {file} as JSON: {exc}") from exc
        try:
            report = baseline_import(data=data, source_label=str(file))
        except BaselineImportError as exc:
            raise CommandError(f"{exc} Nothing was imported from {file}.") from exc
        for line in report.lines:
            self.stdout.write(str(line))
        self.stdout.write(
            self.style.SUCCESS(f"{report.count('created')} created, {len(report.lines)} in {file}")
        )

from pathlib import Path

from django.core.management.base import BaseCommand

from task_catalog.services import catalog_export


class Command(BaseCommand):
    help = "Write every task's current version as a task package folder under DIR."

    def add_arguments(self, parser):
        parser.add_argument("dir", type=Path)

    def handle(self, *args, **options):
        folders = catalog_export(directory=options["dir"])
        for folder in folders:
            self.stdout.write(str(folder))
        self.stdout.write(self.style.SUCCESS(f"{len(folders)} tasks written to {options['dir']}"))

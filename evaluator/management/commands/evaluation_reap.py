from django.core.management.base import BaseCommand

from evaluator.services import evaluation_reap


class Command(BaseCommand):
    help = (
        "Queue again every evaluation nobody will finish: running ones whose lease ran out, "
        "queued ones whose broker message is gone. Safe to run at any time."
    )

    def handle(self, *args, **options) -> None:
        self.stdout.write(f"{evaluation_reap()}.")

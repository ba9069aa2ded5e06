from django.core.management.base import BaseCommand

from evaluator.services import worker_serve


class Command(BaseCommand):
    help = (
        "Run an evaluation worker: django-q2's cluster with the reaper, whose processes "
        "and evaluators die with it (SIGTERM or Ctrl-C stops it)."
    )

    def handle(self, *args, **options) -> None:
        worker_serve(say=self.stdout.write)

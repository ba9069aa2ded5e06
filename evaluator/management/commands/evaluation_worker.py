from django.core.management.base import BaseCommand, CommandError

from evaluator.services import worker_serve
from evaluator.services.pools import PoolError


class Command(BaseCommand):
    help = (
        "Run an evaluation worker: django-q2's cluster with the reaper, whose processes "
        "and evaluators die with it (SIGTERM or Ctrl-C stops it). With --gpu it is pinned "
        "to that GPU and serves the pool named after it."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--gpu",
            type=int,
            default=None,
            help="Index of this host's GPU to pin to (nvidia-smi's numbering).",
        )
        parser.add_argument(
            "--hardware",
            default="",
            help="The pool's GPU kind (e.g. 'NVIDIA H200'); with --gpu, it must match the GPU.",
        )

    def handle(self, *args, **options) -> None:
        try:
            worker_serve(say=self.stdout.write, gpu=options["gpu"], hardware=options["hardware"])
        except PoolError as exc:
            raise CommandError(str(exc)) from exc

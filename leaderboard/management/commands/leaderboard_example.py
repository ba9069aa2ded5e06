from django.core.management.base import BaseCommand

from leaderboard.generate import leaderboard_example_generate


class Command(BaseCommand):
    help = "Generate example runs (is_example=True) for the leaderboard load benchmark."

    def add_arguments(self, parser):
        parser.add_argument("--runs", type=int, default=500)
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--hardware", default="NVIDIA H200")

    def handle(self, *args, runs, seed, hardware, **options):
        count = leaderboard_example_generate(runs=runs, seed=seed, hardware=hardware)
        self.stdout.write(f"{count} generated example runs (is_example=True), with their scores.")

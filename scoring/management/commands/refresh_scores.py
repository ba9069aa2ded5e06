"""Recompute every machine assessment and every score (after a catalog reload)."""

from django.core.management.base import BaseCommand

from scoring.services import scores_refresh_all


class Command(BaseCommand):
    help = "Recompute detector and counter assessments, task scores and run scores; idempotent."

    def handle(self, *args, **options):
        count = scores_refresh_all()
        self.stdout.write(f"Scores refreshed for {count} submission(s) and every run.")

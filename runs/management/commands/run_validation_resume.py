from django.core.management.base import BaseCommand

from runs.services import run_validation_resume


class Command(BaseCommand):
    help = (
        "Validate again every run bundle left `validating` for five minutes (its task lost "
        "to a worker or cluster restart). Safe to run at any time."
    )

    def handle(self, *args, **options) -> None:
        ids = run_validation_resume(inline=True)
        self.stdout.write(
            f"{len(ids)} run(s) validated again{': ' if ids else ''}"
            f"{', '.join(f'#{pk}' for pk in ids)}."
        )

from django.core.management.base import BaseCommand, CommandError

from evaluator.selectors import evaluation_verdict_line
from evaluator.services import evaluation_create, evaluation_run
from evaluator.services.workdirs import ScratchUnwritable
from submissions.models import Submission


class Command(BaseCommand):
    help = "Evaluate a submission now, in this process (a new evaluation), and print the verdict."

    def add_arguments(self, parser):
        parser.add_argument("submission_id", type=int)

    def handle(self, *args, submission_id: int, **options) -> None:
        submission = Submission.objects.filter(pk=submission_id).first()
        if submission is None:
            raise CommandError(f"No submission #{submission_id}.")
        evaluation = evaluation_create(submission=submission, enqueue=False)
        try:
            finished = evaluation_run(evaluation_id=evaluation.pk, requeue=False)
        except ScratchUnwritable as exc:
            raise CommandError(
                f"This process {exc.reason}. Evaluation #{evaluation.pk} is queued for the workers."
            ) from exc
        if finished is None:  # only if the new evaluation was deleted meanwhile
            raise CommandError(f"Evaluation #{evaluation.pk} disappeared before it ran.")
        self.stdout.write(evaluation_verdict_line(evaluation=finished))

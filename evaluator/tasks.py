"""django-q2 entry points: doors to evaluator.services, taking primary keys only."""

from evaluator import services


def evaluation_run(evaluation_pk: int) -> str | None:
    """Woken by the message of `evaluation_pk`: runs the oldest queued evaluation."""
    evaluation = services.evaluation_run_next(hint=evaluation_pk)
    return evaluation.status if evaluation is not None else None


def evaluation_reap() -> str:
    """The reaper's schedule (every minute): see evaluator.services.reaping."""
    return str(services.evaluation_reap())

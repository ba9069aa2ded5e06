"""django-q2 entry points: doors to evaluator.services, taking primary keys only."""

from evaluator import services


def evaluation_run_next(woken_by_pk: int) -> str | None:
    """Runs the oldest queued evaluation of this worker's pool, whichever it is: every
    queued evaluation sends one message, `woken_by_pk` names the one that woke us."""
    evaluation = services.evaluation_run_next(hint=woken_by_pk)
    return evaluation.status if evaluation is not None else None


# The task's name before it said what it does: messages a broker held across the
# rename name this path, and run the oldest queued evaluation too.
evaluation_run = evaluation_run_next


def evaluation_reap() -> str:
    """The reaper's schedule (every minute): see evaluator.services.reaping."""
    return str(services.evaluation_reap())

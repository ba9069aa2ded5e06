"""django-q2 entry points of runs: doors to runs.services, taking primary keys only."""

from runs import services


def run_bundle_validate(run_id: int) -> str | None:
    """Validate a run bundle stored by its upload (runs.services.run_bundle_receive)."""
    run = services.run_bundle_validate(run_id=run_id)
    return run.state if run is not None else None


def run_validation_resume() -> str:
    """The schedule (every minute): validate again runs whose validation task was lost."""
    return f"{len(services.run_validation_resume(inline=True))} run(s) validated again"

"""Writes of the runs app: accepting a bundle, pairing runs, following their state."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import User
from core.quotas import quota_check_upload
from moderation.services import cells_nominate
from runs.audit import (
    RedactionUnconfirmed,
    proposal_audit,
    run_integrity_hits,
    run_secrets,
    trace_audit,
)
from runs.bundle import MANIFEST, Bundle, BundleError, BundleLimits, Manifest, bundle_validate
from runs.models import Proposal, Run, RunState, Trace
from runs.selectors import catalog_version_current, run_state_derive
from runs.traces import trace_pack, trace_summarize
from submissions.models import Submission
from submissions.services import submission_create
from task_catalog.models import Task
from task_catalog.prompts import task_prompt
from task_catalog.selectors import task_get_public


class BundleRejected(Exception):
    """The bundle failed validation; `errors` lists every problem found."""

    def __init__(self, errors: tuple[BundleError, ...] | list[BundleError]):
        super().__init__(f"{len(errors)} problem(s) in the bundle")
        self.errors = tuple(errors)


@dataclass(frozen=True)
class _StoredTrace:
    trace: Trace
    name: str


def bundle_limits() -> BundleLimits:
    """The limits of docs/run-format.md, from the settings."""
    return BundleLimits(
        max_bytes=settings.D2K_RUN_BUNDLE_MAX_BYTES,
        max_files=settings.D2K_RUN_BUNDLE_MAX_FILES,
        max_uncompressed_bytes=settings.D2K_RUN_BUNDLE_MAX_UNCOMPRESSED_BYTES,
        max_ratio=settings.D2K_RUN_BUNDLE_MAX_RATIO,
        max_kernel_bytes=settings.D2K_MAX_UPLOAD_BYTES,
        max_trace_bytes=settings.D2K_RUN_TRACE_MAX_BYTES,
    )


def run_create_from_bundle(
    *,
    owner: User,
    data: bytes,
    is_public: bool = False,
    is_example: bool = False,
    enforce_quota: bool = True,
    confirm_redaction: bool = False,
) -> Run:
    """Validate the bundle, store the run with its traces and proposals, scan them
    (runs.audit), make each kernel a submission of the run queued for evaluation, and
    pair the run with its twin.

    Raises BundleRejected with every problem found; then nothing is stored; and
    QuotaExceeded past the owner's quotas (core.quotas). A public upload whose traces
    or proposals hold secrets is rejected unless `confirm_redaction` (the owner agrees
    that the public sees them redacted).
    """
    tasks = {t.slug: t for t in Task.objects.filter(current_version__isnull=False)}
    bundle = bundle_validate(data=data, task_slugs=frozenset(tasks), limits=bundle_limits())
    if not bundle.ok or bundle.manifest is None:
        raise BundleRejected(bundle.errors)
    prompt_errors = _prompt_hash_errors(bundle.manifest)
    if prompt_errors:
        raise BundleRejected(prompt_errors)
    if enforce_quota:
        quota_check_upload(user=owner, evaluations=len(bundle.kernels))
    written: list[str] = []
    try:
        with transaction.atomic():
            run = _run_store(owner=owner, bundle=bundle, is_public=is_public, example=is_example)
            for slug, text in sorted(bundle.proposals.items()):
                proposal = Proposal(run=run, task=tasks[slug], text=text)
                proposal.full_clean(exclude=["run", "task"])
                proposal.save()
                proposal_audit(proposal=proposal)
            for slug, raw in sorted(bundle.traces.items()):
                stored = _trace_store(run=run, task=tasks[slug], raw=raw, bundle=bundle)
                written.append(stored.name)
                written.extend(trace_audit(trace=stored.trace, raw=raw))
            secrets = run_secrets(run=run)
            if is_public and secrets and not confirm_redaction:
                raise BundleRejected(secrets.errors())
            cells_nominate(run=run, hits=run_integrity_hits(run=run))
            for slug, source in sorted(bundle.kernels.items()):
                try:
                    submission_create(
                        owner=owner,
                        task=tasks[slug],
                        source=source,
                        filename=f"{slug}.py",
                        is_public=is_public,
                        run=run,
                    )
                except ValidationError as exc:
                    raise BundleRejected(
                        [BundleError(f"kernels/{slug}.py", None, m) for m in exc.messages]
                    ) from exc
            run.state = RunState.EVALUATING
            run.save(update_fields=["state", "updated_at"])
            run_pair_auto(run=run)
            _scores_refresh_on_commit(run.pk, run.pair_id)
    except BaseException:
        # The rows rolled back; the trace files written on the way must go too.
        for name in written:
            default_storage.delete(name)
        raise
    return run


def _prompt_hash_errors(manifest: Manifest) -> list[BundleError]:
    """The manifest's `prompt_sha256` entries that differ from the prompt served now."""
    errors = []
    for slug, recorded in sorted(manifest.prompt_sha256.items()):
        task = task_get_public(slug=slug)
        if task is None:
            errors.append(BundleError(MANIFEST, None, f"prompt_sha256: unknown task {slug!r}."))
            continue
        prompt = task_prompt(task=task, levels=manifest.levels)
        if prompt.sha256 != recorded:
            errors.append(
                BundleError(
                    MANIFEST,
                    None,
                    f"prompt_sha256.{slug}: {recorded} is not the prompt this portal serves for "
                    f"{slug} v{prompt.version} with levels {prompt.condition} ({prompt.sha256}); "
                    "the agent saw another task version or other guidance.",
                )
            )
    return errors


def _run_store(*, owner: User, bundle: Bundle, is_public: bool, example: bool) -> Run:
    manifest = bundle.manifest
    assert manifest is not None
    run = Run(
        owner=owner,
        model=manifest.model,
        agent=manifest.agent,
        levels=list(manifest.levels),
        condition=manifest.condition,
        turn_budget=manifest.turn_budget,
        hardware=manifest.hardware,
        catalog_version=catalog_version_current(),
        notes=manifest.notes,
        is_public=is_public,
        is_example=example or manifest.example,
        state=RunState.RECEIVING,
    )
    run.full_clean(exclude=["pair"])
    run.save()
    return run


def _trace_store(*, run: Run, task: Task, raw: bytes, bundle: Bundle) -> _StoredTrace:
    summary = trace_summarize(data=raw, final_source=bundle.kernels.get(task.slug))
    packed = trace_pack(data=raw, line_types=summary.line_types)
    name = default_storage.save(
        f"runs/{run.pk}/traces/{task.slug}.jsonl.gz", ContentFile(packed.data)
    )
    trace = Trace(
        run=run,
        task=task,
        file=name,
        raw_bytes=len(raw),
        stored_bytes=len(packed.data),
        pages=packed.pages,
        event_count=summary.event_count,
        event_types=summary.event_types,
        problems=summary.problems,
        turns_used=summary.turns_used,
        tool_calls=summary.tool_calls,
        tokens_in=summary.tokens_in,
        tokens_out=summary.tokens_out,
        wall_time_s=summary.wall_time_s,
        attempts_before_final=summary.attempts_before_final,
        submit_lines=summary.submit_lines,
        final_submit_turn=summary.final_submit_turn,
        final_submit_line=summary.final_submit_line,
        end_reason=summary.end_reason,
    )
    trace.full_clean(exclude=["run", "task"])
    trace.save()
    return _StoredTrace(trace=trace, name=name)


# --- state --------------------------------------------------------------------


def run_refresh_state(*, run_id: int) -> Run | None:
    """Store the state derived from the run's submissions' latest evaluations
    (evaluating until every one has finished, then complete with its finish time)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.state == RunState.RECEIVING:
            return run
        state = run_state_derive(run=run)
        if state != run.state:
            run.state = state
            run.finished_at = timezone.now() if state == RunState.COMPLETE else None
            run.save(update_fields=["state", "finished_at", "updated_at"])
    return run


# --- pairing ------------------------------------------------------------------


def _scores_refresh_on_commit(*run_ids: int | None) -> None:
    """A pair's geomean and uplift depend on both runs: refresh their scores."""
    from scoring.services import scores_refresh

    ids = [pk for pk in run_ids if pk is not None]
    transaction.on_commit(lambda: scores_refresh(run_ids=ids))


def _twin_candidates(*, run: Run) -> QuerySet[Run]:
    """Runs that may pair with `run`: the same owner, model, agent and catalog version,
    the other side of the guidance divide (one run without guidance, one with)."""
    others = Run.objects.filter(
        owner_id=run.owner_id,
        model=run.model,
        agent=run.agent,
        catalog_version=run.catalog_version,
    ).exclude(pk=run.pk)
    return (
        others.exclude(condition="none")
        if run.condition == "none"
        else others.filter(condition="none")
    )


def run_pair_auto(*, run: Run) -> Run | None:
    """Pair `run` with the newest unpaired twin, if there is one; returns the twin."""
    twin = (
        _twin_candidates(run=run).filter(pair__isnull=True).order_by("-created_at", "-pk").first()
    )
    if twin is not None:
        _pair_set(run, twin)
    return twin


def _pair_set(run: Run, twin: Run) -> None:
    for row, other in ((run, twin), (twin, run)):
        row.pair = other
        row.save(update_fields=["pair", "updated_at"])


def _owner_check(*, run: Run, user: User) -> None:
    if run.owner_id != user.pk and not user.is_staff:
        raise ValidationError("Only the run's owner can pair or unpair it.", code="not_owner")


@transaction.atomic
def run_pair(*, run: Run, other: Run, user: User) -> Run:
    """Pair two runs by hand (breaking their earlier pairs): same owner, one run with
    guidance and one without."""
    _owner_check(run=run, user=user)
    _owner_check(run=other, user=user)
    if run.pk == other.pk:
        raise ValidationError("A run cannot be paired with itself.", code="self")
    if (run.condition == "none") == (other.condition == "none"):
        raise ValidationError(
            "A pair is one run without guidance and one with guidance.", code="same_side"
        )
    for row in (run, other):
        if row.pair_id and row.pair_id not in (run.pk, other.pk):
            Run.objects.filter(pk=row.pair_id).update(pair=None, updated_at=timezone.now())
            _scores_refresh_on_commit(row.pair_id)
    _pair_set(run, other)
    _scores_refresh_on_commit(run.pk, other.pk)
    return run


@transaction.atomic
def run_unpair(*, run: Run, user: User) -> Run:
    """Break the run's pair (both sides)."""
    _owner_check(run=run, user=user)
    if run.pair_id:
        Run.objects.filter(pk=run.pair_id, pair=run).update(pair=None, updated_at=timezone.now())
        _scores_refresh_on_commit(run.pair_id)
    _scores_refresh_on_commit(run.pk)
    run.pair = None
    run.save(update_fields=["pair", "updated_at"])
    return run


# --- the example campaign -------------------------------------------------------

EXAMPLE_USERNAME = "example"


def example_runs_load(*, tasks: list[str] | None = None) -> list[Run]:
    """Upload the example pair (runs.examples) as user `example`, unless this catalog
    version has it already; returns the runs it stored (none the second time).

    Only the example's tasks that the catalog holds are uploaded (all of them by
    default): a task added to the catalog later is simply missing from the runs."""
    from accounts.services import bot_user_create
    from runs.examples import EXAMPLE_RUNS, example_bundle_build

    user = get_user_model().objects.filter(username=EXAMPLE_USERNAME).first() or bot_user_create(
        username=EXAMPLE_USERNAME
    )
    version = catalog_version_current()
    if Run.objects.filter(owner=user, is_example=True, catalog_version=version).exists():
        return []
    slugs = set(Task.objects.filter(current_version__isnull=False).values_list("slug", flat=True))
    tasks = sorted(slugs & set(tasks)) if tasks is not None else sorted(slugs)
    return [
        run_create_from_bundle(
            owner=user,
            data=example_bundle_build(name=name, tasks=tasks),
            is_public=True,
            is_example=True,
            enforce_quota=False,
        )
        for name in EXAMPLE_RUNS
    ]


@transaction.atomic
def run_visibility_set(
    *, run: Run, user: User, is_public: bool, confirm_redaction: bool = False
) -> Run:
    """Publish or unpublish a run with its kernels: its owner (or staff) only. Publishing
    a run that holds secrets raises RedactionUnconfirmed unless `confirm_redaction`."""
    if not (user.is_staff or run.owner_id == user.pk):
        raise PermissionDenied("Only the owner publishes or unpublishes a run.")
    if is_public and not run.is_public and not confirm_redaction:
        secrets = run_secrets(run=run)
        if secrets:
            raise RedactionUnconfirmed(secrets)
    run.is_public = is_public
    run.save(update_fields=["is_public", "updated_at"])
    Submission.objects.filter(run=run).update(is_public=is_public, updated_at=timezone.now())
    return run

"""Writes of the runs app: accepting a bundle, pairing runs, following their state."""

from __future__ import annotations

import errno
import functools
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import PurePosixPath

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.tasks import async_task

from accounts.models import User
from evaluator.services.pools import pool_queue
from moderation.services import cells_nominate
from runformat import MANIFEST, Bundle, BundleError, BundleLimits, Manifest, bundle_validate
from runs.audit import (
    RedactionUnconfirmed,
    proposal_audit,
    run_integrity_hits,
    run_secrets,
    trace_audit,
)
from runs.models import UNACCEPTED_STATES, Proposal, Run, RunState, Trace
from runs.selectors import (
    catalog_version_current,
    run_pair_candidates,
    run_pair_refusal,
    run_state_derive,
)
from runs.traces import TraceRefused, trace_pack, trace_summarize
from scoring.services import scores_refresh
from scoring.services.catalog import catalog_version_pin
from submissions.models import Submission
from submissions.quotas import QuotaExceeded, quota_enforce, quota_lock
from submissions.services import submission_create
from task_catalog.models import Task
from task_catalog.prompts import GuidanceGiven, task_prompt, task_prompt_match
from task_catalog.selectors import guidance_version_by_hash, task_get_public

logger = logging.getLogger("runs.services")


class BundleRejected(Exception):
    """The bundle failed validation; `errors` lists every problem found."""

    def __init__(self, errors: tuple[BundleError, ...] | list[BundleError]):
        super().__init__(f"{len(errors)} problem(s) in the bundle")
        self.errors = tuple(errors)


class StorageFull(Exception):
    """The server's disk (or its quota) is full: the upload could not be written."""

    message = (
        "The server has no room to store this upload right now; nothing was stored. "
        "Try again later."
    )


# The errors of a write that found no room: the disk, or the file system's quota.
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


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


def run_upload(
    *, owner: User, data: bytes, is_public: bool = False, confirm_redaction: bool = False
) -> Run:
    """The upload doors' one call: a bundle up to D2K_RUN_SYNC_VALIDATION_BYTES is
    validated and stored now (run_create_from_bundle); a bigger one is stored for
    validation in the background and its run is `validating` (run_bundle_receive)."""
    if len(data) > settings.D2K_RUN_SYNC_VALIDATION_BYTES:
        return run_bundle_receive(
            owner=owner, data=data, is_public=is_public, confirm_redaction=confirm_redaction
        )
    return run_create_from_bundle(
        owner=owner, data=data, is_public=is_public, confirm_redaction=confirm_redaction
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
    QuotaExceeded past the owner's quotas (submissions.quotas), checked in the transaction
    that stores the run, with its rows counted. A public upload whose traces or proposals
    hold secrets is rejected unless `confirm_redaction` (the owner agrees that the public
    sees them redacted).
    """
    checked = _bundle_checked(data=data)
    return _run_accept(
        owner=owner,
        checked=checked,
        is_public=is_public,
        is_example=is_example,
        enforce_quota=enforce_quota,
        confirm_redaction=confirm_redaction,
    )


@dataclass(frozen=True)
class _Checked:
    bundle: Bundle
    tasks: dict[str, Task]
    guidance: dict[str, dict[str, object]]


class _NotValidating(Exception):
    """The run was accepted or rejected by another validation meanwhile."""


def _bundle_checked(*, data: bytes) -> _Checked:
    """The bundle's checks that read no row of it: raises BundleRejected."""
    tasks = {t.slug: t for t in Task.objects.filter(current_version__isnull=False)}
    bundle = bundle_validate(data=data, task_slugs=frozenset(tasks), limits=bundle_limits())
    if not bundle.ok or bundle.manifest is None:
        raise BundleRejected(bundle.errors)
    slugs = {*bundle.kernels, *bundle.traces, *bundle.proposals}
    guidance, prompt_errors = _guidance_given(manifest=bundle.manifest, slugs=slugs)
    if prompt_errors:
        raise BundleRejected(prompt_errors)
    return _Checked(bundle=bundle, tasks=tasks, guidance=guidance)


def _run_accept(
    *,
    owner: User,
    checked: _Checked,
    is_public: bool,
    is_example: bool,
    enforce_quota: bool,
    confirm_redaction: bool,
    pending: Run | None = None,
) -> Run:
    """Store a checked bundle's run (a new row, or `pending`, the run that waited for
    its validation) with everything of it, in one transaction."""
    bundle, tasks = checked.bundle, checked.tasks
    waiting_zip = pending.bundle_file.name if pending is not None else ""
    written: list[str] = []
    try:
        with transaction.atomic():
            if enforce_quota:
                quota_lock(owner=owner)
            run = _run_store(
                owner=owner,
                bundle=bundle,
                guidance=checked.guidance,
                is_public=is_public,
                example=is_example,
                pending=pending,
            )
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
            # The example runs are the portal's own, labelled, made from the catalog's files
            # (their guided kernels are the experts'): their hits are kept and shown, but
            # nominate nothing, or every example would be held off the boards it shows.
            if not is_example:
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
            if enforce_quota:
                quota_enforce(owner=owner, evaluations=len(bundle.kernels))
            run.state = RunState.EVALUATING
            run.save(update_fields=["state", "updated_at"])
            run_pair_auto(run=run)
            _scores_refresh_on_commit(run.pk, run.pair_id)
    except BaseException as exc:
        # The rows rolled back; the trace files written on the way must go too.
        _files_remove(written)
        if isinstance(exc, OSError) and exc.errno in _NO_ROOM:
            raise StorageFull(StorageFull.message) from exc
        raise
    if waiting_zip:
        _files_remove([waiting_zip])
    return run


# --- bundles validated in the background ----------------------------------------

VALIDATION_TASK = "runs.tasks.run_bundle_validate"
# A run `validating` untouched this long lost its task (a worker or cluster restart, a
# broker that dropped the message): run_validation_resume validates it again.
VALIDATION_STALE_AFTER = timedelta(minutes=5)
# Validations started before a run is rejected as one we could not validate.
VALIDATION_MAX_ATTEMPTS = 3


def run_bundle_receive(
    *, owner: User, data: bytes, is_public: bool = False, confirm_redaction: bool = False
) -> Run:
    """Store a bundle to be validated in the background: a run `validating` that holds
    the zip (its bytes count against the owner's stored-bytes quota until it is
    validated), the quotas checked in the same transaction as for any upload; the
    validation task is queued once the transaction commits.

    Raises QuotaExceeded (nothing stored) and StorageFull (nothing stored)."""
    written: list[str] = []
    try:
        with transaction.atomic():
            quota_lock(owner=owner)
            run = Run(
                owner=owner,
                state=RunState.VALIDATING,
                bundle_bytes=len(data),
                upload_options={"is_public": is_public, "confirm_redaction": confirm_redaction},
            )
            run.save()
            name = _file_save(f"runs/{run.pk}/bundle.zip", data)
            written.append(name)
            run.bundle_file = name
            run.save(update_fields=["bundle_file", "updated_at"])
            quota_enforce(owner=owner, evaluations=0)
            run_id = run.pk
            transaction.on_commit(lambda: _validation_send(run_id=run_id))
    except BaseException as exc:
        _files_remove(written)
        if isinstance(exc, OSError) and exc.errno in _NO_ROOM:
            raise StorageFull(StorageFull.message) from exc
        raise
    return run


def _file_save(wanted: str, data: bytes) -> str:
    try:
        return default_storage.save(wanted, ContentFile(data))
    except OSError:
        # A write cut short (a full disk) may leave part of the file: the run is new,
        # so whatever is under its name is that part.
        _files_remove([wanted])
        raise


def _validation_queue() -> str:
    """The broker queue a validation goes to: the default pool's (D2K_DEFAULT_HARDWARE),
    the pool of every upload whose GPU has no pool of its own, so some worker serves it
    in every deployment that evaluates anything."""
    return pool_queue(settings.D2K_DEFAULT_HARDWARE)


def _validation_send(*, run_id: int) -> None:
    """Hand the validation to the task queue. A broker that fails loses nothing: the run
    stays `validating` and run_validation_resume sends it again."""
    try:
        async_task(VALIDATION_TASK, run_id, cluster=_validation_queue())
    except Exception:
        logger.exception("run %s: the broker refused its validation; it is resumed later", run_id)


def run_bundle_validate(*, run_id: int) -> Run | None:
    """Validate the stored bundle of a `validating` run: accept it as an upload
    validated at once would be (its traces, proposals and kernels stored, the kernels
    queued, the run paired), or reject it, the run `rejected` with every problem found
    and nothing of the bundle kept. Idempotent: a run no longer validating is left as it
    is (None)."""
    run = Run.objects.select_related("owner").filter(pk=run_id).first()
    if run is None or run.state != RunState.VALIDATING:
        return None
    attempts = int(run.upload_options.get("attempts", 0)) + 1
    options = {**run.upload_options, "attempts": attempts}
    # Touched: run_validation_resume leaves a run being validated alone for a while.
    Run.objects.filter(pk=run.pk, state=RunState.VALIDATING).update(
        upload_options=options, updated_at=timezone.now()
    )
    if attempts > VALIDATION_MAX_ATTEMPTS:
        message = (
            f"The bundle could not be validated in {VALIDATION_MAX_ATTEMPTS} attempts (the "
            "workers stopped each time); nothing of it was kept. Upload it again."
        )
        return _run_reject(run=run, errors=[BundleError(None, None, message)])
    try:
        with default_storage.open(run.bundle_file.name or "", "rb") as handle:
            data = handle.read()
    except (OSError, ValueError):
        message = "The stored bundle is gone; nothing of it was kept. Upload it again."
        return _run_reject(run=run, errors=[BundleError(None, None, message)])
    errors: tuple[BundleError, ...] | list[BundleError]
    try:
        return _run_accept(
            owner=run.owner,
            checked=_bundle_checked(data=data),
            is_public=bool(options.get("is_public")),
            is_example=False,
            enforce_quota=True,
            confirm_redaction=bool(options.get("confirm_redaction")),
            pending=run,
        )
    except _NotValidating:
        return None
    except BundleRejected as exc:
        errors = exc.errors
    except (QuotaExceeded, StorageFull) as exc:
        errors = [BundleError(None, None, str(exc))]
    return _run_reject(run=run, errors=errors)


def _run_reject(*, run: Run, errors: tuple[BundleError, ...] | list[BundleError]) -> Run | None:
    """End a validating run `rejected` with its problems, and delete its stored zip."""
    name = Run.objects.filter(pk=run.pk).values_list("bundle_file", flat=True).first()
    now = timezone.now()
    done = Run.objects.filter(pk=run.pk, state=RunState.VALIDATING).update(
        state=RunState.REJECTED,
        errors=[e.as_dict() for e in errors],
        bundle_file="",
        bundle_bytes=0,
        finished_at=now,
        updated_at=now,
    )
    if not done:
        return None
    if name:
        _files_remove([name])
    return Run.objects.get(pk=run.pk)


def run_validation_resume(*, now: datetime | None = None, inline: bool = False) -> list[int]:
    """Take up every run left `validating` for VALIDATION_STALE_AFTER (its task lost to a
    worker or cluster restart, or to the broker); returns their ids.

    `inline` validates them in this process (`manage.py run_validation_resume`, the
    minute's schedule); otherwise their task is sent again, once the default pool's queue
    has nothing waiting (a message still queued behind evaluations is not lost): each
    worker's main process does that every D2K_REAP_INTERVAL_S. A duplicate costs nothing:
    the first validation to commit wins."""
    now = now or timezone.now()
    stale = Run.objects.filter(
        state=RunState.VALIDATING, updated_at__lt=now - VALIDATION_STALE_AFTER
    ).order_by("pk")
    ids = list(stale.values_list("pk", flat=True))
    if inline:
        for run_id in ids:
            run_bundle_validate(run_id=run_id)
        return ids
    if not ids or get_broker(_validation_queue()).queue_size():
        return []
    sent = []
    for run_id in ids:
        with transaction.atomic():
            # Touched, so that the next round leaves it to this message for a while.
            if Run.objects.filter(pk=run_id, state=RunState.VALIDATING).update(updated_at=now):
                transaction.on_commit(functools.partial(_validation_send, run_id=run_id))
                sent.append(run_id)
    return sent


def _files_remove(names: list[str]) -> None:
    """Delete stored files, and the folders they leave empty (`runs/<id>/traces/`)."""
    for name in names:
        default_storage.delete(name)
    folders = {str(PurePosixPath(n).parent) for n in names}
    folders |= {str(PurePosixPath(f).parent) for f in folders}
    for folder in sorted(folders, key=len, reverse=True):
        try:
            os.rmdir(default_storage.path(folder))
        except (NotImplementedError, OSError):
            pass  # not a local folder, or not empty


def _guidance_given(
    *, manifest: Manifest, slugs: set[str]
) -> tuple[dict[str, dict[str, object]], list[BundleError]]:
    """The guidance version each task of the bundle was given, and the manifest's
    `prompt_sha256` and `guidance_sha256` entries that name nothing this portal serves or
    served.

    A recorded prompt names its guidance version (the current one or an earlier one), and
    so does a recorded guidance hash; a task with neither is recorded with the guidance
    current at upload.
    """
    given: dict[str, dict[str, object]] = {}
    errors = []
    named = set(manifest.prompt_sha256) | set(manifest.guidance_sha256)
    for slug in sorted(slugs | named):
        task = task_get_public(slug=slug)
        if task is None:
            key = "prompt_sha256" if slug in manifest.prompt_sha256 else "guidance_sha256"
            errors.append(BundleError(MANIFEST, None, f"{key}: unknown task {slug!r}."))
            continue
        entry, error = _guidance_of(task=task, manifest=manifest)
        if error:
            errors.append(BundleError(MANIFEST, None, error))
        else:
            given[slug] = entry
    return given, errors


def _guidance_of(*, task: Task, manifest: Manifest) -> tuple[dict[str, object], str]:
    """One task's entry of `Run.guidance_versions`, or the sentence refusing the manifest."""
    slug = task.slug
    recorded_prompt = manifest.prompt_sha256.get(slug)
    recorded = manifest.guidance_sha256.get(slug)
    if recorded_prompt is not None:
        prompt = task_prompt_match(task=task, levels=manifest.levels, sha256=recorded_prompt)
        if prompt is None:
            current = task_prompt(task=task, levels=manifest.levels)
            return {}, (
                f"prompt_sha256.{slug}: {recorded_prompt} is not a prompt this portal serves "
                f"for {slug} v{current.version} with levels {current.condition} "
                f"({current.sha256} now, or one with an earlier guidance version); "
                "the agent saw another task version or other guidance."
            )
        if recorded is not None and recorded != prompt.guidance.sha256:
            return {}, (
                f"guidance_sha256.{slug}: {recorded} is not the guidance of the prompt "
                f"recorded in prompt_sha256 ({prompt.guidance.sha256})."
            )
        guidance, source = prompt.guidance, "prompt"
    else:
        guidance, source = task_prompt(task=task, levels=manifest.levels).guidance, "upload"
        if recorded is not None and recorded != guidance.sha256:
            version = guidance_version_by_hash(task=task, sha256=recorded)
            if version is None:
                return {}, (
                    f"guidance_sha256.{slug}: {recorded} names no guidance version of {slug} "
                    f"(the current one is {guidance.sha256})."
                )
            guidance = GuidanceGiven(sha256=version.content_hash, number=version.number)
        if recorded is not None:
            source = "manifest"
    return {"sha256": guidance.sha256, "number": guidance.number, "from": source}, ""


def _run_store(
    *,
    owner: User,
    bundle: Bundle,
    guidance: dict[str, dict[str, object]],
    is_public: bool,
    example: bool,
    pending: Run | None = None,
) -> Run:
    manifest = bundle.manifest
    assert manifest is not None
    if pending is None:
        run = Run(owner=owner)
    else:
        # Claimed in this transaction: a second validation of the same run finds it
        # accepted (or rejected) and leaves it alone.
        claimed = Run.objects.select_for_update().filter(pk=pending.pk, state=RunState.VALIDATING)
        if not list(claimed.values_list("pk", flat=True)):
            raise _NotValidating
        run = pending
        run.bundle_file = ""
        run.bundle_bytes = 0
    run.model = manifest.model
    run.agent = manifest.agent
    run.levels = list(manifest.levels)
    run.condition = manifest.condition
    run.turn_budget = manifest.turn_budget
    run.hardware = manifest.hardware
    run.catalog_version = catalog_version_pin()
    run.notes = manifest.notes
    run.guidance_versions = guidance
    run.is_public = is_public
    run.is_example = example or manifest.example
    run.state = RunState.RECEIVING
    run.full_clean(exclude=["pair"])
    run.save()
    return run


def _trace_store(*, run: Run, task: Task, raw: bytes, bundle: Bundle) -> _StoredTrace:
    try:
        summary = trace_summarize(data=raw, final_source=bundle.kernels.get(task.slug))
    except TraceRefused as exc:
        error = BundleError(f"traces/{task.slug}.jsonl", exc.line, exc.message)
        raise BundleRejected([error]) from exc
    packed = trace_pack(data=raw, line_types=summary.line_types)
    wanted = f"runs/{run.pk}/traces/{task.slug}.jsonl.gz"
    try:
        name = default_storage.save(wanted, ContentFile(packed.data))
    except OSError:
        # A write cut short (a full disk) may leave part of the file: the run is new,
        # so whatever is under its name is that part.
        _files_remove([wanted])
        raise
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
        problem_count=summary.problem_count,
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
        if run is None or run.state in UNACCEPTED_STATES:
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
    ids = [pk for pk in run_ids if pk is not None]
    transaction.on_commit(lambda: scores_refresh(run_ids=ids))


def _twin_candidates(*, run: Run) -> QuerySet[Run]:
    """Runs that may pair with `run` (runs.selectors.run_pair_candidates)."""
    return run_pair_candidates(run=run)


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
    if reason := run_pair_refusal(run=run, other=other):
        raise ValidationError(reason, code="not_comparable")
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


def example_attempt_tasks(*, tasks: list[str], attempt: int) -> list[str]:
    """The tasks attempt number `attempt` (0 first) of the example campaign has a kernel
    for: all of them in the first; in each later one, every fourth task is left out (a
    different quarter each time), so that repeated attempts differ as agents' runs do."""
    if attempt == 0:
        return list(tasks)
    return [t for i, t in enumerate(tasks) if (i - attempt) % 4 != 0]


def example_runs_load(*, tasks: list[str] | None = None, attempts: int = 1) -> list[Run]:
    """Upload the example campaign (runs.examples) as user `example`: `attempts` runs
    without guidance and as many with it, each attempt pairing with its twin, unless this
    catalog version has it already; returns the runs it stored (none the second time).

    Only the example's tasks that the catalog holds are uploaded (all of them by
    default): a task added to the catalog later is simply missing from the runs. Later
    attempts leave a different quarter of the tasks out (example_attempt_tasks)."""
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
            data=example_bundle_build(
                name=name, tasks=example_attempt_tasks(tasks=tasks, attempt=attempt)
            ),
            is_public=True,
            is_example=True,
            enforce_quota=False,
        )
        for attempt in range(attempts)
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

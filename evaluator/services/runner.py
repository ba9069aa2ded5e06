"""Running the standalone evaluator CLI for one evaluation and reading its verdict.

The worker never imports submitted code, nor torch: it writes the submission's
pinned task version and the source into a temporary directory and runs
`python -m evaluator check … --json` as a child process in its own session, then
parses the one JSON verdict that CLI prints into the harness's own `Verdict`
(evaluator.harness.verdict), the one verdict type. Anything that is not a verdict
is a WorkerError: our fault, never the submitter's. `workload_rows` turns a
verdict's workloads into the rows the worker stores.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluator.harness.proctree import die_with_parent
from evaluator.harness.verdict import Status, Verdict, verdict_from_dict
from evaluator.models import Evaluation, WorkloadResult
from evaluator.services.pools import worker_gpu_lease
from evaluator.services.workdirs import ScratchUnwritable, work_dir_make, work_dir_remove
from task_catalog.models import Workload
from task_catalog.services import task_version_write_package
from taskformat.hidden import SECRET_ENV, HiddenDeclarationError, hidden_declaration_parse
from taskformat.spec import HiddenDeclaration, Mode

logger = logging.getLogger("evaluator.services")

# Added to (harness timeout x workloads): process start-up, imports, the reference runs.
SAFETY_MARGIN_S = 120
# After the safety timeout's kill: how long the evaluator's output may still take to end.
PIPE_DRAIN_S = 30
# Never handed to the evaluator process: the portal's own secrets and connections.
_ENV_DROP_PREFIXES = ("D2K_", "DJANGO_")
_ENV_DROP_WORDS = ("SECRET", "PASSWORD", "TOKEN", "DATABASE_URL", "REDIS_URL", "_KEY")


class WorkerError(Exception):
    """The evaluation could not reach a verdict for a reason that is ours, not the submitter's."""

    def __init__(self, reason: str, log: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.log = log


# A traceback's last line names the exception ("torch.AcceleratorError: CUDA error: …");
# lines after it (torch's hints on debugging a CUDA error) say nothing of the cause.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception)(?::|$)")


def stderr_reason(stderr: str) -> str:
    """The line of the evaluator's stderr that says why it failed: the last exception's,
    else its last line."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line):
            return line
    return lines[-1] if lines else "no message on stderr"


def evaluation_command(
    *, evaluation: Evaluation, catalog_dir: Path, kernel_path: Path
) -> list[str]:
    # Where the worker reads counters: needed (by a counter rule, or the timing check), all, off.
    counters = ["--counters", settings.D2K_EVALUATION_COUNTERS]
    # A GPU worker's evaluations take turns on its GPU for their timed phases.
    lease = worker_gpu_lease()
    lease_args = ["--gpu-lease", str(lease)] if lease is not None else []
    return [
        settings.D2K_EVALUATOR_PYTHON or sys.executable,
        "-m",
        "evaluator",
        "check",
        "--task",
        evaluation.submission.task.slug,
        "--catalog",
        str(catalog_dir),
        "--mode",
        settings.D2K_EVALUATOR_MODE,
        "--timeout",
        str(settings.D2K_EVALUATOR_TIMEOUT),
        *counters,
        *lease_args,
        "--json",
        str(kernel_path),
    ]


def evaluation_safety_timeout(*, evaluation: Evaluation) -> int:
    """Seconds after which the whole evaluator process group is killed."""
    version = evaluation.submission.task_version
    workloads = Workload.objects.filter(version_id=version.pk)
    mode = settings.D2K_EVALUATOR_MODE
    if mode == Mode.INTERPRET:
        workloads = workloads.filter(role=Workload.Role.CHECK)
    elif mode == Mode.CUDA:
        workloads = workloads.exclude(role=Workload.Role.CHECK)
    modes = [Mode(mode)] if mode in set(Mode) else list(Mode)
    try:
        declaration = hidden_declaration_parse(version.hidden_draws)
    except HiddenDeclarationError:
        declaration = HiddenDeclaration()  # the evaluator reports it; no time to add
    count = workloads.count() + sum(declaration.count(m) for m in modes)
    return settings.D2K_EVALUATOR_TIMEOUT * max(1, count) + SAFETY_MARGIN_S


def evaluator_env(*, scratch: Path) -> dict[str, str]:
    """The evaluator's environment: the worker's, less every D2K_/DJANGO_ variable and
    anything that looks secret, plus the allow-listed evaluator settings.

    The settings travel by name from Django's settings (so `.env` reaches them too);
    the evaluator's mode and timeout travel as command-line arguments. The deployment's
    hidden-workload secret travels as D2K_HIDDEN_SEED: the evaluator's parent draws the
    hidden workloads with it and drops it from its own environment before it starts
    the sandboxed child. TMPDIR points
    into the evaluation's scratch folder, so whatever the evaluator leaves behind is
    removed with it, even when the worker is killed.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_ENV_DROP_PREFIXES)
        and not any(word in key.upper() for word in _ENV_DROP_WORDS)
    }
    env["D2K_SANDBOX"] = settings.D2K_SANDBOX
    env[SECRET_ENV] = settings.D2K_HIDDEN_SEED
    if settings.D2K_EVALUATOR_CACHE:
        env["D2K_EVALUATOR_CACHE"] = str(settings.D2K_EVALUATOR_CACHE)
    env["TMPDIR"] = str(scratch)
    return env


def verdict_from_cli(evaluation: Evaluation) -> Verdict:
    submission = evaluation.submission
    if not settings.D2K_HIDDEN_SEED:
        # Without it the evaluator would run the public workloads only: no verdict at all.
        raise WorkerError("D2K_HIDDEN_SEED is not set: the hidden workloads cannot be drawn")
    safety = evaluation_safety_timeout(evaluation=evaluation)
    tmp = work_dir_make(evaluation_id=evaluation.pk)
    try:
        command, scratch = _scratch_prepare(evaluation=evaluation, tmp=tmp)
        stdout, stderr, returncode = _subprocess_run(
            command, timeout=safety, env=evaluator_env(scratch=scratch)
        )
    finally:
        # Whatever the evaluator left (its own scratch folders live in TMPDIR, in here),
        # even when it was killed: processes still in the folder first, then the files.
        if not work_dir_remove(tmp):
            logger.error("evaluation %s: scratch folder %s not removed", evaluation.pk, tmp)
    if returncode != 0:
        raise WorkerError(
            f"the evaluator exited with code {returncode}: {stderr_reason(stderr)}", log=stderr
        )
    verdict = _verdict_parse(stdout, stderr=stderr)
    version = submission.task_version
    if verdict.task_hash and verdict.task_hash != version.content_hash:
        # The package written from the stored version must be what was measured.
        raise WorkerError(
            f"the evaluator measured other content than v{version.number} of "
            f"{version.task.slug} (task hash {verdict.task_hash[:12]}, "
            f"expected {version.content_hash[:12]})",
            log=stderr,
        )
    return verdict


def _scratch_prepare(*, evaluation: Evaluation, tmp: Path) -> tuple[list[str], Path]:
    """Write the task package and the source into `tmp`: the evaluator's command and its
    TMPDIR. ScratchUnwritable when the folder cannot be written (a full disk, a read-only
    file system): nothing of the evaluation's has run yet."""
    submission = evaluation.submission
    catalog_dir, kernel_dir, scratch = tmp / "catalog", tmp / "submission", tmp / "tmp"
    try:
        for directory in (catalog_dir, kernel_dir, scratch):
            directory.mkdir()
        try:
            task_version_write_package(version=submission.task_version, directory=catalog_dir)
        except OSError:
            raise
        except Exception as exc:  # a broken stored version is ours to fix, never the submitter's
            logger.exception("evaluation %s: cannot write the task package", evaluation.pk)
            raise WorkerError(f"cannot write the task package: {exc}") from exc
        kernel_path = kernel_dir / (Path(submission.filename).name or "kernel.py")
        kernel_path.write_text(submission.source, encoding="utf-8")
    except OSError as exc:
        raise ScratchUnwritable(exc) from exc
    command = evaluation_command(
        evaluation=evaluation, catalog_dir=catalog_dir, kernel_path=kernel_path
    )
    return command, scratch


def _subprocess_run(
    command: list[str], *, timeout: float, env: dict[str, str]
) -> tuple[str, str, int]:
    try:
        process = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=env,
            # The evaluator dies with this worker: a killed worker must not leave it,
            # and its sandboxed child, running under init.
            preexec_fn=die_with_parent,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            # Its own session: on the safety timeout the whole group (sandbox children
            # included) is killed, never this worker.
            start_new_session=True,
        )
    except OSError as exc:
        raise WorkerError(f"cannot start the evaluator ({command[0]}): {exc}") from exc
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            _, stderr = process.communicate(timeout=PIPE_DRAIN_S)
        except subprocess.TimeoutExpired:
            # A process of another session still holds the pipes: the scratch folder's
            # removal kills it; the log is what was read.
            process.kill()
            process.wait()
            stderr = ""
        raise WorkerError(
            f"the evaluator did not finish within the {timeout:g} s safety timeout", log=stderr
        ) from exc
    return stdout, stderr, process.returncode


def _verdict_parse(stdout: str, *, stderr: str = "") -> Verdict:
    data = _json_object(stdout)
    if data is None:
        excerpt = stdout.strip()[:200] or "nothing"
        raise WorkerError(f"the evaluator printed no JSON verdict (got {excerpt!r})", log=stderr)
    try:
        return verdict_from_dict(data)
    except ValueError as exc:
        raise WorkerError(f"the evaluator's verdict is not readable: {exc}", log=stderr) from exc


def _json_object(stdout: str) -> dict[str, Any] | None:
    # The contract is one JSON object on stdout; a stray line printed before it by a
    # library should not cost a verdict, so the last line is tried as well.
    text = stdout.strip()
    candidates = [text, *text.splitlines()[-1:]] if text else []
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def json_safe(value: Any) -> Any:
    """JSON columns reject NaN/Infinity on PostgreSQL: store them as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def workload_rows(verdict: Verdict) -> list[WorkloadResult]:
    """The verdict's workloads as unsaved rows, in order; non-finite numbers become null."""
    rows = []
    for position, result in enumerate(verdict.workloads):
        m = result.measurement
        rows.append(
            WorkloadResult(
                name=result.name[:100],
                role=str(result.role)[:8],
                hidden=result.hidden,
                status=str(result.status),
                message=result.message,
                max_abs_err=_finite(result.max_abs_err),
                rel_err=_finite(result.rel_err),
                median_ms=_finite(m.median_ms) if m else None,
                ref_median_ms=_finite(m.baseline_ms) if m else None,
                speedup=_finite(m.speedup) if m else None,
                achieved_tflops=_finite(result.achieved_tflops),
                achieved_tbps=_finite(result.achieved_tbps),
                sol_fraction=_finite(result.sol_fraction),
                timing=json_safe(asdict(m)) if m else None,
                counters=json_safe(result.counters) if result.counters else None,
                position=position,
            )
        )
    return rows


def worker_error_verdict(*, evaluation: Evaluation, reason: str, log: str) -> Verdict:
    return Verdict(
        status=Status.WORKER_ERROR,
        message=(
            f"Worker error after {evaluation.attempts} attempts: {reason}. "
            "This is a fault of the evaluation service, not of the submission."
        ),
        flags=(),
        workloads=(),
        environment={},
        log=log,
        evaluator_version="",
    )

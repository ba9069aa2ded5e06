"""Running the standalone evaluator CLI for one evaluation and reading its verdict.

The worker never imports submitted code, nor torch: it writes the submission's
pinned task version and the source into a temporary directory and runs
`python -m evaluator check … --json` as a child process in its own session, then
parses the one JSON verdict that CLI prints (SPEC §6). Anything that is not a
verdict is a WorkerError: our fault, never the submitter's.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluator.harness.proctree import die_with_parent
from evaluator.models import Evaluation, EvaluationStatus, WorkloadResult
from evaluator.services.worker import work_dir_prefix, work_dir_root
from task_catalog.models import Workload
from task_catalog.services import task_version_write_package

logger = logging.getLogger("evaluator.services")

# Added to (harness timeout x workloads): process start-up, imports, the reference runs.
SAFETY_MARGIN_S = 120
VERDICT_STATUSES = frozenset(EvaluationStatus) - {
    EvaluationStatus.QUEUED,
    EvaluationStatus.RUNNING,
}
# Never handed to the evaluator process: the portal's own secrets and connections.
_ENV_DROP_PREFIXES = ("D2K_", "DJANGO_")
_ENV_DROP_WORDS = ("SECRET", "PASSWORD", "TOKEN", "DATABASE_URL", "REDIS_URL", "_KEY")


class WorkerError(Exception):
    """The evaluation could not reach a verdict for a reason that is ours, not the submitter's."""

    def __init__(self, reason: str, log: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.log = log


@dataclass(frozen=True)
class Verdict:
    status: str
    message: str
    flags: list[dict[str, str]]
    workloads: list[WorkloadResult]
    environment: dict[str, Any]
    log: str
    public_log: str
    mode: str
    evaluator_version: str
    task: str = ""
    task_hash: str = ""


def evaluation_command(
    *, evaluation: Evaluation, catalog_dir: Path, kernel_path: Path
) -> list[str]:
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
        "--json",
        str(kernel_path),
    ]


def evaluation_safety_timeout(*, evaluation: Evaluation) -> int:
    """Seconds after which the whole evaluator process group is killed."""
    workloads = Workload.objects.filter(version_id=evaluation.submission.task_version_id)
    mode = settings.D2K_EVALUATOR_MODE
    if mode == "interpret":
        workloads = workloads.filter(role=Workload.Role.CHECK)
    elif mode == "cuda":
        workloads = workloads.exclude(role=Workload.Role.CHECK)
    return settings.D2K_EVALUATOR_TIMEOUT * max(1, workloads.count()) + SAFETY_MARGIN_S


def evaluator_env(*, scratch: Path) -> dict[str, str]:
    """The evaluator's environment: the worker's, less every D2K_/DJANGO_ variable and
    anything that looks secret, plus the allow-listed evaluator settings.

    The settings travel by name from Django's settings (so `.env` reaches them too);
    the evaluator's mode and timeout travel as command-line arguments. TMPDIR points
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
    if settings.D2K_EVALUATOR_CACHE:
        env["D2K_EVALUATOR_CACHE"] = str(settings.D2K_EVALUATOR_CACHE)
    env["TMPDIR"] = str(scratch)
    return env


def verdict_from_cli(evaluation: Evaluation) -> Verdict:
    submission = evaluation.submission
    safety = evaluation_safety_timeout(evaluation=evaluation)
    prefix = f"{work_dir_prefix()}eval{evaluation.pk}-"
    with tempfile.TemporaryDirectory(prefix=prefix, dir=work_dir_root()) as tmp:
        catalog_dir = Path(tmp) / "catalog"
        kernel_dir = Path(tmp) / "submission"
        scratch = Path(tmp) / "tmp"
        for directory in (catalog_dir, kernel_dir, scratch):
            directory.mkdir()
        try:
            task_version_write_package(version=submission.task_version, directory=catalog_dir)
        except Exception as exc:  # a broken stored version is ours to fix, never the submitter's
            logger.exception("evaluation %s: cannot write the task package", evaluation.pk)
            raise WorkerError(f"cannot write the task package: {exc}") from exc
        kernel_path = kernel_dir / (Path(submission.filename).name or "kernel.py")
        kernel_path.write_text(submission.source, encoding="utf-8")
        command = evaluation_command(
            evaluation=evaluation, catalog_dir=catalog_dir, kernel_path=kernel_path
        )
        stdout, stderr, returncode = _subprocess_run(
            command, timeout=safety, env=evaluator_env(scratch=scratch)
        )
    if returncode != 0:
        last = stderr.strip().splitlines()[-1:] or ["no message on stderr"]
        raise WorkerError(f"the evaluator exited with code {returncode}: {last[0]}", log=stderr)
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
        _, stderr = process.communicate()
        raise WorkerError(
            f"the evaluator did not finish within the {timeout:g} s safety timeout", log=stderr
        ) from exc
    return stdout, stderr, process.returncode


def _verdict_parse(stdout: str, *, stderr: str = "") -> Verdict:
    data = _json_object(stdout)
    if data is None:
        excerpt = stdout.strip()[:200] or "nothing"
        raise WorkerError(f"the evaluator printed no JSON verdict (got {excerpt!r})", log=stderr)
    status = data.get("status")
    if status not in VERDICT_STATUSES:
        raise WorkerError(f"the evaluator returned an unknown status {status!r}", log=stderr)
    raw_workloads = data.get("workloads") or []
    if not isinstance(raw_workloads, list):
        raise WorkerError("the evaluator's verdict has no workload list", log=stderr)
    workloads = []
    for position, raw in enumerate(raw_workloads):
        if not isinstance(raw, dict) or not raw.get("name"):
            raise WorkerError(f"the evaluator's workload #{position} has no name", log=stderr)
        workloads.append(_workload_result(raw, position))
    names = [w.name for w in workloads]
    if len(names) != len(set(names)):
        raise WorkerError(f"the evaluator repeated a workload name: {names}", log=stderr)
    flags = data.get("flags") or []
    return Verdict(
        status=status,
        message=str(data.get("message") or ""),
        flags=[
            {"check": str(f.get("check", "")), "detail": str(f.get("detail", ""))}
            for f in flags
            if isinstance(f, dict)
        ],
        workloads=workloads,
        environment=_json_safe(data.get("environment") or {}),
        log=str(data.get("log") or ""),
        public_log=str(data.get("public_log") or ""),
        mode=str(data.get("mode") or "")[:10],
        evaluator_version=str(data.get("evaluator_version") or "")[:32],
        task=str(data.get("task") or "")[:100],
        task_hash=str(data.get("task_hash") or "")[:64],
    )


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


def _json_safe(value: Any) -> Any:
    """JSON columns reject NaN/Infinity on PostgreSQL: store them as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _workload_result(raw: dict[str, Any], position: int) -> WorkloadResult:
    status = raw.get("status")
    if status not in VERDICT_STATUSES:
        raise WorkerError(f"workload {raw['name']!r} has an unknown status {status!r}")
    timing = raw.get("timing")
    counters = raw.get("counters")
    return WorkloadResult(
        name=str(raw["name"])[:100],
        role=str(raw.get("role") or "")[:8],
        hidden=bool(raw.get("hidden", False)),
        status=status,
        message=str(raw.get("message") or ""),
        max_abs_err=_finite(raw.get("max_abs_err")),
        rel_err=_finite(raw.get("rel_err")),
        median_ms=_finite(raw.get("median_ms")),
        ref_median_ms=_finite(raw.get("ref_median_ms")),
        speedup=_finite(raw.get("speedup")),
        achieved_tflops=_finite(raw.get("achieved_tflops")),
        achieved_tbps=_finite(raw.get("achieved_tbps")),
        sol_fraction=_finite(raw.get("sol_fraction")),
        timing=_json_safe(timing) if isinstance(timing, dict) else None,
        counters=_json_safe(counters) if isinstance(counters, dict) else None,
        position=position,
    )


def worker_error_verdict(*, evaluation: Evaluation, reason: str, log: str) -> Verdict:
    return Verdict(
        status=EvaluationStatus.WORKER_ERROR,
        message=(
            f"Worker error after {evaluation.attempts} attempts: {reason}. "
            "This is a fault of the evaluation service, not of the submission."
        ),
        flags=[],
        workloads=[],
        environment={},
        log=log,
        public_log="",
        mode="",
        evaluator_version="",
    )

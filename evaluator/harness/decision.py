"""One status for an evaluation, in order of precedence (docs/evaluator.md).

Evidence of cheating outranks the way the process ended; a child the
watchdog killed is named by its limit; one ended from outside is never the
submission's fault; an exception the child reported is redacted once a
hidden workload was dealt. Running out of GPU memory is the submission's only
when no other evaluation shared the GPU meanwhile (gpulease): beside others it
is the worker's, and the evaluation is taken again. So is a scratch folder
stopped by the disk's free space below the limit every evaluation has.
"""

from __future__ import annotations

import re
import shutil
import signal

from taskformat.spec import TaskSpec

from . import gpulease, isolation, protocol, redact, sandbox, watchdog
from .channel import MISSING_TOOLCHAIN
from .gpumemory import short_beside_others
from .launch import channel_cap
from .protocol import Observed
from .reports import CHILD_ERROR_KINDS, ErrorReport
from .verdict import Status, WorkloadOutcome


def decide(
    run: sandbox.ChildRun,
    seen: Observed,
    results: list[WorkloadOutcome],
    expected: int,
    *,
    task: TaskSpec,
    dealer: protocol.Dealer | None = None,
) -> tuple[Status, str]:
    """One status for the evaluation, in order of precedence (docs/evaluator.md).

    Evidence of cheating outranks the way the process ended: a kernel that
    patches the timer and then hangs is held for review as `flagged`, with the
    kill named in the message, not filed away as a plain timeout. A child
    ended from outside (outside_kill) is never the submission's fault.
    """
    killed = killed_status(run)
    if seen.flags:
        checks = sorted({f["check"] for f in seen.flags})
        message = "honesty check fired: " + ", ".join(checks)
        return Status.FLAGGED, f"{message} (then {killed[1]})" if killed else message
    if killed:
        return killed
    if outside := outside_kill(run):
        return Status.WORKER_ERROR, outside
    if not seen.started:
        return Status.WORKER_ERROR, f"the sandbox did not start (exit code {run.returncode})"
    if seen.error is not None:
        hidden_dealt = dealer is not None and dealer.hidden_dealt
        status, message = error_status(seen.error, task, hidden_dealt=hidden_dealt)
        if status is Status.WORKER_ERROR and (refuted := refuted_claim(seen.error.message)):
            return Status.RUNTIME_ERROR, refuted
        # Host memory is the evaluation's own; the GPU's, beside others, is not (in
        # whichever layer it ran out, whatever status the child's exception read as),
        # unless the submission asked for more than the GPU could give it alone.
        sharing = gpulease.current().report.most_sharing
        if sharing and short_beside_others(seen.error.message):
            return Status.WORKER_ERROR, (
                f"out of memory while {sharing} other evaluation{'s' if sharing > 1 else ''} "
                "shared the GPU and held memory of it: a fault of the worker, not of the "
                "submission"
            )
        return status, message
    if not seen.done:
        how = f"signal {run.signal}" if run.signal else f"exit code {run.returncode}"
        return Status.RUNTIME_ERROR, f"the submission's process ended early ({how})"
    incorrect = [r for r in results if r.status is not Status.CORRECT]
    if incorrect:
        public = [r for r in incorrect if not r.hidden]
        hidden = len(incorrect) - len(public)
        names = [r.name for r in public]
        if hidden:
            names.append(f"{hidden} hidden workload{'s' if hidden > 1 else ''}")
        # A hidden workload's message names its shapes: staff see it in its row.
        why = public[0].message if public else "its output differs from the reference"
        return Status.INCORRECT, f"incorrect on {', '.join(names)}: {why}"
    if len(results) != expected:
        return Status.WORKER_ERROR, "the evaluation ended without a result for every workload"
    return Status.CORRECT, f"correct on all {len(results)} workloads"


def killed_status(run: sandbox.ChildRun) -> tuple[Status, str] | None:
    """The status and message of a child the watchdog killed, or None."""
    if run.killed_for == "timeout":
        waited = run.cpu_wait_seconds
        if run.wall_capped:
            return Status.TIMEOUT, (
                f"killed after {run.wall_seconds:.0f} s of wall time, the most an evaluation may "
                f"take on a busy host ({waited:.0f} s of it waiting for a CPU)"
            )
        if waited < 1:
            return Status.TIMEOUT, f"killed after the {run.wall_seconds:.0f} s time limit"
        return Status.TIMEOUT, (
            f"killed after the time limit: {run.wall_seconds - waited:.0f} s of running, "
            f"{run.wall_seconds:.0f} s of wall time ({waited:.0f} s of it waiting for a CPU, "
            "not counted)"
        )
    if run.killed_for == "gpu_busy":
        return Status.TIMEOUT, f"killed: {run.gpu_busy}"
    if run.killed_for == "memory":
        used = f"killed for using {run.peak_rss_bytes / 2**30:.1f} GiB of host memory"
        if run.peak_tmpfs_bytes >= 2**20:
            used += f" ({run.peak_tmpfs_bytes / 2**30:.1f} GiB of it files in /tmp and /dev/shm)"
        return Status.OUT_OF_MEMORY, used
    if run.killed_for == "scratch":
        if short_disk(run):
            return Status.WORKER_ERROR, (
                f"killed for filling its scratch folder ({run.peak_scratch_bytes / 2**30:.1f} "
                f"GiB) when the host's disk had room for {run.scratch_limit_bytes / 2**30:.1f} "
                f"GiB of it, within the {run.scratch_policy_bytes / 2**30:.1f} GiB every "
                "evaluation may write: a fault of the worker, not of the submission"
            )
        return Status.OUT_OF_MEMORY, (
            f"killed for filling its scratch folder ({run.peak_scratch_bytes / 2**30:.1f} GiB; "
            f"the limits are {run.scratch_limit_bytes / 2**30:.1f} GiB and "
            f"{watchdog.MAX_SCRATCH_ENTRIES} files)"
        )
    if run.killed_for == "processes":
        return Status.RUNTIME_ERROR, "killed for starting too many processes"
    if run.killed_for == "result_channel":
        cap = channel_cap()
        return Status.RUNTIME_ERROR, f"killed for writing more than {cap} to the result pipe"
    return None


def short_disk(run: sandbox.ChildRun) -> bool:
    """Whether the scratch folder's limit was the disk's, not the one every evaluation has:
    half the free space, with other evaluations' folders on the same disk, was less, and
    the folder was killed for bytes within the common limit (not for its count of files)."""
    return run.scratch_limit_bytes < run.peak_scratch_bytes <= run.scratch_policy_bytes


def outside_kill(run: sandbox.ChildRun) -> str:
    """Why the child ended from outside the evaluation, or "" if it did not.

    Under the killguard filter no process of the submission can send SIGKILL,
    or end with a status that reads as one: a SIGKILL the watchdog did not
    send came from the host (its out-of-memory killer, or another process).
    """
    if run.killed_for or run.signal != signal.SIGKILL:
        return ""
    if run.host_oom_kills > 0:
        return (
            "the host's out-of-memory killer ended the submission's process (the host ran out "
            f"of memory; the evaluation's processes used at most {run.peak_rss_bytes / 2**30:.1f} "
            "GiB, within their limit): a fault of the worker, not of the submission"
        )
    if run.kill_guarded:
        return (
            "a SIGKILL from outside the evaluation ended the submission's process (the sandbox "
            "lets the submission send none): a fault of the worker, not of the submission"
        )
    return ""


def refuted_claim(message: str) -> str:
    """Why a `worker_error` the child reported is the submission's own failure, or "".

    The child's report is in the submission's process, which can write it: a
    kernel that fails could say the worker lacks a tool, and be taken again
    instead of blamed. Where the report names a tool, the parent looks for it
    on the child's PATH (the sandbox binds the same folders); one that is
    there refutes it. A claim it cannot check stands (docs/exploits.md,
    Known gaps).
    """
    for sign, tool in MISSING_TOOLCHAIN.items():
        # The sign whole: "g++: not found" is not read inside "x86_64-linux-gnu-g++: …".
        named = tool and re.search(rf"(?<![\w.+-]){re.escape(sign)}", message)
        if named and shutil.which(tool, path=isolation.child_path()):
            return (
                f"the submission's process reported that this worker lacks {tool}, which it "
                "has: a failure of the submission's, not of the worker"
            )
    return ""


def error_status(error: ErrorReport, task: TaskSpec, *, hidden_dealt: bool) -> tuple[Status, str]:
    """The status and message of the exception the child reported.

    Once a hidden workload was dealt, whatever the child says of where it
    failed, the owner reads the exception's type only, and only a known one
    (redact.error_message).
    """
    known = error.kind in CHILD_ERROR_KINDS  # protocol.collect flags any other kind
    status = Status(error.kind) if known else Status.RUNTIME_ERROR
    where, text = error.workload, error.message
    if hidden_dealt or where in redact.hidden_names(task):
        return status, redact.error_message(text)
    return status, f"{text} (workload {where})" if where else text

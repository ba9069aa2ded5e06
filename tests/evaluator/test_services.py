"""evaluation_run against a fake evaluator CLI (the worker's outside world), plus one slow
end-to-end run of the real CLI on catalog/row_softmax."""

import importlib
import json
import logging
import math
import shutil
import sys
import time
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.conf import settings
from django.core.exceptions import ValidationError

from evaluator import tasks
from evaluator.harness import proctree
from evaluator.models import Evaluation, EvaluationStatus, Review
from evaluator.services import (
    evaluation_create,
    evaluation_review,
    evaluation_run,
    evaluation_safety_timeout,
    jobs,
    runner,
)
from tests.evaluator.fake_cli import verdict_dict, workload_dict
from tests.factories import (
    EvaluationFactory,
    SubmissionFactory,
    UserFactory,
    WorkloadResultFactory,
)

pytestmark = pytest.mark.django_db

SOURCE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


@pytest.fixture
def evaluation(eval_task_version):
    submission = SubmissionFactory(
        task_version=eval_task_version, source=SOURCE, filename="my_kernel.py"
    )
    return EvaluationFactory(
        submission=submission, status=EvaluationStatus.QUEUED, mode="", finished_at=None
    )


def test_correct_verdict_is_persisted_with_one_result_per_workload(fake_cli, evaluation):
    fake_cli.reply(verdict_dict("correct", message="all workloads correct"))

    returned = evaluation_run(evaluation_id=evaluation.pk)

    evaluation.refresh_from_db()
    assert returned.pk == evaluation.pk
    assert evaluation.status == EvaluationStatus.CORRECT
    assert evaluation.message == "all workloads correct"
    assert evaluation.mode == "interpret"
    assert evaluation.evaluator_version == "0.2.0"
    assert evaluation.environment["device"] == "CPU (Triton interpreter)"
    assert evaluation.log == "evaluator log line\n"
    assert evaluation.attempts == 1
    assert evaluation.worker
    assert evaluation.started_at is not None
    assert evaluation.finished_at >= evaluation.started_at
    assert evaluation.review == Review.NONE
    results = list(evaluation.results.order_by("position"))
    assert [(r.name, r.hidden, r.status, r.position) for r in results] == [
        ("check_small", False, "correct", 0),
        ("check_hidden_tail", True, "correct", 1),
    ]
    assert results[0].max_abs_err == 1e-6


def test_an_older_evaluators_hidden_role_is_stored_as_untimed(fake_cli, evaluation):
    # Before evaluator 0.5.0 the correctness-only cuda role was printed `hidden`.
    workloads = [
        workload_dict("check_small"),
        workload_dict("hidden_1", role="hidden", hidden=True),
        workload_dict("hidden_2", role="sideways", hidden=True),
    ]
    fake_cli.reply(verdict_dict("correct", workloads=workloads))

    evaluation_run(evaluation_id=evaluation.pk)

    roles = list(evaluation.results.order_by("position").values_list("name", "role"))
    # A role this evaluator does not know is kept as printed, for staff to see.
    assert roles == [("check_small", "check"), ("hidden_1", "untimed"), ("hidden_2", "sideways")]


def test_the_untimed_role_migration_renames_stored_hidden_rows_both_ways():
    migration = importlib.import_module("evaluator.migrations.0008_house_untimed_role")
    row = WorkloadResultFactory(name="hidden_1", role="hidden", hidden=True)
    timed = WorkloadResultFactory(evaluation=row.evaluation, name="w", role="timed")

    migration.forwards(django_apps, None)
    row.refresh_from_db()
    timed.refresh_from_db()
    assert (row.role, timed.role) == ("untimed", "timed")
    migration.backwards(django_apps, None)
    row.refresh_from_db()
    assert row.role == "hidden"


@pytest.mark.parametrize(
    ("environment", "hardware"),
    [
        ({"device": "CPU (Triton interpreter)"}, ""),
        ({"device": "NVIDIA H200", "gpu": "NVIDIA H200", "uuid": "GPU-1"}, "NVIDIA H200"),
    ],
)
def test_the_verdict_names_the_gpu_it_was_timed_on(fake_cli, evaluation, environment, hardware):
    fake_cli.reply(verdict_dict("correct", environment=environment))

    evaluation_run(evaluation_id=evaluation.pk)

    evaluation.refresh_from_db()
    assert evaluation.hardware == hardware
    assert Evaluation.objects.filter(hardware=hardware).count() == 1


def test_cli_gets_the_pinned_package_and_the_source_with_a_scrubbed_env(
    fake_cli, evaluation, settings, monkeypatch
):
    monkeypatch.setenv("D2K_SECRET_KEY", "do-not-leak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
    settings.D2K_EVALUATOR_TIMEOUT = 42

    evaluation_run(evaluation_id=evaluation.pk)

    [call] = fake_cli.calls
    argv = call["argv"]
    assert argv[:4] == ["-m", "evaluator", "check", "--task"]
    assert argv[4] == "row_softmax"
    assert argv[5] == "--catalog"
    assert argv[7:] == [
        "--mode", "interpret", "--timeout", "42", "--counters", "needed", "--json", argv[-1]
    ]  # fmt: skip
    assert call["catalog"] == ["row_softmax"]
    assert call["kernel"] == SOURCE
    assert call["kernel_name"] == "my_kernel.py"
    assert Path(call["cwd"]) == Path(settings.BASE_DIR)
    assert "D2K_SECRET_KEY" not in call["env"]
    assert "AWS_SECRET_ACCESS_KEY" not in call["env"]
    # The one secret the evaluator gets: the deployment's, to draw the hidden workloads.
    assert call["env"]["D2K_HIDDEN_SEED"] == settings.D2K_HIDDEN_SEED
    assert "PATH" in call["env"]
    assert not Path(argv[6]).exists(), "the temporary package is removed afterwards"


def test_flagged_verdict_is_held_for_review_with_its_flags(fake_cli, evaluation):
    flags = [{"check": "output_cache", "detail": "same output for different inputs"}]
    fake_cli.reply(verdict_dict("flagged", flags=flags))

    evaluation_run(evaluation_id=evaluation.pk)

    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.FLAGGED
    assert evaluation.review == Review.PENDING
    assert evaluation.flags == flags


def test_incorrect_verdict_names_the_failing_workload(fake_cli, evaluation):
    fake_cli.reply(
        verdict_dict(
            "incorrect",
            message="incorrect on check_small",
            workloads=[workload_dict("check_small", status="incorrect")],
        )
    )
    evaluation_run(evaluation_id=evaluation.pk)
    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.INCORRECT
    assert evaluation.results.get().status == "incorrect"


def test_non_finite_numbers_are_stored_as_null(fake_cli, evaluation):
    # Python's json writes NaN/Infinity; PostgreSQL's jsonb rejects them.
    timing = {
        "median_ms": 0.5, "iqr_ms": math.nan, "min_ms": 0.4, "calls": 400,
        "ref_median_ms": math.inf, "ref_iqr_ms": 0.0, "ref_calls": 400, "cold_start_ms": 9.0,
    }  # fmt: skip
    wl = workload_dict("timed", role="timed", max_abs_err=math.nan, timing=timing)
    fake_cli.reply(verdict_dict("incorrect", workloads=[wl], environment={"clock": math.inf}))

    evaluation_run(evaluation_id=evaluation.pk)

    result = Evaluation.objects.get(pk=evaluation.pk).results.get()
    assert result.median_ms == 0.5
    assert result.speedup is None and result.ref_median_ms is None
    assert result.max_abs_err is None
    assert result.timing["iqr_ms"] is None and result.timing["ref_median_ms"] is None
    assert result.timing["median_ms"] == 0.5
    assert Evaluation.objects.get(pk=evaluation.pk).environment == {"clock": None}


def test_syntax_error_is_the_submitters_compile_error_not_a_worker_error(fake_cli, evaluation):
    fake_cli.reply(verdict_dict("compile_error", message="SyntaxError at line 3", workloads=[]))
    evaluation_run(evaluation_id=evaluation.pk)
    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.COMPILE_ERROR
    assert "line 3" in evaluation.message
    assert evaluation.attempts == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ({"stdout": "Traceback (most recent call last): boom"}, "no JSON verdict"),
        ({"stdout": "", "stderr": "error: bad --mode\n", "code": 2}, "exited with code 2"),
        ({"stdout": json.dumps({"status": "excellent"})}, "unknown status"),
        ({"stdout": json.dumps([1, 2])}, "no JSON verdict"),
        (
            {"stdout": json.dumps(verdict_dict(workloads=[{"status": "correct"}]))},
            "has no name",
        ),
    ],
)
def test_a_broken_cli_reply_is_requeued_while_attempts_remain(
    fake_cli, evaluation, django_capture_on_commit_callbacks, reply, reason
):
    fake_cli.reply(reply)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        evaluation_run(evaluation_id=evaluation.pk)

    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.QUEUED
    assert evaluation.attempts == 1
    assert reason in evaluation.message
    assert len(callbacks) == 1


def test_requeue_sends_the_primary_key_to_the_django_q_task(
    fake_cli, evaluation, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(jobs, "async_task", lambda *args, **kw: sent.append(args))
    fake_cli.reply({"stdout": "garbage"})

    with django_capture_on_commit_callbacks(execute=True):
        evaluation_run(evaluation_id=evaluation.pk)

    assert sent == [("evaluator.tasks.evaluation_run_next", evaluation.pk)]


def test_worker_error_is_stored_after_the_last_attempt_through_the_queue(
    fake_cli, evaluation, django_capture_on_commit_callbacks
):
    # Q_CLUSTER is synchronous in tests: each re-enqueue runs the task at once.
    fake_cli.reply({"stdout": "", "stderr": "CUDA driver exploded\n", "code": 1})

    with django_capture_on_commit_callbacks(execute=True):
        evaluation_run(evaluation_id=evaluation.pk)

    evaluation.refresh_from_db()
    assert len(fake_cli.calls) == settings.D2K_EVALUATION_MAX_ATTEMPTS
    assert evaluation.status == EvaluationStatus.WORKER_ERROR
    assert evaluation.attempts == settings.D2K_EVALUATION_MAX_ATTEMPTS
    assert "CUDA driver exploded" in evaluation.message
    assert "not of the submission" in evaluation.message
    assert "CUDA driver exploded" in evaluation.log
    assert evaluation.finished_at is not None
    assert not evaluation.results.exists()


def test_a_retry_that_succeeds_keeps_the_verdict(fake_cli, evaluation):
    fake_cli.reply({"stdout": "not json"}, verdict_dict("correct"))

    evaluation_run(evaluation_id=evaluation.pk, requeue=False)

    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.CORRECT
    assert evaluation.attempts == 2
    assert evaluation.results.count() == 2


def test_a_verdict_for_other_task_content_than_the_version_is_a_worker_error(fake_cli, evaluation):
    # The verdict names the hash of what it measured; it must be the version's.
    fake_cli.reply(verdict_dict("correct", task_hash="f" * 64))

    evaluation_run(evaluation_id=evaluation.pk, requeue=False)

    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.WORKER_ERROR
    assert "measured other content than v" in evaluation.message
    assert not evaluation.results.exists()


def test_a_verdict_naming_the_versions_hash_is_stored(fake_cli, evaluation):
    version = evaluation.submission.task_version
    fake_cli.reply(verdict_dict("correct", task_hash=version.content_hash))

    evaluation_run(evaluation_id=evaluation.pk, requeue=False)

    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.CORRECT


def test_the_clis_own_worker_error_is_retried_then_stored_as_reported(fake_cli, evaluation):
    fake_cli.reply(verdict_dict("worker_error", message="no GPU visible", workloads=[]))

    evaluation_run(evaluation_id=evaluation.pk, requeue=False)

    evaluation.refresh_from_db()
    assert len(fake_cli.calls) == settings.D2K_EVALUATION_MAX_ATTEMPTS
    assert evaluation.status == EvaluationStatus.WORKER_ERROR
    assert evaluation.message == "no GPU visible"


def test_the_safety_timeout_kills_the_evaluator_and_is_a_worker_error(
    fake_cli, evaluation, settings, monkeypatch
):
    settings.D2K_EVALUATOR_TIMEOUT = 1
    monkeypatch.setattr(runner, "SAFETY_MARGIN_S", 0)
    evaluation.attempts = settings.D2K_EVALUATION_MAX_ATTEMPTS - 1
    evaluation.save()
    fake_cli.reply({"stdout": json.dumps(verdict_dict()), "sleep": 60})

    started = time.monotonic()
    evaluation_run(evaluation_id=evaluation.pk)

    assert time.monotonic() - started < 20
    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.WORKER_ERROR
    assert "safety timeout" in evaluation.message


# An evaluator whose sandboxed child runs in a session of its own (as bubblewrap's does):
# it writes into its scratch folder (its TMPDIR) and outlives the evaluator's group.
LINGERING_EVALUATOR = """#!/bin/sh
mkdir -p "$TMPDIR/d2k-eval-x/locked" && head -c 65536 /dev/zero > "$TMPDIR/d2k-eval-x/big"
chmod 0 "$TMPDIR/d2k-eval-x/locked"
cd "$TMPDIR/d2k-eval-x" && setsid sleep 300 </dev/null >/dev/null 2>&1 &
echo $! > {pid_file}
sleep 60
"""


def test_an_evaluator_killed_by_the_safety_timeout_leaves_no_scratch_folder_or_process(
    evaluation, settings, monkeypatch, tmp_path
):
    settings.D2K_WORK_DIR = tmp_path / "work"
    settings.D2K_EVALUATOR_TIMEOUT = 2
    monkeypatch.setattr(runner, "SAFETY_MARGIN_S", 0)
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "evaluator"
    script.write_text(LINGERING_EVALUATOR.format(pid_file=pid_file))
    script.chmod(0o755)
    settings.D2K_EVALUATOR_PYTHON = str(script)

    evaluation_run(evaluation_id=evaluation.pk)

    evaluation.refresh_from_db()
    assert "safety timeout" in evaluation.message
    assert list(settings.D2K_WORK_DIR.iterdir()) == []
    child = int(pid_file.read_text())
    assert not proctree.pid_alive(child), "the child left in the folder was killed"


@pytest.mark.parametrize(("mode", "workloads"), [("interpret", 2), ("cuda", 1), ("auto", 3)])
def test_safety_timeout_scales_with_the_workloads_of_the_mode(
    evaluation, settings, mode, workloads
):
    settings.D2K_EVALUATOR_MODE = mode
    settings.D2K_EVALUATOR_TIMEOUT = 100
    expected = 100 * workloads + runner.SAFETY_MARGIN_S
    assert evaluation_safety_timeout(evaluation=evaluation) == expected


@pytest.mark.parametrize(
    ("mode", "workloads"), [("interpret", 2 + 3), ("cuda", 1 + 2), ("auto", 8)]
)
def test_safety_timeout_counts_the_hidden_workloads_the_version_draws(
    evaluation, settings, mode, workloads
):
    version = evaluation.submission.task_version
    version.hidden_draws = {
        "cuda": [{"count": 2, "params": {"rows": 1}}],
        "interpret": [{"count": 3, "params": {"rows": 1}}],
    }
    version.save()
    settings.D2K_EVALUATOR_MODE = mode
    settings.D2K_EVALUATOR_TIMEOUT = 100
    expected = 100 * workloads + runner.SAFETY_MARGIN_S
    assert evaluation_safety_timeout(evaluation=evaluation) == expected


def test_without_a_hidden_seed_the_worker_never_starts_the_evaluator(
    fake_cli, evaluation, settings
):
    settings.D2K_HIDDEN_SEED = ""
    evaluation_run(evaluation_id=evaluation.pk, requeue=False)
    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.WORKER_ERROR
    assert "D2K_HIDDEN_SEED is not set" in evaluation.message
    assert fake_cli.calls == []


def test_a_missing_evaluator_executable_is_a_worker_error(evaluation, settings):
    settings.D2K_EVALUATOR_PYTHON = "/nonexistent/python"
    evaluation_run(evaluation_id=evaluation.pk, requeue=False)
    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.WORKER_ERROR
    assert "cannot start the evaluator" in evaluation.message


@pytest.mark.parametrize("bad_id", [999_999, "abc", None])
def test_unknown_or_malformed_ids_are_logged_and_ignored(fake_cli, caplog, bad_id):
    with caplog.at_level(logging.ERROR, logger="evaluator.services"):
        assert evaluation_run(evaluation_id=bad_id) is None
    assert "ignoring" in caplog.text
    assert fake_cli.calls == []


def test_a_finished_evaluation_is_not_run_again(fake_cli, evaluation):
    evaluation.status = EvaluationStatus.CORRECT
    evaluation.save()
    assert evaluation_run(evaluation_id=evaluation.pk).status == EvaluationStatus.CORRECT
    assert fake_cli.calls == []


def test_the_django_q_task_calls_the_service(fake_cli, evaluation):
    assert tasks.evaluation_run_next(evaluation.pk) == "correct"
    assert tasks.evaluation_run_next(123_456_789) is None


def test_evaluation_create_enqueues_on_commit(
    eval_task_version, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(jobs, "async_task", lambda *args, **kw: sent.append(args))
    submission = SubmissionFactory(task_version=eval_task_version)
    with django_capture_on_commit_callbacks(execute=True):
        evaluation = evaluation_create(submission=submission)
    assert evaluation.status == EvaluationStatus.QUEUED
    assert sent == [("evaluator.tasks.evaluation_run_next", evaluation.pk)]


# --- review -------------------------------------------------------------------


@pytest.fixture
def flagged(eval_task_version):
    return EvaluationFactory(
        submission__task_version=eval_task_version, status="flagged", review=Review.PENDING
    )


@pytest.mark.parametrize("decision", [Review.HACKED, Review.CLEARED])
def test_review_records_the_decision_the_note_and_the_reviewer(flagged, decision):
    admin = UserFactory(is_staff=True)
    evaluation_review(evaluation=flagged, decision=decision, note="looked at it", reviewer=admin)
    flagged.refresh_from_db()
    assert flagged.review == decision
    assert flagged.review_note == "looked at it"
    assert flagged.reviewed_by == admin
    assert flagged.reviewed_at is not None
    assert flagged.status == EvaluationStatus.FLAGGED, "the evidence is kept"


def test_review_rejects_unknown_decisions(flagged):
    with pytest.raises(ValidationError, match="Unknown review decision"):
        evaluation_review(evaluation=flagged, decision="meh", reviewer=UserFactory())


def test_only_flagged_results_are_reviewed(eval_task_version):
    evaluation = EvaluationFactory(submission__task_version=eval_task_version, status="correct")
    with pytest.raises(ValidationError, match="only flagged"):
        evaluation_review(evaluation=evaluation, decision="hacked", reviewer=UserFactory())


# --- the real CLI, end to end -------------------------------------------------------

CATALOG = Path(settings.BASE_DIR) / "catalog"

TAIL_DROPPING_KERNEL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_full_blocks(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # Only whole blocks: the last n_cols % BLOCK columns are never read or written.
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    n_full = (n_cols // BLOCK) * BLOCK
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, n_full, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + offs).to(tl.float32)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_full, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + offs).to(tl.float32)
        s += tl.exp(x - row_max)
    den = tl.sum(s, axis=0)
    for start in range(0, n_full, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + offs).to(tl.float32)
        y = tl.exp(x - row_max) / den
        tl.store(y_ptr + row * n_cols + start + offs, y.to(y_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.zeros_like(x)
        _softmax_full_blocks[(x.shape[0],)](x, y, x.shape[1], BLOCK=128)
        return y
"""


@pytest.fixture
def row_softmax(tmp_path, settings):
    if not (Path(settings.BASE_DIR) / "evaluator" / "__main__.py").exists():
        pytest.skip("the evaluator CLI is not there yet")
    from task_catalog.models import Task
    from task_catalog.services import catalog_load

    shutil.copytree(CATALOG / "row_softmax", tmp_path / "catalog" / "row_softmax")
    catalog_load(directory=tmp_path / "catalog")
    settings.D2K_EVALUATOR_PYTHON = sys.executable
    settings.D2K_EVALUATOR_MODE = "interpret"
    settings.D2K_EVALUATOR_TIMEOUT = 300
    return Task.objects.get(slug="row_softmax")


def _upload_and_run(task, source):
    from submissions.services import submission_create

    submission = submission_create(owner=UserFactory(), task=task, source=source, filename="k.py")
    evaluation = submission.evaluations.get()
    return evaluation_run(evaluation_id=evaluation.pk, requeue=False)


@pytest.mark.slow
def test_real_cli_the_expert_is_correct(row_softmax):
    evaluation = _upload_and_run(row_softmax, (CATALOG / "row_softmax" / "expert.py").read_text())
    assert evaluation.status == EvaluationStatus.CORRECT, evaluation.message
    assert evaluation.mode == "interpret"
    # One result per check workload of row_softmax's package in interpret mode.
    from taskformat.hidden import task_with_hidden
    from taskformat.package import DEFAULT_CATALOG_DIR, load_task
    from taskformat.spec import Mode

    # The suite's deployment secret drew the hidden check workloads (test settings).
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    checks = task_with_hidden(task, secret=settings.D2K_HIDDEN_SEED).workloads_for(Mode.INTERPRET)
    assert evaluation.results.count() == len(checks) >= 4
    assert set(evaluation.results.values_list("status", flat=True)) == {"correct"}


@pytest.mark.slow
def test_real_cli_a_kernel_dropping_the_tail_is_incorrect_on_the_named_workload(row_softmax):
    evaluation = _upload_and_run(row_softmax, TAIL_DROPPING_KERNEL)
    assert evaluation.status == EvaluationStatus.INCORRECT, evaluation.message
    statuses = dict(evaluation.results.values_list("name", "status"))
    assert statuses["check_bf16_8x256"] == "correct"  # 256 is a multiple of the block
    assert statuses["check_fp32_4x1000"] == "incorrect"  # 1000 is not
    assert "check_fp32_4x1000" in evaluation.message


@pytest.mark.parametrize(
    ("enabled", "expected"),
    [
        ("needed", ["--counters", "needed"]),
        ("all", ["--counters", "all"]),
        ("off", ["--counters", "off"]),
    ],
)
def test_the_counters_setting_reaches_the_cli(fake_cli, evaluation, settings, enabled, expected):
    settings.D2K_EVALUATION_COUNTERS = enabled
    settings.D2K_EVALUATOR_TIMEOUT = 42

    evaluation_run(evaluation_id=evaluation.pk)

    [call] = fake_cli.calls
    assert call["argv"][7:-2] == ["--mode", "interpret", "--timeout", "42", *expected]


def test_an_evaluator_crash_is_named_by_its_exception_and_its_stderr_kept_in_the_worker_log(
    fake_cli, evaluation, caplog
):
    """torch ends a CUDA error with hints on debugging it: the reason is the exception's own
    line, and the operator reads the stderr's end in the worker's log (an attempt taken again
    keeps no log of its own)."""
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "evaluator/harness/judge.py", line 120, in judge\n'
        "torch.AcceleratorError: CUDA error: out of memory\n"
        "CUDA kernel errors might be asynchronously reported at some other API call\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
    )
    fake_cli.reply({"stdout": "", "stderr": stderr, "code": 1})
    with caplog.at_level(logging.WARNING, logger="evaluator.services"):
        evaluation_run(evaluation_id=evaluation.pk)
    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.QUEUED
    assert (
        "the evaluator exited with code 1: torch.AcceleratorError: CUDA error: out of memory"
        in evaluation.message
    )
    assert 'File "evaluator/harness/judge.py", line 120' in caplog.text

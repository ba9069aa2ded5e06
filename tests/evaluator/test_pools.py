"""Worker pools: an evaluation runs only on a worker of its GPU kind, woken on that pool's queue."""

import os
import stat
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.conf import Conf

from evaluator.models import EvaluationStatus, WorkerBeat
from evaluator.selectors import worker_pools_seen
from evaluator.services import evaluation_create, evaluation_reap, jobs
from evaluator.services.pools import (
    HARDWARE_ENV,
    LEASE_ENV,
    PoolError,
    evaluation_target_hardware,
    gpu_detect,
    pool_queue,
    worker_pool_bind,
)
from evaluator.services.runner import evaluation_command
from tests.factories import EvaluationFactory, RunFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"


@pytest.fixture
def sent(monkeypatch):
    calls = []
    monkeypatch.setattr(
        jobs, "async_task", lambda *args, **kw: calls.append((args[1], kw.get("cluster")))
    )
    return calls


@pytest.fixture
def pool(monkeypatch):
    """Make this process a worker of the given pool, restored afterwards."""
    for name in (HARDWARE_ENV, LEASE_ENV, "CUDA_VISIBLE_DEVICES"):
        # setenv first, so that the undo removes what worker_pool_bind sets.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(Conf, "CLUSTER_NAME", Conf.CLUSTER_NAME)
    monkeypatch.setattr(Conf, "WORKERS", Conf.WORKERS)

    def serve(hardware):
        monkeypatch.setenv(HARDWARE_ENV, hardware)

    return serve


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """An nvidia-smi on the PATH that names GPU 0 an H200 and knows no GPU 1."""
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$2" = 0 ]; then echo "NVIDIA H200, GPU-1234abcd"; exit 0; fi\n'
        'echo "No devices were found" >&2; exit 6\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    return script


def _queued(target, *, age_s=0):
    return EvaluationFactory(
        status=EvaluationStatus.QUEUED,
        mode="",
        finished_at=None,
        target_hardware=target,
        enqueued_at=timezone.now() - timedelta(seconds=age_s),
    )


@pytest.mark.parametrize(
    ("pools", "default", "run_hardware", "target"),
    [
        ([], "", H200, ""),  # the embedded setup: one default pool for everything
        ([H200], "", H200, H200),  # the run's GPU kind has workers: it goes there
        ([H200], "", H100, ""),  # a kind without workers: the default pool
        ([H200], H200, "", H200),  # a lone upload: the configured default
    ],
)
def test_an_evaluation_goes_to_the_pool_of_its_gpu_kind(
    settings, pools, default, run_hardware, target
):
    settings.D2K_HARDWARE_POOLS, settings.D2K_DEFAULT_HARDWARE = pools, default
    assert evaluation_target_hardware(run_hardware=run_hardware) == target


def test_a_runs_evaluation_is_queued_on_its_pools_own_queue(
    settings, sent, eval_task_version, django_capture_on_commit_callbacks
):
    settings.D2K_HARDWARE_POOLS = [H200]
    run = RunFactory(hardware=H200)
    submission = SubmissionFactory(task_version=eval_task_version, run=run)

    with django_capture_on_commit_callbacks(execute=True):
        evaluation = evaluation_create(submission=submission)

    assert evaluation.target_hardware == H200
    assert sent == [(evaluation.pk, pool_queue(H200))]
    assert pool_queue(H200) == f"{Conf.PREFIX}-nvidia-h200"
    assert pool_queue("") == Conf.PREFIX


def test_a_worker_claims_only_its_own_pools_evaluations(pool):
    ours, theirs = _queued(H200, age_s=5), _queued("", age_s=10)
    pool(H200)

    taken = jobs.evaluation_claim_next(worker="gpu-host:1")
    assert taken.pk == ours.pk
    assert jobs.evaluation_claim_next(worker="gpu-host:1") is None
    # Handed the other pool's id directly, it leaves it queued for its own workers.
    assert jobs.evaluation_claim(evaluation_id=theirs.pk, worker="gpu-host:1") is None
    theirs.refresh_from_db()
    assert (theirs.status, theirs.worker) == (EvaluationStatus.QUEUED, "")


def test_the_reaper_wakes_each_pool_only_when_its_own_queue_is_empty(
    settings, sent, django_capture_on_commit_callbacks
):
    settings.D2K_EVALUATION_REQUEUE_S = 60
    busy, idle = _queued(H200, age_s=600), _queued(H100, age_s=600)
    get_broker(pool_queue(H200)).enqueue("a message still waiting for an H200 worker")

    with django_capture_on_commit_callbacks(execute=True):
        report = evaluation_reap()

    assert report.reenqueued == [idle.pk]
    assert sent == [(idle.pk, pool_queue(H100))]
    busy.refresh_from_db()
    assert busy.enqueued_at < timezone.now() - timedelta(seconds=500)


def test_a_gpu_worker_is_pinned_to_its_gpu_and_named_after_it(pool, fake_smi):
    hardware, gpu = worker_pool_bind(gpu=0, hardware="")

    assert (hardware, gpu.name, gpu.uuid) == (H200, H200, "GPU-1234abcd")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-1234abcd"
    assert os.environ[HARDWARE_ENV] == H200
    # Its cluster listens on the pool's queue and leaves the site's schedules alone.
    assert Conf.CLUSTER_NAME == pool_queue(H200) != Conf.PREFIX


def test_a_gpu_worker_runs_its_evaluations_at_once_under_its_gpu_s_lease(
    pool, fake_smi, settings, tmp_path
):
    settings.D2K_EVALUATIONS_PER_GPU, settings.D2K_WORK_DIR = 3, tmp_path
    worker_pool_bind(gpu=0, hardware="")

    assert Conf.WORKERS == 3
    # One folder per GPU of the host, which every evaluator it starts is told.
    assert os.environ[LEASE_ENV] == str(tmp_path / "gpu-lease" / "gpu-1234abcd")
    evaluation = EvaluationFactory()
    command = evaluation_command(
        evaluation=evaluation, catalog_dir=tmp_path, kernel_path=tmp_path / "k.py"
    )
    assert command[command.index("--gpu-lease") + 1] == os.environ[LEASE_ENV]


def test_an_evaluator_off_a_gpu_worker_takes_no_lease(pool, tmp_path):
    command = evaluation_command(
        evaluation=EvaluationFactory(), catalog_dir=tmp_path, kernel_path=tmp_path / "k.py"
    )
    assert "--gpu-lease" not in command


@pytest.mark.parametrize(
    ("gpu", "hardware", "error"),
    [
        (0, H100, "GPU 0 is a NVIDIA H200, not a NVIDIA H100"),
        (1, "", "nvidia-smi could not read GPU 1"),
    ],
)
def test_a_worker_refuses_a_gpu_it_cannot_serve(pool, fake_smi, gpu, hardware, error):
    with pytest.raises(PoolError, match=error):
        worker_pool_bind(gpu=gpu, hardware=hardware)
    assert HARDWARE_ENV not in os.environ


def test_no_nvidia_smi_is_a_sentence_not_a_traceback(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PoolError, match="nvidia-smi is not on the PATH"):
        gpu_detect(0)


def test_the_worker_command_exits_with_the_reason(pool, fake_smi):
    with pytest.raises(CommandError, match="not a NVIDIA H100"):
        call_command("evaluation_worker", "--gpu", "0", "--hardware", H100)


def test_pools_are_seen_with_their_workers_and_waiting_work():
    now = timezone.now()
    WorkerBeat.objects.create(
        worker="gpu-a:10", hardware=H200, gpu_uuid="GPU-1", queue=pool_queue(H200),
        started_at=now, seen_at=now - timedelta(seconds=4),
    )  # fmt: skip
    WorkerBeat.objects.create(
        worker="gpu-a:11", hardware=H200, gpu_uuid="GPU-2", queue=pool_queue(H200),
        started_at=now, seen_at=now - timedelta(seconds=9),
    )  # fmt: skip
    _queued(H200)
    _queued(H100)
    _queued(H100)

    seen = {p.hardware: p for p in worker_pools_seen(now=now)}

    assert (seen[H200].workers, seen[H200].queued, seen[H200].age_s) == (2, 1, 4.0)
    assert (seen[H100].workers, seen[H100].queued, seen[H100].last_seen_at) == (0, 2, None)


def test_healthz_answers_200_with_the_pools(client):
    now = timezone.now()
    WorkerBeat.objects.create(
        worker="gpu-a:10", hardware=H200, queue=pool_queue(H200), started_at=now, seen_at=now
    )
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["database"], body["broker"]) == ("ok", "ok", "ok")
    assert [(p["hardware"], p["workers"]) for p in body["worker_pools"]] == [(H200, 1)]


def _beat(worker: str, *, age_s: float, hardware: str = H200, **state) -> WorkerBeat:
    now = timezone.now()
    return WorkerBeat.objects.create(
        worker=worker, hardware=hardware, queue=pool_queue(hardware), started_at=now,
        seen_at=now - timedelta(seconds=age_s), **state,
    )  # fmt: skip


FULL = {
    "state": "disk_full",
    "state_reason": "cannot write the scratch folder: [ENOSPC] No space left on device",
    "backoff_s": 20.0,
}


def test_healthz_counts_only_workers_that_reported_within_the_live_window(client, settings):
    settings.D2K_WORKER_LIVE_S = 60
    _beat("gpu-a:10", age_s=5)
    _beat("gpu-a:11", age_s=61)  # killed: its row stays, it is not counted
    _beat("gpu-b:12", age_s=3600, hardware=H100)
    body = client.get("/healthz").json()
    assert body["status"] == "ok"
    assert body["workers"] == {
        "live": 1, "ready": 1, "stale": 2, "live_window_s": 60, "backing_off": [],
    }  # fmt: skip
    assert [(p["hardware"], p["workers"], p["ready"]) for p in body["worker_pools"]] == [
        (H200, 1, 1)
    ]


def test_healthz_is_degraded_when_no_live_worker_takes_work(client):
    response = client.get("/healthz")
    assert (response.status_code, response.json()["status"]) == (200, "degraded")
    assert response.json()["workers"]["live"] == 0

    _beat("gpu-a:10", age_s=500)  # only a stale one
    assert client.get("/healthz").json()["status"] == "degraded"

    until = timezone.now() + timedelta(seconds=15)
    _beat("gpu-a:11", age_s=2, backoff_until=until, **FULL)
    response = client.get("/healthz")
    body = response.json()
    assert (response.status_code, body["status"]) == (200, "degraded")
    assert (body["workers"]["live"], body["workers"]["ready"]) == (1, 0)
    assert body["workers"]["backing_off"] == [
        {
            "worker": "gpu-a:11",
            "hardware": H200,
            "state": "disk_full",
            "reason": FULL["state_reason"],
            "backoff_s": 20.0,
            "backoff_until": until.isoformat(),
        }
    ]

    _beat("gpu-a:12", age_s=2)  # another worker of the pool takes the work
    body = client.get("/healthz").json()
    assert body["status"] == "ok"
    assert (body["workers"]["live"], body["workers"]["ready"]) == (2, 1)
    assert [w["worker"] for w in body["workers"]["backing_off"]] == ["gpu-a:11"]
    assert [(p["workers"], p["ready"]) for p in body["worker_pools"]] == [(2, 1)]


def test_healthz_answers_503_when_the_broker_is_down(client, monkeypatch):
    from d2kportal import views

    def down():
        raise ConnectionError("the task broker did not answer")

    monkeypatch.setattr(views, "broker_ping", down)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["broker"] == "error: ConnectionError: the task broker did not answer"


def test_the_suite_runs_on_the_broker_it_was_given():
    # CI's PostgreSQL pass sets D2K_TEST_REDIS_URL: the queue is then Redis, a database of
    # its own per test process (the URL's number plus the xdist worker's); else the ORM.
    broker = get_broker()
    url = os.environ.get("D2K_TEST_REDIS_URL", "")
    if not url:
        assert type(broker).__name__ == "ORM"
        return
    assert type(broker).__name__ == "Redis" and broker.ping()
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    first = int(url.rstrip("/").rpartition("/")[2])
    assert broker.connection.connection_pool.connection_kwargs["db"] == first + worker
    broker.enqueue("a message only this test process sees")
    assert broker.queue_size() == 1

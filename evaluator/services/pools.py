"""Worker pools: the GPU kind an evaluation needs, the queue that carries its wake-up
call, and what each worker runs on.

One worker process serves one pool. A GPU worker is pinned to one GPU
(`CUDA_VISIBLE_DEVICES`), takes its pool's name from that GPU, listens on the pool's
queue only, and claims only evaluations whose `target_hardware` is its pool: a job
for another GPU kind is never run on it. The default pool (blank hardware) is the
embedded setup's single worker, on the cluster's own queue.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.utils import timezone
from django.utils.text import slugify
from django_q.conf import Conf

from evaluator.models import WorkerBeat

logger = logging.getLogger("evaluator.services.pools")

HARDWARE_ENV = "D2K_WORKER_HARDWARE"
# The lease folder of the GPU a worker is pinned to (gpu_lease_folder).
LEASE_ENV = "D2K_WORKER_GPU_LEASE"


class PoolError(RuntimeError):
    """A worker that cannot serve the pool it was asked for."""


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str


def pool_queue(hardware: str) -> str:
    """The broker queue of a pool: the cluster's own for the default pool."""
    if not hardware:
        return Conf.PREFIX
    return f"{Conf.PREFIX}-{slugify(hardware)}"[:100]


def evaluation_target_hardware(*, run_hardware: str = "") -> str:
    """The pool a new evaluation goes to: the run's GPU kind where that kind has
    workers of its own, else the configured default."""
    pools = {name.strip() for name in settings.D2K_HARDWARE_POOLS if name.strip()}
    if run_hardware and run_hardware.strip() in pools:
        return run_hardware.strip()
    return settings.D2K_DEFAULT_HARDWARE


def worker_hardware() -> str:
    """The pool this process serves (set by `evaluation_worker --gpu/--hardware`)."""
    return os.environ.get(HARDWARE_ENV, "")


def gpu_detect(index: int) -> Gpu:
    """GPU `index` of this host as the driver names it (nvidia-smi, so the worker
    never imports torch)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise PoolError("nvidia-smi is not on the PATH: this host shows no NVIDIA GPU")
    try:
        out = subprocess.run(
            [smi, "-i", str(index), "--query-gpu=name,uuid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        raise PoolError(f"nvidia-smi could not read GPU {index}: {exc}") from exc
    name, _, uuid = out.strip().partition(",")
    if not name.strip():
        raise PoolError(f"nvidia-smi names no GPU {index}")
    return Gpu(index=index, name=name.strip(), uuid=uuid.strip())


def worker_pool_bind(*, gpu: int | None, hardware: str) -> tuple[str, Gpu | None]:
    """Pin this process (and every evaluator it starts) to its GPU and its pool.

    Returns the pool's hardware name and the GPU. A `hardware` that names another
    kind than the GPU has is refused: the worker would time a job on the wrong chip.
    """
    found = None
    if gpu is not None:
        found = gpu_detect(gpu)
        if hardware and hardware != found.name:
            raise PoolError(
                f"GPU {gpu} is a {found.name}, not a {hardware}: this worker would time "
                f"{hardware} jobs on the wrong chip"
            )
        hardware = found.name
        os.environ["CUDA_VISIBLE_DEVICES"] = found.uuid or str(gpu)
        os.environ[LEASE_ENV] = str(gpu_lease_folder(found))
        # Evaluations of this GPU at once: they share it through its lease (gpulease).
        Conf.WORKERS = max(1, settings.D2K_EVALUATIONS_PER_GPU)
    os.environ[HARDWARE_ENV] = hardware
    # The cluster's broker and scheduler follow the cluster name (django-q2's own
    # multi-queue setting): a GPU pool listens on its queue only and leaves the
    # site's schedules to the default cluster.
    Conf.CLUSTER_NAME = pool_queue(hardware)
    return hardware, found


def gpu_lease_folder(gpu: Gpu) -> Path:
    """The lease folder of one GPU of this host: every evaluation timed on it, of any
    worker of the host, takes its turn there (evaluator.harness.gpulease)."""
    name = slugify(gpu.uuid or f"gpu-{gpu.index}") or f"gpu-{gpu.index}"
    return Path(settings.D2K_WORK_DIR) / "gpu-lease" / name


def worker_gpu_lease() -> Path | None:
    """The lease folder of the GPU this worker is pinned to (None: not pinned)."""
    folder = os.environ.get(LEASE_ENV, "")
    return Path(folder) if folder else None


def worker_beat(*, worker: str, hardware: str, gpu: Gpu | None, started_at: datetime) -> WorkerBeat:
    beat, _ = WorkerBeat.objects.update_or_create(
        worker=worker,
        defaults={
            "hardware": hardware,
            "gpu_uuid": gpu.uuid if gpu else "",
            "queue": pool_queue(hardware),
            "started_at": started_at,
            "seen_at": timezone.now(),
            # The cluster's worker processes: each runs one evaluation at a time.
            "slots": max(1, int(Conf.WORKERS or 1)),
        },
    )
    return beat


def worker_beat_remove(*, worker: str) -> None:
    WorkerBeat.objects.filter(worker=worker).delete()

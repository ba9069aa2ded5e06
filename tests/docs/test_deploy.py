"""docs/deploy.md's promises that need no running services: the web server's config
reads the same .env as the settings, and the deploy scripts answer their usage."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def gunicorn_config(folder: Path, **env: str) -> dict[str, str]:
    """The bind and workers gunicorn.conf.py computes in a fresh interpreter, run from a
    checkout at `folder` (its .env included), with `env` as the environment's D2K_WEB_*."""
    (folder / "d2kportal").mkdir(exist_ok=True)
    shutil.copy(ROOT / "d2kportal" / "gunicorn.conf.py", folder / "d2kportal")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("D2K_")}
    code = (
        "import runpy, sys; c = runpy.run_path(sys.argv[1]); print(c['bind']); print(c['workers'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder / "d2kportal" / "gunicorn.conf.py")],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {"bind": out[0], "workers": out[1]}


def test_gunicorn_reads_the_web_settings_from_dotenv(tmp_path):
    (tmp_path / ".env").write_text("D2K_WEB_BIND=127.0.0.1:8765\nD2K_WEB_WORKERS=3\n")
    assert gunicorn_config(tmp_path) == {"bind": "127.0.0.1:8765", "workers": "3"}


def test_the_environment_wins_over_dotenv_for_gunicorn(tmp_path):
    (tmp_path / ".env").write_text("D2K_WEB_BIND=127.0.0.1:8765\n")
    config = gunicorn_config(tmp_path, D2K_WEB_BIND="127.0.0.1:9001")
    assert config["bind"] == "127.0.0.1:9001"


def test_gunicorn_defaults_without_dotenv(tmp_path):
    assert gunicorn_config(tmp_path)["bind"] == "127.0.0.1:8000"


def test_gunicorn_gives_each_web_process_one_blas_thread_unless_told(tmp_path):
    (tmp_path / "d2kportal").mkdir()
    shutil.copy(ROOT / "d2kportal" / "gunicorn.conf.py", tmp_path / "d2kportal")
    code = (
        "import os, runpy, sys; runpy.run_path(sys.argv[1]); "
        "print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])"
    )
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}

    def threads(**env: str) -> list[str]:
        return subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "d2kportal" / "gunicorn.conf.py")],
            env={**clean, **env},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()

    assert threads() == ["1", "1"]
    assert threads(OPENBLAS_NUM_THREADS="4") == ["4", "1"]


def test_the_wheelhouse_script_needs_a_folder():
    done = subprocess.run(
        ["bash", str(ROOT / "deploy" / "wheelhouse.sh")], capture_output=True, text=True
    )
    assert done.returncode == 2 and "usage: deploy/wheelhouse.sh DIR" in done.stderr


def worker_host(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (folder / "deploy").mkdir(exist_ok=True)
    shutil.copy(ROOT / "deploy" / "worker_host.sh", folder / "deploy")
    # A PATH with the shell's tools and no nvidia-smi: a host without a GPU.
    tools = folder / "bin"
    tools.mkdir(exist_ok=True)
    for tool in ("bash", "dirname", "stat", "tr", "cat"):
        found = shutil.which(tool)
        if found and not (tools / tool).exists():
            (tools / tool).symlink_to(found)
    return subprocess.run(
        ["bash", str(folder / "deploy" / "worker_host.sh"), *args],
        env={"PATH": str(tools), "HOME": str(folder)},
        capture_output=True,
        text=True,
    )


def test_adding_a_host_without_a_gpu_installs_one_interpret_worker(tmp_path):
    (tmp_path / ".env").write_text("D2K_SECRET_KEY=x\n")
    done = worker_host(tmp_path, "--print", "--hardware", "NVIDIA H200")
    assert done.returncode == 0, done.stderr
    assert "systemctl enable --now d2k-worker@cpu" in done.stdout
    assert f'ExecStart={tmp_path}/deploy/worker_host.sh --run %i --hardware "NVIDIA H200"' in (
        done.stdout
    )
    assert "Environment=DJANGO_SETTINGS_MODULE=d2kportal.settings.production" in done.stdout


def test_adding_a_host_without_its_dotenv_says_what_to_copy(tmp_path):
    done = worker_host(tmp_path, "--print")
    assert done.returncode == 1 and "copy the deployment's .env here first" in done.stderr

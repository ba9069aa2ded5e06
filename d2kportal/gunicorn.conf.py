"""gunicorn's configuration for the portal's web processes (docs/deploy.md).

    gunicorn -c d2kportal/gunicorn.conf.py d2kportal.wsgi

Workers default to 2 × cores + 1 (gunicorn's own advice for sync workers). Where it
listens, the workers, the timeout and the trusted proxies come from the environment
(docs/settings.md); gunicorn's own command-line options override the rest. Evaluations
never run here: the web answers in milliseconds and hands work to the evaluation workers
through the queue.
"""

import multiprocessing
import os
from pathlib import Path

import environ

# The same .env the settings read (d2kportal/settings/env.py), read before the workers
# load Django: D2K_WEB_* set there count too, and the environment still wins.
_dotenv = Path(__file__).resolve().parent.parent / ".env"
if _dotenv.exists():
    environ.Env.read_env(str(_dotenv))

# One BLAS thread per web process. The boards' bootstrap intervals (scoring.intervals) are
# small matrix products; OpenBLAS's default of a thread per core spins its helper threads
# on every one, and with 2 × cores + 1 workers that took four times the CPU of one thread
# (2.5 s instead of 0.8 s to build the leaderboard of 500 runs on 2 cores). Set before the
# workers import numpy; a value in the environment still wins.
for _blas in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_blas, "1")

bind = os.environ.get("D2K_WEB_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("D2K_WEB_WORKERS") or 2 * multiprocessing.cpu_count() + 1)
threads = 1
# Uploads of run bundles take a while on slow links; nothing else does.
timeout = int(os.environ.get("D2K_WEB_TIMEOUT", 120))
graceful_timeout = 30
keepalive = 5
# Recycle workers now and then so a slow leak never accumulates.
max_requests = 2000
max_requests_jitter = 200
accesslog = "-"
errorlog = "-"
forwarded_allow_ips = os.environ.get("D2K_WEB_FORWARDED_ALLOW_IPS", "127.0.0.1")
proc_name = "d2k-web"

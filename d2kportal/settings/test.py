"""The test suite: fast hashing, in-process static files, synchronous queue."""

import os

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .env import env

DEBUG = False
# The suite's own deployment secret: its evaluations draw hidden workloads like a deployment's.
D2K_HIDDEN_SEED = env("D2K_HIDDEN_SEED", default="") or "d2k-test-suite-hidden-seed"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# D2K_TEST_DATABASE_URL lets CI run the same suite against PostgreSQL.
DATABASES = {"default": env.db("D2K_TEST_DATABASE_URL", default="sqlite:///:memory:")}


def _redis_database_of_this_worker(url: str) -> str:
    """The URL with its database number moved up by the xdist worker's number (gw0, gw1, …),
    so that parallel test processes never see each other's queues."""
    base, _, number = url.rstrip("/").rpartition("/")
    if not base.startswith(("redis://", "rediss://")) or not number.isdigit():
        raise ImproperlyConfigured(
            f"D2K_TEST_REDIS_URL must end with a database number, e.g. redis://127.0.0.1:6379/1, "
            f"not {url!r}"
        )
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    return f"{base}/{int(number) + (int(worker) if worker.isdigit() else 0)}"


# The broker: the database (ORM) unless D2K_TEST_REDIS_URL names a Redis database that the
# suite may empty (tests/conftest.py does, around every test); D2K_REDIS_URL never applies.
_test_redis_url = env("D2K_TEST_REDIS_URL", default="")
Q_CLUSTER = {k: v for k, v in Q_CLUSTER.items() if k not in ("orm", "redis")}  # noqa: F405
if _test_redis_url:
    Q_CLUSTER["redis"] = _redis_database_of_this_worker(_test_redis_url)
else:
    Q_CLUSTER["orm"] = "default"
Q_CLUSTER["sync"] = True
D2K_EVALUATOR_MODE = "interpret"

"""The test suite: fast hashing, in-process static files, synchronous queue."""

from .base import *  # noqa: F403
from .env import env

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# D2K_TEST_DATABASE_URL lets CI run the same suite against PostgreSQL.
DATABASES = {"default": env.db("D2K_TEST_DATABASE_URL", default="sqlite:///:memory:")}
Q_CLUSTER = {**Q_CLUSTER, "sync": True}  # noqa: F405
D2K_EVALUATOR_MODE = "interpret"

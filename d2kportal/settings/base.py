"""Settings shared by every deployment. Values that vary come from `env`.

Only what a deployment (or an experiment) changes is read from the environment
(`.env.example`, docs/settings.md); the rest are constants here, which tests
change with `override_settings`.
"""

import tempfile
from importlib.util import find_spec
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from .env import BASE_DIR, env

SECRET_KEY = env("D2K_SECRET_KEY", default="insecure-development-key-change-me")
DEBUG = env.bool("D2K_DEBUG", default=False)
ALLOWED_HOSTS = env.list("D2K_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("D2K_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework_api_key",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "core",
    "accounts",
    "moderation",
    "task_catalog",
    "submissions",
    "evaluator",
    "leaderboard",
    "runs",
    "scoring",
]

MIDDLEWARE = [
    "core.errors.RequestSizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "core.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "core.unavailable.ServiceUnavailableMiddleware",
]

ROOT_URLCONF = "d2kportal.urls"
WSGI_APPLICATION = "d2kportal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.db("D2K_DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
# SQLite serves a web process and a worker at once: WAL lets readers and the one writer
# proceed together, IMMEDIATE takes the write lock when a transaction starts (never an
# upgrade that deadlocks and fails at once), and the busy timeout waits for it.
SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,  # seconds a write waits for the lock, then the page answers 503
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {**SQLITE_OPTIONS, **DATABASES["default"].get("OPTIONS", {})}
    # Each process keeps its connection between requests: opening one runs the PRAGMAs
    # above and starts with a cold page cache, half the time of a page served from the
    # cache. `?conn_max_age=0` in D2K_DATABASE_URL closes it after every request.
    DATABASES["default"].setdefault("CONN_MAX_AGE", 600)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Each web process keeps the pages and fragments it built under the data version
# (leaderboard.caching): the boards, the catalog, and the public view of each run and
# submission page visited. Django's default of 300 entries would let a walk through the
# run pages push the boards out.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "OPTIONS": {"MAX_ENTRIES": 3000},
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
AUTH_USER_MODEL = "accounts.User"
CSRF_FAILURE_VIEW = "core.errors.csrf_failure"
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "leaderboard:home"
LOGOUT_REDIRECT_URL = "leaderboard:home"
# Password reset e-mails: printed on the console unless D2K_EMAIL_URL names an SMTP server
# (smtp+tls://user:password@host:587).
vars().update(env.email_url("D2K_EMAIL_URL", default="consolemail://"))
DEFAULT_FROM_EMAIL = env("D2K_DEFAULT_FROM_EMAIL", default="D2K Portal <noreply@localhost>")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("D2K_STATIC_ROOT", default=BASE_DIR / "staticfiles")
# plotly.js is served from the installed plotly package (no CDN): static/vendor/plotly/plotly.min.js
_plotly_spec = find_spec("plotly")
if _plotly_spec is None or _plotly_spec.origin is None:
    raise ImproperlyConfigured("The plotly package (a dependency) is not installed.")
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/plotly", Path(_plotly_spec.origin).parent / "package_data"),
]
# Uploaded files that are not rows (run traces, gzip-compressed).
MEDIA_ROOT = env.path("D2K_MEDIA_ROOT", default=BASE_DIR / "media")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.CheckedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "D2K Portal API",
    "DESCRIPTION": "Catalog, submissions and evaluations of D2K-Bench.",
    "VERSION": "1",
    # Swagger UI from the drf-spectacular-sidecar package, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Named for what it is, not for the field (`source`) it first appeared in.
    "ENUM_NAME_OVERRIDES": {"AssessmentSourceEnum": "scoring.models.AssessmentSource"},
}

# django-q2: the ORM broker is the embedded default; D2K_REDIS_URL switches to Redis.
_redis_url = env("D2K_REDIS_URL", default="")
Q_CLUSTER = {
    "name": "d2k",
    "workers": env.int("D2K_Q_WORKERS", default=1),
    # An evaluation may run for many minutes on a GPU; the harness enforces its
    # own per-submission timeout, this one only catches a wedged worker.
    "timeout": 3600,
    "retry": 3600 + 60,
    # The evaluation row is the job (evaluator.services.jobs): it counts its own attempts
    # and a reaper re-queues lost ones, so django-q2 never re-delivers on its own.
    "max_attempts": 1,
    "catch_up": False,
    "ack_failures": True,
    "save_limit": 1000,
}
if _redis_url:
    Q_CLUSTER["redis"] = _redis_url
else:
    Q_CLUSTER["orm"] = "default"

# The evaluator.
D2K_CATALOG_DIR = env.path("D2K_CATALOG_DIR", default=BASE_DIR / "catalog")
D2K_EVALUATOR_MODE = env("D2K_EVALUATOR_MODE", default="auto")  # auto | interpret | cuda
D2K_EVALUATOR_TIMEOUT = env.int("D2K_EVALUATOR_TIMEOUT", default=600)
D2K_EVALUATOR_PYTHON = env("D2K_EVALUATOR_PYTHON", default="")
D2K_MAX_UPLOAD_BYTES = env.int("D2K_MAX_UPLOAD_BYTES", default=512 * 1024)
# The largest request body anywhere but a run bundle's upload (core.errors): refused with 413.
D2K_MAX_REQUEST_BYTES = env.int("D2K_MAX_REQUEST_BYTES", default=4 * 1024 * 1024)
# Per-user quotas (submissions.quotas); staff are exempt.
D2K_QUOTA_UPLOADS_PER_DAY = env.int("D2K_QUOTA_UPLOADS_PER_DAY", default=200)
D2K_QUOTA_QUEUED_EVALUATIONS = env.int("D2K_QUOTA_QUEUED_EVALUATIONS", default=60)
D2K_QUOTA_STORED_BYTES = env.int("D2K_QUOTA_STORED_BYTES", default=1024 * 1024 * 1024)
# Passed to the evaluator process (the worker hands it nothing else of its own environment).
D2K_SANDBOX = env("D2K_SANDBOX", default="auto")  # auto | bwrap | process
# The deployment's secret the hidden workloads are drawn from (docs/settings.md).
D2K_HIDDEN_SEED = env("D2K_HIDDEN_SEED", default="")
D2K_EVALUATOR_CACHE = env("D2K_EVALUATOR_CACHE", default="")
# Cuda mode: hardware counters of correct submissions (evaluator/harness/counters.py):
# "needed" (where a design property's counter rule or the timing check uses them),
# "all" or "off"; true and false read as "all" and "off".
_COUNTERS = env.str("D2K_EVALUATION_COUNTERS", default="needed").strip().lower()
D2K_EVALUATION_COUNTERS = {"true": "all", "1": "all", "false": "off", "0": "off"}.get(
    _COUNTERS, _COUNTERS
)
if D2K_EVALUATION_COUNTERS not in ("needed", "all", "off"):
    raise ImproperlyConfigured(
        f"D2K_EVALUATION_COUNTERS is needed, all or off (or true/false), not {_COUNTERS!r}"
    )
# Durable evaluations (docs/operations.md). The lease, the re-queue wait and the reaper's
# round are read from the environment for the suite's multi-process tests, which shorten them.
D2K_EVALUATION_LEASE_S = env.int("D2K_EVALUATION_LEASE_S", default=60)
D2K_EVALUATION_MAX_ATTEMPTS = 3
D2K_EVALUATION_REQUEUE_S = env.int("D2K_EVALUATION_REQUEUE_S", default=120)
D2K_REAP_INTERVAL_S = env.int("D2K_REAP_INTERVAL_S", default=15)
# /healthz counts a worker as live while its last report is at most this old.
D2K_WORKER_LIVE_S = env.int("D2K_WORKER_LIVE_S", default=60)
# Worker pools (docs/deploy.md): the GPU kinds that have workers of their own. A run
# whose manifest names one of them is evaluated there; everything else goes to the
# pool named by D2K_DEFAULT_HARDWARE (blank: the embedded worker's default pool).
# Evaluations a GPU worker (`evaluation_worker --gpu`) runs at once on its GPU: they start,
# compile, check and judge side by side and take turns for what is timed (gpulease).
D2K_EVALUATIONS_PER_GPU = env.int("D2K_EVALUATIONS_PER_GPU", default=6)
D2K_HARDWARE_POOLS = env.list("D2K_HARDWARE_POOLS", default=[])
D2K_DEFAULT_HARDWARE = env("D2K_DEFAULT_HARDWARE", default="")
D2K_WORK_DIR = Path(env("D2K_WORK_DIR", default="") or Path(tempfile.gettempdir()) / "d2k-worker")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("D2K_LOG_LEVEL", default="INFO")},
}

# Agent run bundles (docs/run-format.md). The size a deployment accepts is its own (its
# proxy's body limit follows it); the zip-bomb guards below hold for every deployment.
D2K_RUN_BUNDLE_MAX_BYTES = env.int("D2K_RUN_BUNDLE_MAX_BYTES", default=64 * 1024 * 1024)
# A bigger bundle is stored and validated in the background (202, state `validating`).
D2K_RUN_SYNC_VALIDATION_BYTES = env.int("D2K_RUN_SYNC_VALIDATION_BYTES", default=2 * 1024 * 1024)
D2K_RUN_BUNDLE_MAX_FILES = 400
D2K_RUN_BUNDLE_MAX_UNCOMPRESSED_BYTES = 512 * 1024 * 1024
D2K_RUN_BUNDLE_MAX_RATIO = 100
D2K_RUN_TRACE_MAX_BYTES = 128 * 1024 * 1024
# A cell the trace scanners nominate (needs_review) stays off the rankings until a
# moderator reviews it (docs/security.md); false: it ranks while it waits.
D2K_AUDIT_HOLD_NEEDS_REVIEW = env.bool("D2K_AUDIT_HOLD_NEEDS_REVIEW", default=True)

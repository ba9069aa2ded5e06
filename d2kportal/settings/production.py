"""Production: every secret must come from the environment, or start-up fails."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .env import env

# Values copied from examples and docs: a key that anyone can read is no secret.
PLACEHOLDER_SECRETS = frozenset({"change-me", "changeme", "secret", "django-insecure"})
SECRET_KEY_MIN_LENGTH = 50


def secret_key_problem(key: str) -> str | None:
    """Why `key` is no production secret (None when it is one): Django's own test
    (security.W009) plus the placeholders of .env.example."""
    if not key:
        return "is not set"
    lowered = key.lower()
    if lowered in PLACEHOLDER_SECRETS or lowered.startswith(("insecure", "django-insecure")):
        return "is a placeholder"
    if "change-me" in lowered or "changeme" in lowered:
        return "is a placeholder"
    if len(key) < SECRET_KEY_MIN_LENGTH or len(set(key)) < 5:
        return f"is shorter than {SECRET_KEY_MIN_LENGTH} characters or too repetitive"
    return None


DEBUG = False
SECRET_KEY = env("D2K_SECRET_KEY", default="")
if problem := secret_key_problem(SECRET_KEY):
    raise ImproperlyConfigured(
        f"D2K_SECRET_KEY {problem}: set it to a long random value, e.g. the output of "
        "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`."
    )
if "D2K_DATABASE_URL" not in env.ENVIRON:
    raise ImproperlyConfigured("D2K_DATABASE_URL must be set in production.")
HIDDEN_SEED_MIN_LENGTH = 32
D2K_HIDDEN_SEED = env("D2K_HIDDEN_SEED", default="")
if len(D2K_HIDDEN_SEED) < HIDDEN_SEED_MIN_LENGTH or len(set(D2K_HIDDEN_SEED)) < 5:
    raise ImproperlyConfigured(
        f"D2K_HIDDEN_SEED must be set to a random value of at least {HIDDEN_SEED_MIN_LENGTH} "
        "characters, different from every other deployment's (it draws the hidden "
        "workloads), e.g. the output of `python -c 'import secrets; print(secrets.token_hex(32))'`."
    )

# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (docs/operations.md).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("D2K_SSL_REDIRECT", default=True)
SECURE_HSTS_SECONDS = env.int("D2K_HSTS_SECONDS", default=31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = env.bool("D2K_HSTS_PRELOAD", default=True)
SESSION_COOKIE_SECURE = env.bool("D2K_SECURE_COOKIES", default=True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

"""Production: every secret must come from the environment, or start-up fails."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .env import env

DEBUG = False
SECRET_KEY = env("D2K_SECRET_KEY", default="")
if not SECRET_KEY or SECRET_KEY.startswith("insecure"):
    raise ImproperlyConfigured("D2K_SECRET_KEY must be set to a real secret in production.")
if "D2K_DATABASE_URL" not in env.ENVIRON:
    raise ImproperlyConfigured("D2K_DATABASE_URL must be set in production.")

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env.bool("D2K_SECURE_COOKIES", default=True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_CONTENT_TYPE_NOSNIFF = True

"""Local development and the one-command quick start.

Debug stays off unless D2K_DEBUG=true: Django's debug pages list every URL
pattern and settings to whoever asks, so even the quick start shows the
portal's own error pages. Static files come straight from the source folders.
"""

from .base import *  # noqa: F403
from .env import env

DEBUG = env.bool("D2K_DEBUG", default=False)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

"""Local development and the one-command quick start."""

from .base import *  # noqa: F403

DEBUG = True

"""A trace's file goes when its row goes (a run deleted in the admin takes its traces)."""

from typing import Any

from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from runs.models import Trace


@receiver(post_delete, sender=Trace)
def trace_file_delete(sender: type[Trace], instance: Trace, **kwargs: Any) -> None:
    name = instance.file.name
    if name:
        # Only once the deletion is committed: a rolled-back delete keeps its file.
        transaction.on_commit(lambda: default_storage.delete(name))

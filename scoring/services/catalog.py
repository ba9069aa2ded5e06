"""Pinning a catalog version: the tasks a run made for it is scored over."""

from __future__ import annotations

from scoring.models import CatalogVersion
from scoring.selectors.catalog import catalog_digest


def catalog_version_pin() -> str:
    """Record the current catalog's tasks under its digest (once) and return the digest,
    the `catalog_version` of a run made now."""
    digest, slugs = catalog_digest()
    CatalogVersion.objects.get_or_create(digest=digest, defaults={"tasks": slugs})
    return digest

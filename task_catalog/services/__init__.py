"""Writes of the task catalog: loading packages, new versions, export."""

from .export import catalog_export, task_version_write_package
from .guidance import (
    guidance_content,
    guidance_version_record,
)
from .loading import (
    MEASURED_FIELDS,
    WORKLOAD_FIELDS,
    CatalogLoadReport,
    LoadAction,
    TaskLoadResult,
    catalog_load,
    measured_content_hash,
    task_version_update,
    task_version_validate,
)

__all__ = [
    "MEASURED_FIELDS",
    "WORKLOAD_FIELDS",
    "CatalogLoadReport",
    "LoadAction",
    "TaskLoadResult",
    "catalog_export",
    "catalog_load",
    "guidance_content",
    "guidance_version_record",
    "measured_content_hash",
    "task_version_update",
    "task_version_validate",
    "task_version_write_package",
]

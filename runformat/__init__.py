"""The run format: what an agent run bundle holds and what each trace line says.

Django-free (jsonschema and the standard library only), so that the portal's upload
and the `d2k` client apply the same rules: the client carries this package as
`d2k_client.runformat` (client/pyproject.toml builds it from this folder), the
portal imports it as `runformat`. Modules import each other relatively for that
reason.
"""

from .bundle import (
    DEFAULT_LIMITS,
    MANIFEST,
    Bundle,
    BundleError,
    BundleLimits,
    Manifest,
    bundle_validate,
    manifest_condition,
)
from .schema import SCHEMA_DIR, SCHEMAS, schema_errors, schema_load
from .trace import KNOWN_TYPES, MALFORMED, TraceEvent, event_decode, line_type

__all__ = [
    "DEFAULT_LIMITS",
    "KNOWN_TYPES",
    "MALFORMED",
    "MANIFEST",
    "SCHEMAS",
    "SCHEMA_DIR",
    "Bundle",
    "BundleError",
    "BundleLimits",
    "Manifest",
    "TraceEvent",
    "bundle_validate",
    "event_decode",
    "line_type",
    "manifest_condition",
    "schema_errors",
    "schema_load",
]

"""The run bundle's rules, as the server applies them.

The rules themselves (zip bytes in, a manifest and its files or every problem out)
live in the client package, `d2k_client.bundle_rules`, so that `d2k pack-run` refuses
exactly what the upload refuses: one source, Django-free, imported here.
"""

from d2k_client.bundle_rules import (
    DEFAULT_LIMITS,
    MANIFEST,
    SCHEMA_DIR,
    Bundle,
    BundleError,
    BundleLimits,
    Manifest,
    bundle_validate,
    manifest_condition,
    schema_errors,
    schema_load,
)

__all__ = [
    "DEFAULT_LIMITS",
    "MANIFEST",
    "SCHEMA_DIR",
    "Bundle",
    "BundleError",
    "BundleLimits",
    "Manifest",
    "bundle_validate",
    "manifest_condition",
    "schema_errors",
    "schema_load",
]

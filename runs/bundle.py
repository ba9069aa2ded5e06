"""The run bundle's rules, as the server applies them.

The rules themselves (zip bytes in, a manifest and its files or every problem out)
live in the client package, `d2k_client.bundle_rules`, so that `d2k pack-run` refuses
exactly what the upload refuses: one source, Django-free, imported here.
"""

from d2k_client.bundle_rules import (
    DEFAULT_LIMITS,
    MANIFEST,
    MAX_JSON_DEPTH,
    SCHEMA_DIR,
    Bundle,
    BundleError,
    BundleLimits,
    JsonRefused,
    Manifest,
    bundle_validate,
    json_loads_checked,
    manifest_condition,
    schema_errors,
    schema_load,
    unsafe_chars_replace,
)

__all__ = [
    "DEFAULT_LIMITS",
    "MANIFEST",
    "MAX_JSON_DEPTH",
    "SCHEMA_DIR",
    "Bundle",
    "BundleError",
    "BundleLimits",
    "JsonRefused",
    "Manifest",
    "bundle_validate",
    "json_loads_checked",
    "manifest_condition",
    "schema_errors",
    "schema_load",
    "unsafe_chars_replace",
]

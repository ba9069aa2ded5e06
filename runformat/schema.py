"""The published JSON schemas of a run: `manifest-v1` (a bundle's manifest.json) and
`trace-v1` (one line of a trace), served at /schemas/runs/<name>.json."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
SCHEMAS = ("manifest-v1", "trace-v1")


@cache
def schema_load(name: str) -> dict[str, Any]:
    """One of the published schemas (`manifest-v1`, `trace-v1`) as a dict."""
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / f"{name}.json").read_text())
    return loaded


@cache
def _validator(name: str) -> Draft202012Validator:
    schema = schema_load(name)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def schema_errors(*, name: str, instance: Any) -> list[str]:
    """Readable messages for every way `instance` breaks the schema `name`, in path order."""
    errors = sorted(_validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path))
    messages = []
    for error in errors:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        messages.append(f"{where.lstrip('.') or 'the document'}: {error.message}")
    return messages

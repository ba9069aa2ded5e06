"""`d2k pack-run`: a run folder zipped and checked with the portal's own rules."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from .config import ClientError
from .runformat import DEFAULT_LIMITS, Bundle, BundleLimits, bundle_validate


def bundle_pack(directory: Path) -> bytes:
    """Every file under `directory`, at its path relative to it, in a deflated zip."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ClientError(f"{directory} is not a folder")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(directory.rglob("*")):
            if path.is_symlink():
                raise ClientError(f"{path} is a symbolic link; a bundle holds plain files only")
            if path.is_file():
                zf.write(path, path.relative_to(directory).as_posix())
    return buffer.getvalue()


def bundle_check(
    data: bytes, *, task_slugs: frozenset[str], limits: BundleLimits = DEFAULT_LIMITS
) -> Bundle:
    """The validation the portal's upload runs, with its default limits."""
    return bundle_validate(data=data, task_slugs=task_slugs, limits=limits)

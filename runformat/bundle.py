"""Validation of a run bundle: zip bytes in, a manifest and its files or every problem out.

The one copy of these rules: the portal's upload (`runs.services`) and `d2k pack-run`
both call `bundle_validate`. Pure (no database, no Django, jsonschema and the standard
library only): the caller passes the known task slugs and the limits. Nothing is
extracted to disk; every entry is read into memory with a cap, so a header that lies
about its size cannot make us read more than the limit.
"""

from __future__ import annotations

import io
import json
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Any

from .jsonsafe import JsonRefused, json_loads_checked
from .schema import schema_errors

MANIFEST = "manifest.json"
# Entries this large or larger are checked against the compression ratio limit; small
# files (a kernel of blank lines) may compress far better than any real payload.
RATIO_CHECK_FROM_BYTES = 1024 * 1024
_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_LAYOUT = {"kernels": ".py", "traces": ".jsonl", "proposals": ".md"}


@dataclass(frozen=True)
class BundleLimits:
    max_bytes: int
    max_files: int
    max_uncompressed_bytes: int
    max_ratio: int
    max_kernel_bytes: int
    max_trace_bytes: int
    max_proposal_bytes: int = 256 * 1024


# The portal's defaults (D2K_RUN_BUNDLE_* and D2K_MAX_UPLOAD_BYTES in docs/settings.md).
DEFAULT_LIMITS = BundleLimits(
    max_bytes=64 * 1024 * 1024,
    max_files=400,
    max_uncompressed_bytes=512 * 1024 * 1024,
    max_ratio=100,
    max_kernel_bytes=512 * 1024,
    max_trace_bytes=128 * 1024 * 1024,
)


@dataclass(frozen=True)
class BundleError:
    """One problem, as the API reports it: `{"file", "line", "message"}`."""

    file: str | None
    line: int | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class Manifest:
    model: str
    agent: str
    levels: tuple[str, ...]
    turn_budget: int
    hardware: str
    notes: str
    example: bool
    # Task slug -> sha256 of the task prompt the agent was given (optional).
    prompt_sha256: dict[str, str] = field(default_factory=dict)
    # Task slug -> sha256 of the guidance version the agent was given (optional).
    guidance_sha256: dict[str, str] = field(default_factory=dict)

    @property
    def condition(self) -> str:
        return manifest_condition(levels=self.levels)


@dataclass(frozen=True)
class Bundle:
    """A bundle that passed validation (errors empty) or the problems found (errors set)."""

    manifest: Manifest | None = None
    kernels: dict[str, str] = field(default_factory=dict)
    traces: dict[str, bytes] = field(default_factory=dict)
    proposals: dict[str, str] = field(default_factory=dict)
    errors: tuple[BundleError, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors


def manifest_condition(*, levels: tuple[str, ...] | list[str]) -> str:
    """`none` for the run without guidance, else the levels in order joined by `+`."""
    return "+".join(sorted(levels)) if levels else "none"


def _entry_name_errors(info: zipfile.ZipInfo) -> str | None:
    name = info.filename
    mode = info.external_attr >> 16
    if info.create_system == 3 and stat.S_ISLNK(mode):
        return "Symbolic links are not allowed in a bundle."
    if "\\" in name:
        return "Use forward slashes in paths; backslashes are not allowed."
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "Absolute paths are not allowed; paths are relative to the bundle root."
    if ".." in name.split("/"):
        return "Paths may not contain `..`."
    if "\x00" in name or any(ord(c) < 32 for c in name):
        return "File names may not contain control characters."
    if info.flag_bits & 0x1:
        return "Encrypted entries are not allowed."
    return None


def _strip_root(names: list[str]) -> str:
    """The single folder every entry sits in (zipping a folder makes one), or ''."""
    if MANIFEST in names:
        return ""
    roots = {n.split("/", 1)[0] for n in names}
    if len(roots) == 1 and all("/" in n for n in names):
        return f"{roots.pop()}/"
    return ""


def _read_capped(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int
) -> tuple[bytes | None, str | None]:
    try:
        with zf.open(info) as handle:
            raw = handle.read(limit + 1)
    except (zipfile.BadZipFile, zlib.error, OSError, NotImplementedError, RuntimeError) as exc:
        return None, f"The entry cannot be read ({exc})."
    if len(raw) > limit:
        return None, f"The file is over the limit of {limit:,} bytes."
    return raw, None


def _text(raw: bytes) -> tuple[str | None, str | None, int | None]:
    """(text, error, line) for UTF-8 text; the error names the first bad byte's line."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff"), None, None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return None, f"The file is not UTF-8 text (invalid byte at offset {exc.start}).", line


def _manifest_parse(text: str) -> tuple[Manifest | None, list[BundleError]]:
    try:
        data = json_loads_checked(text)
    except json.JSONDecodeError as exc:
        return None, [BundleError(MANIFEST, exc.lineno, f"Invalid JSON: {exc.msg}.")]
    except JsonRefused as exc:
        return None, [BundleError(MANIFEST, exc.line, exc.message)]
    problems = schema_errors(name="manifest-v1", instance=data)
    if problems:
        return None, [BundleError(MANIFEST, None, p) for p in problems]
    manifest = Manifest(
        model=data["model"].strip(),
        agent=data["agent"].strip(),
        levels=tuple(sorted(data["levels"])),
        turn_budget=data.get("turn_budget", 350),
        hardware=data["hardware"].strip(),
        notes=data.get("notes", ""),
        example=data.get("example", False),
        prompt_sha256=dict(data.get("prompt_sha256", {})),
        guidance_sha256=dict(data.get("guidance_sha256", {})),
    )
    blank = [k for k in ("model", "agent", "hardware") if not getattr(manifest, k)]
    return manifest, [BundleError(MANIFEST, None, f"{k}: must not be blank.") for k in blank]


def _kernel_errors(text: str) -> str | None:
    if "\x00" in text:
        return "The file looks binary; a kernel is a Python source file."
    if not text.strip():
        return "The kernel file is empty."
    return None


def bundle_validate(*, data: bytes, task_slugs: frozenset[str], limits: BundleLimits) -> Bundle:
    """Check a run bundle and read its files, or report every problem found.

    Structural problems that make reading unsafe (not a zip, oversize, too many files,
    total size or bomb ratio) are reported before any entry is decompressed.
    """
    if len(data) > limits.max_bytes:
        return Bundle(
            errors=(
                BundleError(
                    None,
                    None,
                    f"The bundle is {len(data):,} bytes; the limit is {limits.max_bytes:,} bytes.",
                ),
            )
        )
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zlib.error, OSError, ValueError):
        return Bundle(errors=(BundleError(None, None, "The upload is not a zip archive."),))
    with zf:
        return _bundle_read(zf, task_slugs=task_slugs, limits=limits)


def _bundle_read(
    zf: zipfile.ZipFile, *, task_slugs: frozenset[str], limits: BundleLimits
) -> Bundle:
    errors: list[BundleError] = []
    infos = [i for i in zf.infolist() if not i.is_dir()]
    if len(infos) > limits.max_files:
        message = f"The bundle holds {len(infos):,} files; the limit is {limits.max_files:,}."
        return Bundle(errors=(BundleError(None, None, message),))
    total = sum(i.file_size for i in infos)
    if total > limits.max_uncompressed_bytes:
        message = (
            f"The bundle unpacks to {total:,} bytes; the limit is "
            f"{limits.max_uncompressed_bytes:,} bytes."
        )
        return Bundle(errors=(BundleError(None, None, message),))

    seen: dict[str, str] = {}
    safe: list[zipfile.ZipInfo] = []
    for info in infos:
        problem = _entry_name_errors(info)
        folded = info.filename.casefold()
        if problem is None and folded in seen:
            problem = (
                "The name appears twice in the bundle."
                if seen[folded] == info.filename
                else f"The name differs from {seen[folded]!r} only by case."
            )
        if problem is None and info.file_size >= RATIO_CHECK_FROM_BYTES:
            ratio = info.file_size / max(info.compress_size, 1)
            if ratio > limits.max_ratio:
                problem = (
                    f"The entry expands {ratio:,.0f}-fold ({info.compress_size:,} to "
                    f"{info.file_size:,} bytes); the limit is {limits.max_ratio}-fold."
                )
        if problem:
            errors.append(BundleError(info.filename, None, problem))
            continue
        seen[folded] = info.filename
        parts = info.filename.split("/")
        if parts[0] == "__MACOSX" or parts[-1] == ".DS_Store":
            continue  # what macOS's Finder adds to every zip it makes
        safe.append(info)
    if errors:
        # A hostile name or a bomb: read nothing else from this archive.
        return Bundle(errors=tuple(errors))

    root = _strip_root([i.filename for i in safe])
    manifest: Manifest | None = None
    kernels: dict[str, str] = {}
    traces: dict[str, bytes] = {}
    proposals: dict[str, str] = {}
    caps = {
        "kernels": limits.max_kernel_bytes,
        "traces": limits.max_trace_bytes,
        "proposals": limits.max_proposal_bytes,
    }
    for info in safe:
        path = info.filename.removeprefix(root)
        if path == MANIFEST:
            raw, problem = _read_capped(zf, info, 64 * 1024)
            text, problem, line = (None, problem, None) if raw is None else _text(raw)
            if text is None:
                errors.append(BundleError(info.filename, line, problem or "Unreadable."))
                continue
            manifest, manifest_errors = _manifest_parse(text)
            errors.extend(manifest_errors)
            continue
        folder, _, base = path.partition("/")
        suffix = _LAYOUT.get(folder)
        if suffix is None or "/" in base or not base.endswith(suffix):
            errors.append(
                BundleError(
                    info.filename,
                    None,
                    "Unexpected file: a bundle holds manifest.json, kernels/<task>.py, "
                    "traces/<task>.jsonl and proposals/<task>.md only.",
                )
            )
            continue
        slug = base.removesuffix(suffix)
        if not _SLUG.match(slug) or slug not in task_slugs:
            errors.append(BundleError(info.filename, None, f"Unknown task {slug!r}."))
            continue
        raw, problem = _read_capped(zf, info, caps[folder])
        if raw is None:
            errors.append(BundleError(info.filename, None, problem or "Unreadable."))
            continue
        if folder == "traces":
            # Traces are decoded line by line later: a bad line is a trace problem, not
            # a reason to refuse the bundle. The whole file must still be UTF-8.
            text, problem, line = _text(raw)
            if text is None:
                errors.append(BundleError(info.filename, line, problem or "Not UTF-8."))
            else:
                traces[slug] = raw
            continue
        text, problem, line = _text(raw)
        if text is None:
            errors.append(BundleError(info.filename, line, problem or "Not UTF-8."))
            continue
        if folder == "kernels":
            problem = _kernel_errors(text)
            if problem:
                errors.append(BundleError(info.filename, None, problem))
            else:
                kernels[slug] = text
        elif "\x00" in text:
            line = text.count("\n", 0, text.index("\x00")) + 1
            message = "The file holds a NUL character; a proposal is markdown text."
            errors.append(BundleError(info.filename, line, message))
        elif not text.strip():
            message = "The proposal file is empty; leave it out of the bundle instead."
            errors.append(BundleError(info.filename, None, message))
        else:
            proposals[slug] = text

    if manifest is None and not any(e.file and e.file.endswith(MANIFEST) for e in errors):
        errors.append(BundleError(MANIFEST, None, "The bundle has no manifest.json at its root."))
    if not kernels and not any(e.file and "kernels/" in e.file for e in errors):
        errors.append(BundleError(None, None, "The bundle has no kernels/<task>.py files."))
    if errors:
        return Bundle(errors=tuple(errors))
    return Bundle(manifest=manifest, kernels=kernels, traces=traces, proposals=proposals)

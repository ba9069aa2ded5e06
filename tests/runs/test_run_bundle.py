"""bundle_validate is pure: zip bytes in, a manifest and files or every problem out."""

import io
import struct
import zipfile

import pytest

from runformat import BundleError, BundleLimits, bundle_validate, manifest_condition
from tests.runs.bundles import KERNEL, good_files, make_zip, manifest

SLUGS = frozenset({"row_softmax", "layernorm_fwd"})
LIMITS = BundleLimits(
    max_bytes=1 << 20,
    max_files=20,
    max_uncompressed_bytes=8 << 20,
    max_ratio=100,
    max_kernel_bytes=64 * 1024,
    max_trace_bytes=4 << 20,
)


def validate(data, **limits):
    chosen = BundleLimits(**{**LIMITS.__dict__, **limits})
    return bundle_validate(data=data, task_slugs=SLUGS, limits=chosen)


def test_a_good_bundle_yields_its_manifest_kernels_traces_and_proposals():
    bundle = validate(make_zip(good_files("row_softmax", "layernorm_fwd", levels=["L2", "L1"])))
    assert bundle.ok, bundle.errors
    assert bundle.manifest.model == "model-x"
    assert bundle.manifest.levels == ("L1", "L2")
    assert bundle.manifest.condition == "L1+L2"
    assert bundle.manifest.turn_budget == 350
    assert set(bundle.kernels) == set(bundle.traces) == set(bundle.proposals) == SLUGS
    assert bundle.kernels["row_softmax"].startswith("import torch")


def test_a_bundle_zipped_as_one_folder_is_read_from_inside_it():
    files = {f"my-run/{k}": v for k, v in good_files().items()}
    bundle = validate(make_zip(files))
    assert bundle.ok, bundle.errors
    assert set(bundle.kernels) == {"row_softmax"}


def test_what_macos_finder_adds_to_a_zip_is_ignored():
    files = {f"my-run/{k}": v for k, v in good_files().items()}
    files["__MACOSX/my-run/._manifest.json"] = b"\x00\x05\x16\x07"
    files["my-run/.DS_Store"] = b"\x00\x00"
    bundle = validate(make_zip(files))
    assert bundle.ok, bundle.errors


def test_a_missing_kernel_is_allowed_and_the_turn_budget_defaults_to_350():
    files = good_files("row_softmax")
    files["manifest.json"] = manifest(turn_budget=None)
    files["traces/layernorm_fwd.jsonl"] = '{"type": "start", "ts": 0}\n'
    bundle = validate(make_zip(files))
    assert bundle.ok, bundle.errors
    assert set(bundle.kernels) == {"row_softmax"}
    assert set(bundle.traces) == SLUGS
    assert bundle.manifest.turn_budget == 350


@pytest.mark.parametrize(("levels", "condition"), [((), "none"), (("L3", "L1"), "L1+L3")])
def test_the_condition_is_derived_from_the_levels(levels, condition):
    assert manifest_condition(levels=levels) == condition


def test_every_problem_is_reported_at_once():
    files = good_files()
    files["manifest.json"] = manifest(levels=["L4"], model=None)
    files["kernels/layernorm_fwd.py"] = b"\xffnot utf-8"
    files["kernels/softmax_v2.py"] = KERNEL
    bundle = validate(make_zip(files))
    assert not bundle.ok
    assert set(bundle.errors) == {
        BundleError("manifest.json", None, "the document: 'model' is a required property"),
        BundleError("manifest.json", None, "levels[0]: 'L4' is not one of ['L1', 'L2', 'L3']"),
        BundleError(
            "kernels/layernorm_fwd.py", 1, "The file is not UTF-8 text (invalid byte at offset 0)."
        ),
        BundleError("kernels/softmax_v2.py", None, "Unknown task 'softmax_v2'."),
    }
    assert bundle.kernels == {} and bundle.manifest is None


def _understate_size(data: bytes, name: str, size: int) -> bytes:
    """Rewrite the uncompressed size of `name` in its local and central headers."""
    out = bytearray(data)
    for signature, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        pos = out.find(signature)
        while pos != -1:
            name_at = pos + (30 if signature == b"PK\x03\x04" else 46)
            if out[name_at : name_at + len(name)] == name.encode():
                out[pos + at : pos + at + 4] = struct.pack("<I", size)
            pos = out.find(signature, pos + 4)
    return bytes(out)


def test_a_header_that_understates_a_size_is_caught_when_the_entry_is_read():
    data = make_zip({**good_files(), "kernels/layernorm_fwd.py": "x" * 5000})
    forged = _understate_size(data, "kernels/layernorm_fwd.py", 10)
    with zipfile.ZipFile(io.BytesIO(forged)) as zf:
        assert zf.getinfo("kernels/layernorm_fwd.py").file_size == 10
    bundle = validate(forged)
    assert bundle.errors == (
        BundleError(
            "kernels/layernorm_fwd.py",
            None,
            "The entry cannot be read (Bad CRC-32 for file 'kernels/layernorm_fwd.py').",
        ),
    )


def test_trace_lines_are_not_parsed_here_so_a_bad_line_does_not_refuse_the_bundle():
    files = good_files()
    files["traces/row_softmax.jsonl"] = "not json\n"
    assert validate(make_zip(files)).ok

"""The exclusive launch cover, on a machine without a GPU: its PTX, its shape, its fallback.

Whether it really keeps other streams off the GPU is tested on the GPU, by
tests/evaluator/test_cover_on_gpu.py.
"""

import ctypes
import re
import subprocess
from pathlib import Path

import pytest
import torch

from evaluator.harness import cover

try:
    import triton

    PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
except ImportError:  # the evaluator extra is not installed
    PTXAS = Path("/nonexistent/ptxas")


@pytest.mark.skipif(not PTXAS.is_file(), reason="needs Triton's ptxas")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_cover_assembles_small_enough_for_four_blocks_an_sm(tmp_path, arch):
    source = tmp_path / "cover.ptx"
    source.write_text(cover.PTX)
    done = subprocess.run(
        [str(PTXAS), f"-arch={arch}", "-v", str(source), "-o", str(tmp_path / "cover.cubin")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    registers = int(re.search(r"Used (\d+) registers", done.stderr).group(1))
    # 4 blocks x 512 threads fill an SM's 2048 thread slots only if the
    # register file (65 536) holds them all: 32 registers a thread at most.
    assert registers * 4 * cover.BLOCK_THREADS <= 65536
    assert "spill" not in done.stderr or "0 bytes spill" in done.stderr


CUOBJDUMP = PTXAS.with_name("cuobjdump")


def _sass(tmp_path: Path, ptx: str) -> str:
    """The SASS that ptxas makes of `ptx` for sm_90, as cuobjdump prints it."""
    source, cubin = tmp_path / "cover.ptx", tmp_path / "cover.cubin"
    source.write_text(ptx)
    subprocess.run([str(PTXAS), "-arch=sm_90", str(source), "-o", str(cubin)], check=True)
    return subprocess.run(
        [str(CUOBJDUMP), "-sass", str(cubin)], capture_output=True, text=True, check=True
    ).stdout


def _flush_accesses(tmp_path: Path, ptx: str) -> list[str]:
    """The 128-bit global loads and stores of the cover's SASS for sm_90."""
    return re.findall(r"\b(LDG|STG)\.E\.128\b", _sass(tmp_path, ptx))


@pytest.mark.skipif(not CUOBJDUMP.is_file(), reason="needs Triton's ptxas and cuobjdump")
def test_the_flush_writes_its_buffer_with_128_bit_stores(tmp_path):
    assert _flush_accesses(tmp_path, cover.PTX) == ["STG"]


def test_the_cover_is_exclusive_only_when_its_blocks_fill_every_thread_slot():
    shape = dict(
        driver=None,
        function=None,
        grid=528,
        threads_per_sm=2048,
        sm_count=132,
        counter=torch.zeros(1, dtype=torch.int64),
    )
    assert cover.Cover(blocks_per_sm=4, **shape).exclusive
    partial = cover.Cover(blocks_per_sm=3, **shape)
    assert not partial.exclusive
    assert partial.describe()["kind"] == "partial"


def test_without_a_driver_there_is_no_cover_and_a_reason(monkeypatch):
    def missing(name, *args, **kwargs):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    loaded, why = cover.Cover.load(torch.device("cuda"))
    assert loaded is None
    assert "libcuda.so.1" in why


def test_a_driver_error_is_reported_not_raised(monkeypatch):
    class Driver:
        def __getattr__(self, name):
            def function(*args):
                return 218  # CUDA_ERROR_INVALID_PTX

            return function

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Driver())
    loaded, why = cover.Cover.load(torch.device("cuda"))
    assert loaded is None
    assert why == "CoverError: cuModuleLoadData failed with CUDA driver error 218"


def test_a_source_naming_the_cover_is_flagged_for_review():
    from evaluator.harness import honesty

    source = "import gc\nflusher = [o for o in gc.get_objects() if type(o).__name__ == 'L2Flusher']"
    assert honesty.tampering_names(source) == ["L2Flusher"]
    assert honesty.tampering_names("launch('d2k_cover')") == ["d2k_cover"]
    expert = (Path(__file__).resolve().parents[2] / "catalog/row_softmax/expert.py").read_text()
    assert honesty.tampering_names(expert) == []


def test_a_launch_passes_each_parameter_as_64_bits_in_order():
    seen = {}

    class Driver:
        def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
            seen["values"] = [
                ctypes.cast(pointers[i], ctypes.POINTER(ctypes.c_uint64)).contents.value
                for i in range(5)
            ]
            seen["shape"] = (gx, gy, gz, bx, by, bz, smem, stream.value)
            return 0

    launcher = cover.Cover(
        driver=Driver(),
        function=None,
        grid=528,
        blocks_per_sm=4,
        threads_per_sm=2048,
        sm_count=132,
        counter=torch.zeros(1, dtype=torch.int64),
    )
    buffer = torch.zeros(64, dtype=torch.uint8)
    launcher.launch(buffer, 200.0, 7)
    launcher.launch(buffer, 200.0, 7)
    assert seen["values"] == [
        buffer.data_ptr(),
        4,  # 16-byte chunks
        200_000,  # nanoseconds
        launcher.counter.data_ptr(),
        2 * 528,  # every block of both launches
    ]
    assert seen["shape"] == (528, 1, 1, cover.BLOCK_THREADS, 1, 1, 0, 7)

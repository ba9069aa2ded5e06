"""Compiled-code evidence: Triton's sm_90 backend runs on this CPU-only host, and the
`compiled` detector reads the PTX of the kernels that ran.

A `tl.dot` padded into a branch every launch turns off leaves no tensor-core
instruction in the PTX; the same kernel with the branch on holds wgmma. The
compile runs in a process of its own (tests/taskformat/compile_ptx.py: real
JIT functions, not the interpreter), about half a minute on a busy host.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from taskformat.detectors import assess
from taskformat.detectors.compiled import SIGNATURES, instructions

ROOT = Path(__file__).resolve().parents[2]

KERNEL = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, BLOCK: tl.constexpr, PAD: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    acc = tl.zeros((64, 64), tl.float32)
    if PAD:
        a = tl.reshape(x.to(tl.bfloat16), (64, 64))
        acc = tl.dot(a, a, acc)
    y = tl.exp2(x * 1.4426950408889634) + tl.sum(tl.reshape(acc, (4096,)), 0)
    tl.store(y_ptr + offs, y)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _k[(x.numel() // 4096,)](x, y, BLOCK=4096, PAD=False)
        return y
"""
SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "BLOCK": "constexpr", "PAD": "constexpr"}
TENSOR_CORES = {
    "kind": "compiled",
    "ptx": "tensor_cores",
    "source": {"kind": "device_call", "names": ["tl.dot"]},
}


def ptx_of(path: Path, pad: bool) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.taskformat.compile_ptx",
            str(path),
            "_k",
            json.dumps(SIGNATURE),
            json.dumps({"BLOCK": 4096, "PAD": pad}),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])["ptx"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    path = tmp_path_factory.mktemp("ptx") / "kernel.py"
    path.write_text(KERNEL)
    return {pad: ptx_of(path, pad) for pad in (False, True)}


@pytest.mark.slow
def test_the_ptx_shows_what_the_launch_compiled_not_what_the_source_holds(compiled):
    off, on = compiled[False], compiled[True]
    opcodes = {o for o, _ in instructions(off)}
    assert not any(o.startswith(tuple(SIGNATURES["tensor_cores"])) for o in opcodes)
    assert any(o.startswith("ex2.approx") for o in opcodes)
    assert any(o.startswith(tuple(SIGNATURES["vector_loads_16b"])) for o in opcodes)
    assert any(o.startswith("wgmma.mma_async") for o, _ in instructions(on))

    padded = assess(TENSOR_CORES, KERNEL, launched=["_k"], compiled={"_k": off})
    assert padded is not None and (padded.value, padded.kind) == (False, "compiled_code")
    real = assess(TENSOR_CORES, KERNEL, launched=["_k"], compiled={"_k": on})
    assert real is not None and (real.value, real.kind) == (True, "compiled_code")
    assert "wgmma.mma_async" in real.evidence[0]
    # A kernel that did not run lends its PTX nothing.
    other = assess(TENSOR_CORES, KERNEL, launched=["_other"], compiled={"_k": on})
    assert other is not None and other.value is False


def test_without_compiled_code_the_source_detector_decides():
    # The dot sits in a branch the launch turns off: the source evidence sees it too.
    found = assess(TENSOR_CORES, KERNEL)
    assert found is not None and (found.value, found.kind) == (False, "source")
    on = assess(TENSOR_CORES, KERNEL.replace("PAD=False", "PAD=True"))
    assert on is not None and (on.value, on.kind) == (True, "source")


def test_instructions_skip_directives_comments_and_labels():
    ptx = (
        "// wgmma in a comment\n.reg .b32 %r<4>;\n$L__BB0_1:\n"
        "\t@%p1 ld.global.v4.b32 {%r1}, [%rd1];\n"
    )
    assert instructions(ptx) == [("ld.global.v4.b32", "@%p1 ld.global.v4.b32 {%r1}, [%rd1];")]


def test_executed_instruction_counts_outrank_the_ptx_and_need_an_executed_opcode():
    # The reading rule for Nsight Compute's per-opcode counts (not produced yet: needs
    # the GPU): an HGMMA present in the PTX but never executed is no evidence.
    on_ptx = {"_k": "\twgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%f1}, %rd1;\n"}
    never = assess(
        TENSOR_CORES, KERNEL, launched=["_k"], compiled=on_ptx, executed={"_k": {"HGMMA": 0}}
    )
    assert never is not None and (never.value, never.kind) == (False, "executed_instruction")
    ran = assess(
        TENSOR_CORES,
        KERNEL,
        launched=["_k"],
        compiled=on_ptx,
        executed={"_k": {"HGMMA.64x64x16.F32.BF16": 512, "FFMA": 9}},
    )
    assert ran is not None and (ran.value, ran.kind) == (True, "executed_instruction")
    assert ran.evidence == ("_k: HGMMA.64x64x16.F32.BF16 executed 512 times",)
    other = assess(TENSOR_CORES, KERNEL, launched=["_k"], executed={"_x": {"HGMMA": 5}})
    assert other is not None and other.value is False

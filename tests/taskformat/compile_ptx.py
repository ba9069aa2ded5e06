"""The PTX Triton's sm_90 backend emits for one jit function of a file, with no GPU.

    python -m tests.taskformat.compile_ptx FILE KERNEL SIGNATURE_JSON CONSTEXPRS_JSON

Prints one JSON object: {"ptx": text}. Pointer arguments are marked 16-byte
aligned, as Triton's launcher specialises them for aligned tensors.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)  # before triton is imported: real JIT functions

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from evaluator.harness.workload import load_module

H200 = GPUTarget("cuda", 90, 32)


def compile_ptx(path: str, kernel: str, signature: dict, constexprs: dict) -> str:
    fn = getattr(load_module(path, "compile_ptx_subject"), kernel)
    names = list(signature)
    aligned = {
        (names.index(n),): [["tt.divisibility", 16]] for n, t in signature.items() if t[0] == "*"
    }
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=aligned)
    return triton.compile(source, target=H200).asm["ptx"]


if __name__ == "__main__":
    file, name, signature, constexprs = sys.argv[1:5]
    print(
        json.dumps({"ptx": compile_ptx(file, name, json.loads(signature), json.loads(constexprs))})
    )

"""Compiled-code evidence: instructions in the PTX of the kernels that ran.

    {"kind": "compiled", "ptx": ["wgmma.mma_async", "mma.sync"], "source": {...}}

With the PTX of the launched kernels (kernel name -> text), the property is
implemented when one of them holds an instruction that starts with one of the
`ptx` prefixes (comments and directives apart); the excerpt is the
instruction. Without compiled code (interpret mode) the `source` detector
decides alone. PTX shows what the compiler emitted for the launch's constexpr
values, so an idiom in a branch those values rule out leaves nothing here;
a runtime branch no workload takes still does, which only executed-instruction
counts (Nsight Compute, on the GPU) tell apart.

Signatures the catalog reads (`SIGNATURES`): tensor cores, TMA, 16-byte
global loads, the ex2 unit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from taskformat.detectors.program import Program
from taskformat.detectors.result import DetectorError, DetectorResult

SIGNATURES = {
    "tensor_cores": ["wgmma.mma_async", "mma.sync", "mma.sp"],
    "tma": ["cp.async.bulk.tensor"],
    "vector_loads_16b": [
        "ld.global.v4.b32",
        "ld.global.v4.f32",
        "ld.global.v2.b64",
        "ld.global.b128",
    ],
    "exp2_unit": ["ex2.approx"],
}

_INSTRUCTION = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)", re.MULTILINE)


def instructions(ptx: str) -> list[tuple[str, str]]:
    """(opcode with its modifiers, the line) for every instruction of a PTX text."""
    out = []
    for line in ptx.splitlines():
        text = line.split("//", 1)[0].strip()
        if not text or text.startswith((".", "}", "{", "$")):
            continue
        match = _INSTRUCTION.match(text)
        if match:
            out.append((match.group(1), text))
    return out


def compiled_assess(
    spec: Mapping[str, Any], program: Program, compiled: Mapping[str, str]
) -> DetectorResult:
    prefixes = spec.get("ptx")
    if isinstance(prefixes, str) and prefixes in SIGNATURES:
        prefixes = SIGNATURES[prefixes]
    if not isinstance(prefixes, list) or not prefixes:
        raise DetectorError("a compiled detector needs `ptx`: a list of instruction prefixes")
    kernels = {name: ptx for name, ptx in compiled.items() if _ran(name, program)}
    hits = [
        f"{name}: {line}"
        for name, ptx in sorted(kernels.items())
        for opcode, line in instructions(ptx)
        if any(opcode.startswith(p) for p in prefixes)
    ]
    what = "/".join(prefixes)
    if hits:
        text = f"{len(hits)} {what} instruction(s) in the PTX of {', '.join(sorted(kernels))}"
        return DetectorResult(True, text, tuple(hits[:3]), kind="compiled_code")
    names = ", ".join(sorted(kernels)) or "no launched kernel"
    return DetectorResult(
        False, f"no {what} instruction in the PTX of {names}", kind="compiled_code"
    )


def _ran(name: str, program: Program) -> bool:
    return program.launched is None or name in program.launched

"""Compiled-code evidence: instructions in the PTX of the kernels that ran, and the
SASS instructions they executed.

    {"kind": "compiled", "ptx": ["wgmma.mma_async", "mma.sync"], "source": {...}}
    {"kind": "compiled", "ptx": "tensor_cores", "source": {...}}   a named signature

Given per-opcode executed-instruction counts of the launched kernels (Nsight
Compute's `sass__inst_executed_per_opcode` over the profiled call), the
property holds when one of the signature's SASS opcodes (`sass`, or the named
signature's) executed at least once: evidence kind `executed_instruction`,
strongest of the three. Nothing in the evaluator reads those counts yet (it
needs Nsight Compute on the GPU); `executed_assess` is the reading rule.

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
# The SASS opcodes (as Nsight Compute names them per opcode) of each signature.
SASS_SIGNATURES = {
    "tensor_cores": ["HGMMA", "HMMA", "QGMMA", "IMMA"],
    "tma": ["UTMALDG"],
    "vector_loads_16b": ["LDG.E.128", "LDG.E.ENL2.256"],
    "exp2_unit": ["MUFU.EX2"],
    "shared_atomics": ["ATOMS"],
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


def sass_opcodes(spec: Mapping[str, Any]) -> list[str]:
    """The SASS opcodes a compiled detector reads from executed-instruction counts."""
    sass = spec.get("sass")
    if sass is None and isinstance(spec.get("ptx"), str):
        sass = SASS_SIGNATURES.get(spec["ptx"], [])
    if not isinstance(sass, list):
        raise DetectorError("a compiled detector's `sass` is a list of SASS opcodes")
    return [str(op) for op in sass]


def executed_assess(
    spec: Mapping[str, Any], program: Program, executed: Mapping[str, Mapping[str, int]]
) -> DetectorResult | None:
    """From the executed-instruction counts per launched kernel (opcode -> count): True
    when one of the signature's SASS opcodes executed; None when the signature names
    none (the PTX or the source decides)."""
    opcodes = sass_opcodes(spec)
    if not opcodes:
        return None
    kernels = {name: counts for name, counts in executed.items() if _ran(name, program)}
    hits = [
        f"{name}: {op} executed {count:,} times"
        for name, counts in sorted(kernels.items())
        for op, count in sorted(counts.items())
        if count > 0 and any(op == want or op.startswith(want + ".") for want in opcodes)
    ]
    what = "/".join(opcodes)
    if hits:
        return DetectorResult(
            True,
            f"{what} executed in the profiled call",
            tuple(hits[:3]),
            kind="executed_instruction",
        )
    return DetectorResult(
        False,
        f"no {what} instruction executed in the profiled call",
        kind="executed_instruction",
    )

"""Launch configuration: options, tile sizes, launch and kernel counts."""

from __future__ import annotations

import ast
import re
from typing import Any

from taskformat.detectors.primitives.common import TILE_SHAPES, _result, values
from taskformat.detectors.program import Program
from taskformat.detectors.result import DetectorResult


def _option_values(program: Program, option: str) -> list[tuple[set[Any] | None, str]]:
    found = []
    for site in program.launches:
        for k in site.node.keywords:
            if k.arg == option:
                found.append((values(program, k.value, site.func), ast.unparse(k)))
    for kernel in program.device:
        configs = [
            v for c in kernel.configs for k in c.keywords if k.arg == option for v in [k.value]
        ]
        consts = {program.const(v) for v in configs}
        if configs:
            found.append(
                (
                    None if len(consts) > 1 or None in consts else consts,
                    f"autotune {option} {sorted(map(str, consts))}",
                )
            )
    return found


def launch_option(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """A launch option (num_warps, num_stages, ...) chosen at run time (`runtime`), or
    at least `min` (either a constant or every value a host helper can return)."""
    option = spec.get("option", "num_warps")
    found = _option_values(program, option)
    hits = []
    for got, text in found:
        runtime = got is None or len(got) > 1
        if (spec.get("runtime") and runtime) or (
            "min" in spec and got is not None and max(got) >= spec["min"]
        ):
            hits.append(text)
    want = "chosen at run time" if spec.get("runtime") else f">= {spec.get('min')}"
    return _result(
        bool(hits), f"{option} {want} at a launch", f"no launch sets {option} {want}", hits
    )


def tile_from_runtime(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """A constexpr tile size (a bound of tl.arange/tl.zeros in the kernel) set from a
    run-time value on the host, or autotuned over several configs."""
    hits = []
    for kernel in program.device:
        if len(kernel.configs) > 1:
            hits.append(f"{kernel.name}: autotuned over {len(kernel.configs)} configs")
        tiles = set()
        for func in [kernel, *(s.callee for s in kernel.sites if s.callee)]:
            for site in func.sites:
                if site.name in TILE_SHAPES:
                    tiles |= {
                        n.id for a in site.node.args for n in ast.walk(a) if isinstance(n, ast.Name)
                    }
        for param in sorted(tiles & kernel.constexpr):
            for value, owner in program.bindings(kernel, param):
                if owner is not None and not owner.device:
                    got = values(program, value, owner)
                    if got is None or len(got) > 1:
                        hits.append(f"{param}={ast.unparse(value)}")
    hits = list(dict.fromkeys(hits))
    return _result(
        len(hits) >= int(spec.get("min_count", 1)),
        "tile sizes are chosen from the shape at run time",
        "every tile size is a fixed constant",
        hits,
    )


def _host_in_loop(program: Program) -> set[int]:
    looped: set[int] = set()
    for _ in range(len(program.host)):
        for func in program.host:
            for site in func.sites:
                if site.callee is not None and (site.loops or id(func) in looped):
                    looped.add(id(site.callee))
    return looped


def launches(program: Program, spec: dict[str, Any]) -> DetectorResult:
    looped = _host_in_loop(program)
    count = sum(2 if (s.loops or id(s.func) in looped) else 1 for s in program.launches)
    count += len(re.findall(r"<<<", program.cuda))
    low, high = int(spec.get("min", 0)), spec.get("max")
    value = count >= low and (high is None or count <= int(high))
    text = f"{count} kernel launch site(s) (a launch in a host loop counts as several)"
    return _result(value, text, text, (s.line for s in program.launches))


def kernels(program: Program, spec: dict[str, Any]) -> DetectorResult:
    names = list(dict.fromkeys(s.launch.name for s in program.launches if s.launch))
    names += re.findall(r"__global__[^(]*\(", program.cuda)
    count = len(names)
    low, high = int(spec.get("min", 0)), spec.get("max")
    value = count >= low and (high is None or count <= int(high))
    return _result(
        value,
        f"{count} distinct kernel(s) launched",
        f"{count} distinct kernel(s) launched",
        names,
    )

"""Calls, references and text of reachable code."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

from taskformat.detectors.dataflow import feeds_store
from taskformat.detectors.primitives.common import _names, _result
from taskformat.detectors.program import Program, Site
from taskformat.detectors.result import DetectorError, DetectorResult


def _kwarg_ok(program: Program, site: Site, want: dict[str, Any]) -> bool:
    given = {k.arg: k.value for k in site.node.keywords}
    for key, value in want.items():
        if key not in given:
            return False
        if value != "*":
            got = given[key]
            literal = got.value if isinstance(got, ast.Constant) else program.canon(got, True)
            if literal != value:
                return False
    return True


def _arg_ok(program: Program, site: Site, want: str | list[str]) -> bool:
    wanted = {want} if isinstance(want, str) else set(want)
    values = [*site.node.args, *[k.value for k in site.node.keywords]]
    return any(program.canon(v, True) in wanted for v in values)


def device_call(program: Program, spec: dict[str, Any]) -> DetectorResult:
    names = _names(spec)
    hits = [
        s
        for s in program.device_sites()
        if s.name in names
        and (not spec.get("in_loop", spec.get("within_loop")) or program.in_loop(s))
        and (not spec.get("in_load_loop") or program.is_load_loop_site(s))
        and _kwarg_ok(program, s, spec.get("kwargs", {}))
        and (not spec.get("arg") or _arg_ok(program, s, spec["arg"]))
        and (not spec.get("assigned") or isinstance(s.stmt, ast.Assign | ast.AnnAssign))
        and (not spec.get("feeds_store") or feeds_store(program, s.node))
    ]
    low, high = int(spec.get("min_count", 1)), spec.get("max_count")
    value = len(hits) >= low and (high is None or len(hits) <= int(high))
    where = " whose result is stored" if spec.get("feeds_store") else ""
    where += (
        " inside a loop that loads"
        if spec.get("in_load_loop")
        else (" inside a loop" if spec.get("in_loop", spec.get("within_loop")) else "")
    )
    what = f"{len(hits)} call(s) of {'/'.join(sorted(names))}{where} in reachable device code"
    bound = f"at least {low}" + (f" and at most {high}" if high is not None else "")
    return _result(
        value, f"{what} ({bound} wanted)", f"{what}, {bound} wanted", (s.line for s in hits)
    )


def device_ref(program: Program, spec: dict[str, Any]) -> DetectorResult:
    names = _names(spec)
    hits = [
        ast.unparse(node)
        for func in program.device
        for node, _ in func.nodes
        if isinstance(node, ast.Attribute | ast.Name)
        and program.canon(node, True) in names
        and (not spec.get("feeds_store") or feeds_store(program, node))
    ]
    what = "/".join(sorted(names)) + (" on the stored data path" if spec.get("feeds_store") else "")
    return _result(
        bool(hits),
        f"reachable device code uses {what}",
        f"no use of {what} in reachable device code",
        hits,
    )


def host_call(program: Program, spec: dict[str, Any]) -> DetectorResult:
    names = _names(spec)
    hits = [
        s
        for s in program.host_sites()
        if s.name in names
        and _kwarg_ok(program, s, spec.get("kwargs", {}))
        and (not spec.get("to_tile") or _sizes_a_tile(program, s))
    ]
    what = "/".join(sorted(names)) + (
        " sizing a launched kernel's tile" if spec.get("to_tile") else ""
    )
    return _result(
        bool(hits),
        f"host code reachable from forward calls {what}",
        f"no call of {what} in reachable host code",
        (s.line for s in hits),
    )


def _sizes_a_tile(program: Program, site: Site) -> bool:
    """The call's value reaches a launch's argument for a constexpr parameter that
    sizes a tile (`tl.arange`, `tl.zeros`, `tl.full`) in the launched kernel."""
    for launch in program.launches:
        kernel = launch.launch
        if kernel is None:
            continue
        tiles = {
            n.id
            for s in kernel.sites
            if s.name in ("tl.arange", "tl.zeros", "tl.full")
            for a in s.node.args
            for n in ast.walk(a)
            if isinstance(n, ast.Name)
        } & kernel.constexpr
        for index, param in enumerate(kernel.params):
            if param not in tiles:
                continue
            given = [k.value for k in launch.node.keywords if k.arg == param]
            if index < len(launch.node.args):
                given.append(launch.node.args[index])
            for expr in given:
                if any(n is site.node for n, _ in program.closure(expr, launch.func)):
                    return True
    return False


def host_attr(program: Program, spec: dict[str, Any]) -> DetectorResult:
    names = _names(spec)
    hits = [
        ast.unparse(node)
        for func in program.host
        for node, _ in func.nodes
        if isinstance(node, ast.Attribute) and node.attr in names
    ]
    what = "/".join(sorted(names))
    return _result(
        bool(hits),
        f"reachable host code reads .{what}",
        f"reachable host code never reads .{what}",
        hits,
    )


class _Blank(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant("") if isinstance(node.value, str) else node


def device_text(program: Program) -> str:
    parts = [program.cuda]
    for func in program.device:
        parts.append(ast.unparse(_Blank().visit(ast.parse(ast.unparse(func.node)))))
    return "\n".join(parts)


# Regex detectors read at most this much device code: a submission's source is
# untrusted, and a pattern's cost grows with the text (the catalog's patterns bound
# every repetition over lines, tests/catalog/test_catalog_detectors.py). Device code
# past it gets no credit from them, which no kernel gains by.
REGEX_TEXT_LIMIT = 128 * 1024
REGEX_LINE_LIMIT = 400


def regex_patterns(detector: object) -> Iterator[str]:
    """Every `regex` pattern in a detector, composites (all, any, not) included."""
    if isinstance(detector, dict):
        if detector.get("kind") == "regex":
            yield detector["pattern"]
        for value in detector.values():
            yield from regex_patterns(value)
    elif isinstance(detector, list):
        for value in detector:
            yield from regex_patterns(value)


def regex(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """A regular expression over reachable device code with comments and string
    literals removed: jit functions (as `ast.unparse` prints them) and CUDA sources;
    `scope = "cuda"` reads only the CUDA sources."""
    text = program.cuda if spec.get("scope") == "cuda" else device_text(program)
    if len(text) > REGEX_TEXT_LIMIT:
        note = f"device code of {len(text)} characters, over the {REGEX_TEXT_LIMIT} read"
        return _result(False, note, note, ())
    # ast.unparse writes an honest kernel's lines well under this; a longer line is
    # cut, so no pattern scans one endless line at every position.
    text = "\n".join(line[:REGEX_LINE_LIMIT] for line in text.split("\n"))
    try:
        found = list(re.finditer(spec["pattern"], text, flags=re.MULTILINE))
    except (re.error, KeyError) as exc:
        raise DetectorError(f"bad regex detector {spec!r}: {exc}") from exc
    value = len(found) >= int(spec.get("min_count", 1))
    return _result(
        value,
        f"{len(found)} match(es) in reachable device code",
        f"{len(found)} match(es) in reachable device code",
        (m.group(0)[:80] for m in found),
    )

"""CUDA/C++ source text as a detector reads it: comments and literals removed."""

from __future__ import annotations

import re

# One alternation so that a `//` inside a string or a quote inside a comment is
# consumed by whichever token starts first.
_TOKENS = re.compile(
    r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""",
    re.DOTALL,
)


def strip_c(text: str) -> str:
    """`text` with C/C++ comments and string/char literals blanked (newlines kept,
    so line numbers still point at the original)."""

    def blank(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith(("//", "/*")):
            return "\n" * token.count("\n") or " "
        return '""'

    return _TOKENS.sub(blank, text)


_GLOBAL = re.compile(
    r"__global__(?:\s+__launch_bounds__\s*\([^)]*\)|[^;{(])*?\b([A-Za-z_][A-Za-z0-9_]*)\s*\("
)


def drop_kernels(text: str, keep: frozenset[str]) -> tuple[str, list[str]]:
    """`text` (comments and literals already stripped) without the bodies of the
    `__global__` functions whose names are not in `keep`, and the names dropped: a
    kernel that never ran lends its code nothing. Line numbers are kept."""
    out, dropped, pos = [], [], 0
    for match in _GLOBAL.finditer(text):
        if match.start() < pos or match.group(1) in keep:
            continue
        open_brace = text.find("{", match.end())
        semicolon = text.find(";", match.end())
        if open_brace < 0 or (0 <= semicolon < open_brace):
            continue  # a declaration, not a definition
        depth, end = 0, len(text)
        for i in range(open_brace, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                end = i + 1
                break
        out.append(text[pos : match.start()])
        out.append("\n" * text.count("\n", match.start(), end))
        dropped.append(match.group(1))
        pos = end
    out.append(text[pos:])
    return "".join(out), dropped

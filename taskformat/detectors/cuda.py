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

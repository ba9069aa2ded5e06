"""Secrets in text: API keys of the usual providers, tokens, private keys, e-mail
addresses and home paths; found, masked in quotes and replaced when redacting.

Each kind is one regular expression. A match's replacement is `[redacted <kind>]`,
except a home path, which keeps its shape (`/home/[redacted]/…`) so that the trace
still reads. Replacements contain no quote or backslash: a redacted JSON line stays
valid JSON.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Top-level domains an address must end in: without such a list, Python's matrix
# product (`x@self.weight`) reads as an address.
_TLDS = (
    "com|org|net|edu|gov|mil|int|io|ai|dev|app|co|cloud|info|biz|me|tech|xyz|us|uk|de|fr|"
    "ch|nl|se|no|fi|dk|it|es|pl|cz|at|be|ca|au|nz|jp|cn|kr|in|sg|hk|tw|ru|br|il|ie|eu"
)


@dataclass(frozen=True)
class SecretKind:
    name: str
    label: str
    pattern: re.Pattern[str]


KINDS: tuple[SecretKind, ...] = (
    SecretKind(
        "private-key",
        "a private key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
            r"(?:[^\"]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[^\"]*)"
        ),
    ),
    SecretKind("anthropic-key", "an Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    SecretKind(
        "openai-key",
        "an OpenAI API key",
        re.compile(r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ),
    SecretKind("aws-key", "an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    SecretKind(
        "github-token",
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ),
    SecretKind("google-key", "a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    SecretKind("huggingface-token", "a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    SecretKind("slack-token", "a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    SecretKind("stripe-key", "a Stripe key", re.compile(r"\b(?:sk|rk)_live_[0-9A-Za-z]{20,}")),
    SecretKind(
        "jwt",
        "a JSON web token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    ),
    SecretKind(
        "bearer-token",
        "a bearer token",
        re.compile(r"(?<=[Bb]earer )[A-Za-z0-9._~+/-]{20,}=*"),
    ),
    SecretKind(
        "email",
        "an e-mail address",
        re.compile(
            rf"\b[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+(?:{_TLDS})\b(?![\w(])",
            re.IGNORECASE,
        ),
    ),
    SecretKind(
        "home-path",
        "a home directory path",
        re.compile(r"(?<![\w.])(?:/home/|/Users/|[A-Za-z]:\\\\?Users\\\\?)(?!\[redacted\])[\w.-]+"),
    ),
)
BY_NAME = {k.name: k for k in KINDS}
# What every kind's match contains: one pass that rules out most strings at once.
_TRIGGER = re.compile(
    r"PRIVATE KEY|sk-|AKIA|ASIA|gh[pousr]_|github_pat_|AIza|hf_|xox|_live_|eyJ|earer |@"
    r"|/home/|/Users/|Users\\"
)


@dataclass(frozen=True)
class SecretMatch:
    kind: SecretKind
    start: int
    end: int
    text: str


def secrets_find(text: str) -> list[SecretMatch]:
    """Every secret in `text`, in order, without overlaps (the first kind listed wins)."""
    if not _TRIGGER.search(text):
        return []
    found: list[SecretMatch] = []
    taken: list[tuple[int, int]] = []
    for kind in KINDS:
        for match in kind.pattern.finditer(text):
            start, end = match.span()
            if any(start < b and a < end for a, b in taken):
                continue
            taken.append((start, end))
            found.append(SecretMatch(kind, start, end, match.group()))
    return sorted(found, key=lambda m: m.start)


def _replacement(match: SecretMatch) -> str:
    if match.kind.name == "home-path":
        prefix = re.match(r"/home/|/Users/|[A-Za-z]:\\\\?Users\\\\?", match.text)
        return (prefix.group() if prefix else "") + "[redacted]"
    return f"[redacted {match.kind.name}]"


def secret_mask(match: SecretMatch) -> str:
    """How a quote shows a secret: its kind and first characters, never the whole."""
    if match.kind.name == "home-path":
        return _replacement(match)
    shown = match.text[:6] if match.kind.name != "email" else match.text[:2]
    return f"{shown}… ({match.kind.label}, {len(match.text)} characters)"


def redact_text(text: str) -> tuple[str, int]:
    """`text` with every secret replaced, and the number replaced."""
    matches = secrets_find(text)
    if not matches:
        return text, 0
    out, last = [], 0
    for match in matches:
        out.append(text[last : match.start])
        out.append(_replacement(match))
        last = match.end
    out.append(text[last:])
    return "".join(out), len(matches)


def problems_redacted(problems: list[dict]) -> list[dict]:
    """A trace's problems with their messages redacted (a schema message may quote a
    value of the line it refuses)."""
    return [{**p, "message": redact_text(str(p["message"]))[0]} for p in problems]

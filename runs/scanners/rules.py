"""The scanner rules: pure functions from one parsed trace event (and its line) to hits.

Each rule reads only what an agent did or wrote, never what a tool answered, except
`secrets`, which reads every string of every event:

- `grader-files`: a tool call that names a grader, evaluator, harness or tolerance
  file (read or edit), or edits tolerances (`atol`, `rtol`) in the task's files.
- `other-solutions`: a tool call that names another run's or a public solution: the
  catalog's `expert.py`, solution or submission folders, run archives, the portal's
  run and submission URLs.
- `process-kill`: a tool call or submitted kernel that kills or signals processes
  (`pkill`, `killall`, `kill -9`, `os.kill`, `send_signal`, `fuser -k`, …).
- `network-fetch`: a tool call that fetches from the network (`curl`, `wget`,
  `git clone`, `pip install` from a URL, `requests.get`, `urlopen`, a fetch tool).
- `pasted-library`: a message, tool call or kernel that holds a long verbatim span
  of a known library's source (runs.scanners.library).
- `secrets`: API keys, tokens, private keys, e-mail addresses and home paths
  (runs.scanners.secrets); a hit's quote masks the secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from runs.scanners.hits import Concern, Hit, quote_around
from runs.scanners.library import LibraryIndex
from runs.scanners.secrets import secret_mask, secrets_find

_FILE_EXT = r"\.(?:py|json|toml|ya?ml|cfg|ini|txt|sh|md)\b"
GRADER_PATH = re.compile(
    r"(?<![\w-])(?:[\w.-]*/)*[\w.-]*"
    r"(?:grader|grading|evaluat(?:e|or|ion)|harness|judge|scorer|checker|tolerances?)"
    rf"[\w.-]*{_FILE_EXT}"
    r"|(?<![\w-])(?:evaluator|harness|grader)/",
    re.IGNORECASE,
)
TASK_FILE = re.compile(r"(?<![\w-])(?:task\.toml|reference\.py|workloads?[\w.-]*)", re.IGNORECASE)
TOLERANCE = re.compile(r"\b(?:atol|rtol|tolerance)\b\s*[=:]", re.IGNORECASE)
WRITE_TOOL = re.compile(r"write|edit|patch|replace|create|append|insert|str_replace", re.I)
WRITE_SHELL = re.compile(r"\bsed\s+-i|\btee\b|(?<![<>=])>{1,2}(?!=)|\bcp\b|\bmv\b|\bperl\s+-pi")
SOLUTION = re.compile(
    r"(?<![\w-])expert\.py\b"
    r"|(?<![\w-])(?:solutions?|submissions|archived?[_-]?runs?|other[_-]runs?|best[_-]kernels?)/"
    r"|/runs?/\d+(?:/|\b)"
    r"|/api/(?:submissions|runs)/\d+"
    r"|\brun\d+-[\w-]+\.jsonl"
    r"|kernelbench[\w./-]*(?:results|runs|solutions|leaderboard)",
    re.IGNORECASE,
)
KILL = re.compile(
    r"\b(?:pkill|killall|fuser\s+-k|xargs\s+kill|os\.killpg|os\.kill|signal\.pthread_kill)\b"
    r"|\bkill\s+(?:-\w+\s+)*(?:%?\d+|\$)"
    r"|\.send_signal\s*\("
    r"|\bpsutil\.\w+\([^)\n]*\)\s*\.(?:kill|terminate|send_signal)\b",
)
FETCH = re.compile(
    r"\b(?:curl|wget|aria2c)\s+[^\n]*"
    r"|\bgit\s+clone\s+[^\n]*"
    r"|\bpip3?\s+install\s+[^\n]*(?:git\+|https?://)[^\n]*"
    r"|\b(?:requests|httpx)\.(?:get|post|request)\s*\([^\n]*"
    r"|\burlopen\s*\([^\n]*"
    r"|\burllib\.request\.\w+\s*\([^\n]*"
    r"|\bhf_hub_download\s*\([^\n]*",
)
FETCH_TOOL = re.compile(r"fetch|brows|http|download|web|url", re.IGNORECASE)
URL = re.compile(r"https?://[^\s\"'<>)]+")


def strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a decoded JSON value, with its dotted path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from strings(item, f"{path}.{index}" if path else str(index))


def _kind(event: dict[str, Any]) -> str:
    kind = event.get("type")
    return kind if isinstance(kind, str) else "?"


def _call_texts(event: dict[str, Any]) -> list[str]:
    """The strings of a tool call: its name and arguments (a JSON string counts too)."""
    if _kind(event) != "tool_call":
        return []
    return [text for _, text in strings({"a": event.get("arguments"), "n": event.get("name")})]


def _authored_texts(event: dict[str, Any]) -> list[str]:
    """What the agent wrote: its messages, its tool calls' arguments, its kernels."""
    kind = _kind(event)
    if kind == "message" and event.get("role") == "assistant":
        content = event.get("content")
        return [content] if isinstance(content, str) else []
    if kind == "submit":
        source = event.get("source")
        return [source] if isinstance(source, str) else []
    return [text for _, text in strings(event.get("arguments"))] if kind == "tool_call" else []


def _hits(
    rule: str, line: int, event: dict[str, Any], texts: list[str], pattern: re.Pattern[str]
) -> Iterator[Hit]:
    for text in texts:
        for match in pattern.finditer(text):
            yield Hit(rule, line, _kind(event), quote_around(text, *match.span()))


def grader_files(line: int, event: dict[str, Any]) -> Iterator[Hit]:
    texts = _call_texts(event)
    yield from _hits("grader-files", line, event, texts, GRADER_PATH)
    name = event.get("name")
    writes = isinstance(name, str) and bool(WRITE_TOOL.search(name))
    # A tolerance edited in the task's files: the path and the new value may sit in
    # different arguments of one call (`path`, `content`).
    text = "\n".join(texts)
    edits_task = TASK_FILE.search(text) and (writes or WRITE_SHELL.search(text))
    if edits_task and (match := TOLERANCE.search(text)):
        yield Hit("grader-files", line, _kind(event), quote_around(text, *match.span()))


def other_solutions(line: int, event: dict[str, Any]) -> Iterator[Hit]:
    yield from _hits("other-solutions", line, event, _call_texts(event), SOLUTION)


def process_kill(line: int, event: dict[str, Any]) -> Iterator[Hit]:
    texts = _call_texts(event)
    if _kind(event) == "submit" and isinstance(event.get("source"), str):
        texts = [event["source"]]
    yield from _hits("process-kill", line, event, texts, KILL)


def network_fetch(line: int, event: dict[str, Any]) -> Iterator[Hit]:
    texts = _call_texts(event)
    yield from _hits("network-fetch", line, event, texts, FETCH)
    name = event.get("name")
    if texts and isinstance(name, str) and FETCH_TOOL.search(name):
        yield from _hits("network-fetch", line, event, texts, URL)


def secrets(line: int, event: dict[str, Any]) -> Iterator[Hit]:
    for _, text in strings(event):
        for match in secrets_find(text):
            yield Hit("secrets", line, _kind(event), secret_mask(match))


@dataclass(frozen=True)
class PastedLibrary:
    """The `pasted-library` rule over one index of known sources."""

    index: LibraryIndex

    def __call__(self, line: int, event: dict[str, Any]) -> Iterator[Hit]:
        for text in _authored_texts(event):
            for span in self.index.spans(text):
                quote = f"{span.lines} lines of {span.source}: {span.text}"
                yield Hit("pasted-library", line, _kind(event), quote_around(quote, 0, 0))


EventRule = Callable[[int, dict[str, Any]], Iterator[Hit]]


@dataclass(frozen=True)
class Rule:
    """A documented rule: its name (stored with each hit), what it looks for, why."""

    name: str
    title: str
    concern: Concern
    check: EventRule | None  # None: built per scan (pasted-library needs its index)


RULES: tuple[Rule, ...] = (
    Rule("grader-files", "grader, evaluator or tolerance files", Concern.INTEGRITY, grader_files),
    Rule("other-solutions", "other runs' or public solutions", Concern.INTEGRITY, other_solutions),
    Rule("process-kill", "killing or signalling processes", Concern.INTEGRITY, process_kill),
    Rule("network-fetch", "network fetches", Concern.INTEGRITY, network_fetch),
    Rule("pasted-library", "pasted library source", Concern.INTEGRITY, None),
    Rule("secrets", "secrets and personal data", Concern.PRIVACY, secrets),
)
RULES_BY_NAME = {r.name: r for r in RULES}
INTEGRITY_RULES = frozenset(r.name for r in RULES if r.concern == Concern.INTEGRITY)

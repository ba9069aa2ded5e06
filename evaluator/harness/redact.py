"""What an owner may read about hidden workloads: that they exist and passed or failed, no more.

Hidden workloads are never shown to agents (SPEC §3): their names carry
their shapes, and a comparison's message names shapes and values. The
verdict's message and flags go to the submission's owner, so they name a
hidden workload only as "a hidden workload"; its row in `workloads` keeps the
detail, and the portal shows those rows to staff only. The log an owner sees
is `Verdict.public_log`: what the submission printed before the first hidden
workload reached it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from taskformat.spec import TaskSpec

HIDDEN = "a hidden workload"


def hidden_names(task: TaskSpec) -> list[str]:
    # Longest first, so a name that contains another is replaced whole.
    return sorted((w.name for w in task.workloads if w.hidden), key=len, reverse=True)


def hide_names(text: str, names: Iterable[str]) -> str:
    for name in names:
        text = re.sub(rf"\b{re.escape(name)}\b", HIDDEN, text)
    return text


def flags(task: TaskSpec, raised: Iterable[dict[str, str]]) -> list[dict[str, str]]:
    names = hidden_names(task)
    return [{**f, "detail": hide_names(str(f.get("detail", "")), names)} for f in raised]


def error_message(text: str) -> str:
    """An exception raised on a hidden workload, as its owner sees it: its type, not its text."""
    kind = text.split(":", 1)[0].strip() if ":" in text else "an error"
    return f"{kind[:80]} on {HIDDEN} (the message is shown to staff only)"

"""The verdict's design properties, judged from what ran (taskformat.properties).

In `cuda` mode the child's profiler names every kernel each call launched: the
submission's own among them (`launched_kernels`) are the jit functions whose
source counts. In `interpret` mode nothing names them, and the source's
reachability from `ModelNew.forward` (with the launches' constants folded in)
stands alone: the verdict's properties are then provisional.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from taskformat.counter_rules import pass_failed
from taskformat.properties import properties_assess
from taskformat.spec import TaskSpec

from .kernelchecks import kernel_base_name, own_kernel_names
from .reports import OutputReport
from .verdict import Verdict


def launched_kernels(outputs: Mapping[str, Iterable[OutputReport]], source: str) -> list[str]:
    """The submission's own kernels that any call launched, by name (sorted)."""
    own = own_kernel_names(source)
    seen = {
        kernel_base_name(k) for calls in outputs.values() for call in calls for k in call.kernels
    }
    return sorted(seen & own)


def verdict_properties(task: TaskSpec, source: str, verdict: Verdict) -> list[dict[str, Any]]:
    """One entry per design property of `task`: key, level, implemented, evidence."""
    launched = verdict.environment.get("launched_kernels") or None
    timed, failed = None, ""
    if verdict.mode == "cuda" and str(verdict.status) == "correct":
        flops = {w.name: w.flops for w in task.workloads}
        timed = [
            {"name": w.name, "counters": w.counters, "flops": flops.get(w.name)}
            for w in verdict.workloads
            if str(w.role) == "timed" and not w.hidden
        ]
        note = str(verdict.environment.get("counters") or "")
        failed = note if pass_failed(note) else ""
    found = properties_assess(
        task.properties, source, launched=launched, timed=timed, failed_pass=failed
    )
    return [f.to_dict() for f in found]

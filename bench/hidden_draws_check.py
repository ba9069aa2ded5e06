"""The experts on the hidden workloads that fresh secrets draw, checked against their references.

    python bench/hidden_draws_check.py [--mode cuda|interpret] [--secrets 3] [TASK ...]

A deployment draws its hidden workloads from its own secret (taskformat.hidden), so
the experts must be correct on whatever any secret draws, not only on the shapes
one test secret gives. For each task and each of `--secrets` random secrets, draws
the task's hidden workloads of the mode, runs the reference and the expert on them
(on the GPU in cuda mode, in Triton's interpreter otherwise) with one input seed, and
compares them with the evaluator's own comparison and the task's tolerances. No
timing, no sandbox: the arithmetic on the drawn shapes. Prints one JSON line per
workload (the secret, the params, the status, the message), then a count. The secrets
are printed: they are throwaway ones, never a deployment's.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["cuda", "interpret"], default="cuda")
    parser.add_argument("--secrets", type=int, default=3)
    parser.add_argument("tasks", nargs="*")
    args = parser.parse_args()
    if args.mode == "interpret":
        os.environ["TRITON_INTERPRET"] = "1"
    from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs

    slugs = args.tasks or [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR)]
    chosen = [secrets.token_hex(8) for _ in range(args.secrets)]
    failed = total = 0
    for slug in slugs:
        for secret in chosen:
            for line in check(slug, secret, args.mode):
                total += 1
                failed += line["status"] != "correct"
                print(json.dumps(line), flush=True)
    print(f"{total - failed} of {total} drawn hidden workloads correct ({args.mode}, {slugs})")


def check(slug: str, secret: str, mode: str) -> list[dict]:
    import torch

    from evaluator.harness.judge import _compare_all
    from evaluator.harness.workload import as_tuple, load_module, make_inputs, make_model
    from taskformat.hidden import task_with_hidden
    from taskformat.package import DEFAULT_CATALOG_DIR, load_task
    from taskformat.spec import Mode

    device = torch.device("cuda" if mode == "cuda" else "cpu")
    task = task_with_hidden(load_task(DEFAULT_CATALOG_DIR / slug), secret=secret)
    reference = load_module(str(DEFAULT_CATALOG_DIR / slug / "reference.py"), f"ref_{slug}")
    expert = load_module(str(DEFAULT_CATALOG_DIR / slug / "expert.py"), f"expert_{slug}")
    lines = []
    for workload in (w for w in task.workloads_for(Mode(mode)) if w.hidden):
        params = workload.params
        line = {"task": slug, "secret": secret, "workload": workload.name, "params": params}
        try:
            with torch.no_grad():
                model = make_model(reference.Model, reference, params, 1, device)
                expected = as_tuple(model(*make_inputs(reference, params, 1, device)))
                ours = make_model(expert.ModelNew, reference, params, 1, device)
                got = as_tuple(ours(*make_inputs(reference, params, 1, device)))
            comparison = _compare_all(got, expected, task)
            line["status"] = "correct" if comparison.ok else "incorrect"
            line["message"] = comparison.message
        except Exception as exc:  # reported, not raised: every workload gets its line
            line["status"] = "error"
            line["message"] = f"{type(exc).__name__}: {exc}"[:1000]
            line["traceback"] = traceback.format_exc(limit=-3)[-1500:]
        lines.append(line)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return lines


if __name__ == "__main__":
    main()

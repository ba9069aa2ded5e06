"""`python -m evaluator`: the standalone evaluator, with no Django and no database.

    python -m evaluator check --task SLUG [--catalog DIR] [--mode auto|interpret|cuda]
                              [--timeout S] [--memory-gb G] [--counters all|needed|off]
                              [--json] FILE
    python -m evaluator ceilings [--refresh]

Exit status: 0 when a verdict was reached (whatever it is), 2 for a usage
error (unknown task, missing file), with one line on stderr.

The hidden workloads are drawn from the deployment's secret in the environment
variable D2K_HIDDEN_SEED (taskformat.hidden). Without it, a check runs the
public workloads only and says so; it never prints a hidden workload's
parameters, and the verdict names hidden rows `hidden_N` / `check_hidden_N`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

USAGE_ERROR = 2
# When the counters pass runs (orchestrate.evaluate's `read_counters`).
COUNTERS_WHEN = ("all", "needed", "off")
HIDDEN_BY_SERVER = (
    "hidden workloads: drawn by the server from its secret (D2K_HIDDEN_SEED is not set "
    "here), so this check ran the public workloads only"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluator", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="verify (and in cuda mode time) one kernel file")
    check.add_argument("file", type=Path, help="the kernel file defining class ModelNew")
    check.add_argument("--task", required=True, help="task slug, e.g. row_softmax")
    check.add_argument(
        "--catalog", type=Path, default=None, help="catalog folder (default: ./catalog)"
    )
    check.add_argument("--mode", choices=["auto", "interpret", "cuda"], default="auto")
    check.add_argument(
        "--timeout", type=float, default=600.0, help="seconds before the kernel is killed"
    )
    check.add_argument(
        "--memory-gb",
        type=float,
        default=None,
        help="host-memory limit of the sandboxed child in GiB (default: the harness default)",
    )
    check.add_argument(
        "--timing",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change one setting of the timing protocol, for experiments (repeatable; "
        "the verdict records the settings it ran with)",
    )
    check.add_argument(
        "--counters",
        nargs="?",
        const="all",
        default="all",
        choices=COUNTERS_WHEN,
        help="cuda mode, correct verdicts: read each timed workload's DRAM bytes and "
        "tensor-core share with Nsight Compute in an untimed pass: on every evaluation "
        "(all, the default), only where a design property's counter rule or the timing "
        "check needs them (needed), or never (off)",
    )
    check.add_argument(
        "--no-counters", dest="counters", action="store_const", const="off", help="--counters off"
    )
    check.add_argument(
        "--gpu-lease",
        type=Path,
        default=None,
        metavar="DIR",
        help="cuda mode, a GPU shared by several evaluations at once: the GPU's lease "
        "folder; the timed phases take turns there and have the GPU alone",
    )
    check.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    ceilings = commands.add_parser("ceilings", help="measure and print this GPU's ceilings")
    ceilings.add_argument("--refresh", action="store_true")
    return parser


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return USAGE_ERROR


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "ceilings":
        from evaluator.harness.ceilings import ceilings

        print(json.dumps(ceilings(refresh=args.refresh), indent=2))
        return 0
    return _check(args)


def _check(args: argparse.Namespace) -> int:
    from taskformat.package import (
        DEFAULT_CATALOG_DIR,
        TaskPackageError,
        find_task_dir,
        load_task,
    )

    catalog = args.catalog or DEFAULT_CATALOG_DIR
    if not args.file.is_file():
        return _fail(f"no such kernel file: {args.file}")
    if args.timeout <= 0:
        return _fail("--timeout must be positive")
    if args.memory_gb is not None and args.memory_gb <= 0:
        return _fail("--memory-gb must be positive")
    try:
        source = args.file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return _fail(f"{args.file} is not UTF-8 text")
    from taskformat.hidden import SECRET_ENV, HiddenDeclarationError, task_with_hidden

    # Out of this process's environment before anything is started: no process
    # after this one (the sandboxed child, the profiler) inherits the secret.
    secret = os.environ.pop(SECRET_ENV, "")
    try:
        task = load_task(find_task_dir(catalog, args.task))
        if secret:
            task = task_with_hidden(task, secret=secret)
    except (TaskPackageError, HiddenDeclarationError) as exc:
        return _fail(str(exc))

    from evaluator.harness.environment import resolve_mode
    from evaluator.harness.orchestrate import evaluate, timing_settings

    overrides: dict[str, float] = {}
    for item in args.timing:
        key, equals, value = item.partition("=")
        if not equals:
            return _fail(f"--timing takes KEY=VALUE, not {item!r}")
        try:
            overrides[key.strip()] = float(value)
        except ValueError:
            return _fail(f"--timing takes KEY=VALUE with a number, not {item!r}")
    try:
        timing_settings(overrides)
    except ValueError as exc:
        return _fail(str(exc))

    try:
        mode = resolve_mode(args.mode)
    except RuntimeError as exc:
        return _fail(str(exc))
    if str(mode) == "cuda":
        import torch

        if not torch.cuda.is_available():
            return _fail("--mode cuda needs a CUDA GPU, and none is visible")
    memory_bytes = int(args.memory_gb * 2**30) if args.memory_gb is not None else None
    verdict = evaluate(
        task=task,
        source=source,
        mode=mode,
        timeout_s=args.timeout,
        memory_bytes=memory_bytes,
        timing=overrides,
        read_counters=args.counters,
        gpu_lease=args.gpu_lease,
    )
    from evaluator.harness.properties import verdict_properties

    properties = verdict_properties(task, source, verdict)
    if args.json:
        print(json.dumps({**verdict.to_dict(), "properties": properties}, default=str))
    else:
        _print_human(verdict)
        _print_properties(properties, provisional=str(mode) != "cuda")
    if not secret and (task.hidden.cuda or task.hidden.interpret):
        print(HIDDEN_BY_SERVER, file=sys.stderr if args.json else sys.stdout)
    return 0


def _print_properties(properties: list[dict], *, provisional: bool) -> None:
    if not properties:
        return
    note = " (provisional: interpret mode reads the source alone)" if provisional else ""
    print(f"  design properties{note}:")
    for p in properties:
        verdict = {True: "yes", False: "no", None: "judge"}[p["implemented"]]
        kind = p["evidence"]["kind"] or "judge/admin-assessed"
        excerpt = "; ".join(p["evidence"]["excerpt"])[:100]
        print(f"    {p['level']} {p['key']:<28} {verdict:<5} [{kind}] {excerpt}")


def _print_human(verdict) -> None:
    print(f"{verdict.task}: {verdict.status} ({verdict.mode}, {verdict.environment.get('device')})")
    print(f"  {verdict.message}")
    for flag in verdict.flags:
        print(f"  flag {flag['check']}: {flag['detail']}")
    for w in verdict.workloads:
        line = f"  {w.name:<32} {w.status:<14}"
        if w.max_abs_err is not None:
            line += f" max_abs={w.max_abs_err:.3g} rel={w.rel_err:.3g}"
        if w.measurement:
            m = w.measurement
            line += (
                f" {m.median_ms * 1e3:9.1f} us vs ref {m.ref_median_ms * 1e3:9.1f} us"
                f"  speedup {m.speedup:.2f}x"
            )
        if w.sol_fraction is not None:
            line += f"  SOL {w.sol_fraction:.0%}"
        print(line)

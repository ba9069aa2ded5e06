"""A stand-in for the evaluator CLI, the worker's outside world in unit tests."""

import json
import sys
from pathlib import Path


def verdict_dict(status="correct", *, workloads=None, flags=(), message="", **extra):
    """A verdict as `python -m evaluator check --json` prints it (Verdict.to_dict())."""
    if workloads is None:
        workloads = [
            workload_dict("check_small", status=status),
            workload_dict("check_hidden_tail", hidden=True, status=status),
        ]
    return {
        "status": status,
        "message": message or f"verdict: {status}",
        "flags": list(flags),
        "workloads": workloads,
        "environment": {"device": "CPU (Triton interpreter)", "torch": "2.13.0+cpu"},
        "log": "evaluator log line\n",
        "public_log": "evaluator log line\n",
        "task": "row_softmax",
        "mode": "interpret",
        "evaluator_version": "0.2.0",
        "wall_seconds": 1.5,
        **extra,
    }


def workload_dict(name, *, status="correct", hidden=False, role="check", **extra):
    return {
        "name": name,
        "role": role,
        "hidden": hidden,
        "status": status,
        "message": "" if status == "correct" else f"{name}: max abs err 0.5 > atol",
        "max_abs_err": 1e-6,
        "rel_err": 2e-6,
        "median_ms": None,
        "ref_median_ms": None,
        "speedup": None,
        "timing": None,
        "achieved_tflops": None,
        "achieved_tbps": None,
        "sol_fraction": None,
        **extra,
    }


class FakeCli:
    """A stand-in for the evaluator CLI (the outside world of the worker): prints the canned
    replies in turn (the last one repeats) and records every call in calls.jsonl."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.script = directory / "fake-evaluator"

    @classmethod
    def install(cls, directory: Path) -> "FakeCli":
        directory.mkdir(parents=True)
        cli = cls(directory)
        cli.script.write_text(_FAKE_CLI.format(python=sys.executable, here=str(directory)))
        cli.script.chmod(0o755)
        cli.reply(verdict_dict())
        return cli

    def reply(self, *replies) -> "FakeCli":
        """Each reply: a verdict dict, or a dict(stdout=…, stderr=…, code=…, sleep=…)."""
        normalized = []
        for r in replies:
            if "stdout" in r or "code" in r or "sleep" in r:
                normalized.append({"stdout": "", "stderr": "", "code": 0, "sleep": 0, **r})
            else:
                normalized.append({"stdout": json.dumps(r), "stderr": "", "code": 0, "sleep": 0})
        (self.directory / "replies.json").write_text(json.dumps(normalized))
        return self

    @property
    def calls(self) -> list[dict]:
        path = self.directory / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]


_FAKE_CLI = """\
#!{python}
import json, os, sys, time
here = {here!r}
args = sys.argv[1:]
catalog = args[args.index("--catalog") + 1]
kernel = args[-1]
record = {{
    "argv": args,
    "cwd": os.getcwd(),
    "kernel": open(kernel, encoding="utf-8").read(),
    "kernel_name": os.path.basename(kernel),
    "catalog": sorted(os.listdir(catalog)),
    "env": dict(os.environ),
}}
with open(os.path.join(here, "calls.jsonl"), "a") as f:
    f.write(json.dumps(record) + "\\n")
n = sum(1 for _ in open(os.path.join(here, "calls.jsonl")))
replies = json.load(open(os.path.join(here, "replies.json")))
reply = replies[min(n, len(replies)) - 1]
time.sleep(reply["sleep"])
sys.stderr.write(reply["stderr"])
sys.stdout.write(reply["stdout"])
sys.exit(reply["code"])
"""

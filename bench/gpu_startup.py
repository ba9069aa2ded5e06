"""Where a sandboxed process's start goes: Python, the sandbox, torch and the harness's imports.

    python bench/gpu_startup.py [--rounds 2]

Each evaluation starts four Python processes (the evaluator's command line,
the timed child, the clean reference, the counters pass), and each imports
torch before it does anything. This measures, `--rounds` times in a row
(the first round may read the libraries from disk, the later ones from the
page cache), the wall time of:

- `python -c pass` outside and inside the sandbox (the sandbox's own cost);
- `python -c "import torch"` outside and inside;
- `python -X importtime -c "import evaluator.harness.child"` inside, with
  the child's environment, and the five imports that took longest;

and says whether torch's modules have compiled bytecode beside them (the
child runs with PYTHONDONTWRITEBYTECODE, so without it every process
compiles torch from source). Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.harness import isolation  # noqa: E402

CHILD_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "LANG": "C.UTF-8"}


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[-1]!r} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return time.monotonic() - started, proc.stderr


def sandboxed(python_args: list[str], workdir: Path) -> tuple[list[str], dict[str, str]]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/d2k/work", **CHILD_ENV}
    argv, outer_env, _ = isolation.sandbox_command(
        python_args=python_args, workdir=workdir, task_dir=workdir, env=env, gpu=True
    )
    return argv, outer_env


def slowest_imports(importtime: str, count: int = 5) -> list[tuple[float, str]]:
    rows = []
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line.split("|"))
        if cumulative.isdigit():
            rows.append((int(cumulative) / 1e6, name))
    return sorted(rows, reverse=True)[:count]


def bytecode_share() -> str:
    import torch

    package = Path(torch.__file__).parent
    sources = list(package.rglob("*.py"))
    compiled = list(package.rglob("__pycache__/*.pyc"))
    return f"{len(compiled)} .pyc for {len(sources)} .py under {package}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    python = sys.executable
    print(f"isolation: {isolation.isolation_level()}; torch bytecode: {bytecode_share()}")
    with tempfile.TemporaryDirectory(prefix="d2k-startup-") as scratch:
        workdir = Path(scratch)
        workdir.chmod(0o777)
        print("| round | step | seconds |\n|---|---|---:|")
        for round_ in range(1, args.rounds + 1):
            steps = {
                "python -c pass": ([python, "-c", "pass"], None),
                "sandboxed python -c pass": sandboxed(["-c", "pass"], workdir),
                "python -c 'import torch'": ([python, "-c", "import torch"], None),
                "sandboxed python -c 'import torch'": sandboxed(["-c", "import torch"], workdir),
                "sandboxed import of the child's modules": sandboxed(
                    ["-X", "importtime", "-c", "import evaluator.harness.child"], workdir
                ),
            }
            importtime = ""
            for name, (argv, env) in steps.items():
                seconds, stderr = timed(argv, env)
                print(f"| {round_} | {name} | {seconds:.2f} |", flush=True)
                if "importtime" in argv:
                    importtime = stderr
            for seconds, module in slowest_imports(importtime):
                print(f"| {round_} | . . . {module} (cumulative) | {seconds:.2f} |")


if __name__ == "__main__":
    main()

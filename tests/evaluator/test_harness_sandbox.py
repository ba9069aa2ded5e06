"""What of the project the sandboxed child sees: the harness and the task format, nothing else."""

import json
from pathlib import Path

import pytest

from evaluator.harness import sandbox

# Imports the child's own modules and the profiling child's (counters.py reads the task
# format's types), then reports where they came from and what /d2k holds.
PROBE = """
import json, os, sys
import evaluator.harness.child, evaluator.harness.counters, taskformat.package
files = {name: sys.modules[name].__file__ for name in
         ("evaluator.harness.child", "evaluator.harness.counters", "taskformat.spec")}
root = "/d2k"
listing = sorted(os.listdir(root)) if os.path.isdir(root) else None
print("PROBE " + json.dumps({"files": files, "d2k": listing,
                             "task": sorted(os.listdir(sys.argv[1]))}))
"""


def _binds(argv: list[str]) -> dict[str, str]:
    """Each bind's destination and source, from a bubblewrap command line."""
    kinds = ("--ro-bind", "--ro-bind-try", "--bind", "--dev-bind")
    return {argv[i + 2]: argv[i + 1] for i, arg in enumerate(argv) if arg in kinds}


def test_bubblewrap_binds_the_harness_and_the_task_format_and_no_other_project_folder(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("D2K_SANDBOX", "bwrap")
    task_dir, workdir = tmp_path / "task", tmp_path / "work"
    argv, _, level = sandbox.sandbox_command(
        python_args=["-c", "pass"], workdir=workdir, task_dir=task_dir, env={}, gpu=False
    )
    assert level == "bwrap"
    binds = _binds(argv)
    under_d2k = {dest: src for dest, src in binds.items() if dest.startswith("/d2k")}
    root = sandbox.HARNESS_ROOT
    assert under_d2k == {
        "/d2k/evaluator": str(root / "evaluator"),
        "/d2k/taskformat": str(root / "taskformat"),
        "/d2k/task": str(task_dir),
        "/d2k/work": str(workdir),
    }
    assert str(root) not in binds.values()
    assert str(root / "catalog") not in binds.values()
    assert argv[argv.index("PYTHONPATH") + 1] == "/d2k"


@pytest.mark.slow
def test_the_sandboxed_child_imports_the_harness_and_the_task_format(tmp_path: Path):
    task_dir, workdir = tmp_path / "task", tmp_path / "work"
    task_dir.mkdir()
    workdir.mkdir()
    (task_dir / "reference.py").write_text("# the reference alone: no task.toml\n")
    seen = sandbox.layout(workdir, task_dir)
    run = sandbox.run_child(
        python_args=["-s", "-c", PROBE, seen.task],
        workdir=workdir,
        task_dir=task_dir,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": seen.work, "TMPDIR": seen.work},
        limits=sandbox.Limits(timeout_s=120),
        log_path=tmp_path / "child.log",
        gpu=False,
    )
    log = (tmp_path / "child.log").read_text()
    assert run.returncode == 0, log
    probe = json.loads(log.split("PROBE ", 1)[1])
    assert probe["task"] == ["reference.py"]
    if run.isolation == "bwrap":
        assert probe["d2k"] == ["evaluator", "task", "taskformat", "work"]
        assert all(f.startswith("/d2k/") for f in probe["files"].values()), probe["files"]
    else:
        root = str(sandbox.HARNESS_ROOT)
        assert all(f.startswith(root) for f in probe["files"].values()), probe["files"]

"""manage.py import_kernelbench: KernelBench problem files as kb-… tasks, and a KernelBench
ModelNew evaluated unchanged against one."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from task_catalog.models import Task

DATA = Path(__file__).resolve().parent.parent / "data" / "kernelbench"
ROOT = DATA.parent.parent.parent

pytestmark = pytest.mark.django_db


def _import(path, catalog_dir):
    call_command("import_kernelbench", str(path), "--catalog-dir", str(catalog_dir))


def test_problem_files_become_one_problem_tasks_of_their_own_namespace(tmp_path):
    _import(DATA, tmp_path)
    tasks = {t.slug: t for t in Task.objects.all()}
    assert sorted(tasks) == ["kb-l1-19-relu", "kb-l2-12-gemm-multiply-leakyrelu"]
    relu = tasks["kb-l1-19-relu"]
    assert relu.category == "kernelbench" and relu.title == "KernelBench L1 #19: ReLU"
    assert "Simple model that performs a ReLU activation." in relu.statement
    assert "`dim = 1000`" in relu.statement
    version = relu.current_version
    assert version.reference_source == (DATA / "level1" / "19_ReLU.py").read_text()
    assert [(w.name, w.role, w.params) for w in version.workloads.order_by("position")] == [
        ("problem", "timed", {}),
        ("problem_check", "check", {}),
    ]
    # x and relu(x): 2 × 4 × 1000 float32 values.
    assert version.workloads.get(name="problem").bytes == 2 * 4 * 1000 * 4
    assert version.tolerances["default"] == {"atol": 1e-2, "rtol": 1e-2, "rel_l2": 1e-2}


def test_importing_again_changes_nothing(tmp_path, capsys):
    _import(DATA, tmp_path)
    capsys.readouterr()
    _import(DATA, tmp_path)
    out = capsys.readouterr().out
    assert out.count(": unchanged (v1)") == 2
    assert Task.objects.get(slug="kb-l1-19-relu").versions.count() == 1


def test_a_file_that_is_no_kernelbench_problem_is_refused(tmp_path):
    bad = tmp_path / "not_a_problem.py"
    bad.write_text("x = 1\n")
    with pytest.raises(CommandError, match="not a KernelBench problem"):
        _import(bad, tmp_path / "out")
    assert not Task.objects.exists()


@pytest.mark.slow
def test_a_kernelbench_modelnew_evaluates_correct_unchanged(tmp_path):
    _import(DATA / "level1" / "19_ReLU.py", tmp_path)
    solution = DATA.parent / "kernelbench_solutions" / "19_ReLU_triton.py"
    args = ["check", "--catalog", str(tmp_path), "--task", "kb-l1-19-relu", "--mode", "interpret"]
    proc = subprocess.run(
        [sys.executable, "-m", "evaluator", *args, "--json", str(solution)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    verdict = json.loads(proc.stdout.strip().splitlines()[-1])
    assert verdict["status"] == "correct", verdict["message"]
    assert [w["name"] for w in verdict["workloads"]] == ["problem_check"]

"""Only the child may hold the GPU: the census of CUDA contexts in the evaluation's process tree."""

from pathlib import Path

from evaluator.harness import launch
from evaluator.harness.protocol import Observed
from tests.evaluator.test_harness_sandbox import run_script


def test_one_process_on_the_gpu_is_the_child_and_no_flag():
    seen = Observed()
    launch.census({4242}, seen)
    launch.census(set(), seen)
    assert seen.flags == []


def test_a_second_process_on_the_gpu_is_flagged():
    seen = Observed()
    launch.census({4243, 4242}, seen)
    assert [f["check"] for f in seen.flags] == ["gpu_process"]
    assert "4242, 4243" in seen.flags[0]["detail"]


def test_the_sandbox_remembers_every_process_of_the_tree(tmp_path: Path):
    # The child starts a helper that lives a moment: the census needs its id.
    helper = "import subprocess; subprocess.run(['sleep', '0.6'], check=True)"
    run = run_script(helper, tmp_path)
    assert run.returncode == 0, (tmp_path / "child.log").read_text()
    assert len(run.pids) >= 2

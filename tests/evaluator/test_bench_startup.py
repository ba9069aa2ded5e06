"""bench/gpu_startup.py reads `python -X importtime` as Python writes it."""

from tests.bench_scripts import bench_script


def _script():
    return bench_script("gpu_startup")


def test_the_slowest_imports_are_ranked_by_their_cumulative_time():
    importtime = "\n".join(
        [
            "import time: self [us] | cumulative | imported package",
            "import time:       120 |        120 |   _io",
            "import time:     17720 |    1008334 |   torch",
            "import time:       575 |    1153008 |   torch._dynamo",
            "some warning the interpreter printed",
            "import time:     11997 |    2193108 | evaluator.harness.child",
        ]
    )

    assert _script().slowest_imports(importtime, count=2) == [
        (2.193108, "evaluator.harness.child"),
        (1.153008, "torch._dynamo"),
    ]


def test_the_sandboxed_command_runs_python_with_the_childs_environment(tmp_path):
    argv, _ = _script().sandboxed(["-c", "pass"], tmp_path)

    assert argv[-2:] == ["-c", "pass"]
    if argv[0].endswith("bwrap"):
        setenv = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
        assert setenv["PYTHONDONTWRITEBYTECODE"] == "1"

"""Every expert's kernels compile for an H200 on every workload, public and hidden, on the CPU.

The interpreter accepts programs the GPU compiler rejects (seen on an H200:
selective_scan's plain float globals), and the GPU runs code paths the
interpreter never does (no fp32 upcast before tl.dot, the launch shapes of
132 SMs and of the full-size workloads). tests/catalog/gpu_compile.py runs
each expert's host code as on the GPU and compiles every launch with
Triton's sm_90 backend and ptxas, in a process of its own (it patches torch
and Triton). The installed Triton compiles; the H200 host may run another
version, so a pass here does not rule out a difference between the two.
"""

import pytest

from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs
from tests.catalog.drawn import load_drawn
from tests.catalog.script_lines import script_json_lines

TASKS = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR)]


def compile_task(slug: str, *args: str) -> list[dict]:
    return script_json_lines("gpu_compile", slug, *args)


@pytest.mark.slow
@pytest.mark.parametrize("slug", TASKS)
def test_every_kernel_the_expert_launches_compiles_for_sm90(slug):
    results = compile_task(slug)
    task = load_drawn(slug)
    assert [r["workload"] for r in results] == [w.name for w in task.workloads]
    failed = {r["workload"]: r["message"] for r in results if r["status"] != "ok"}
    assert failed == {}
    assert all(r["kernels"] for r in results), "a workload launched no kernel"


@pytest.mark.slow
def test_a_plain_float_global_the_interpreter_accepts_fails_to_compile(tmp_path):
    # selective_scan's expert as it first failed on an H200.
    source = (DEFAULT_CATALOG_DIR / "selective_scan" / "expert.py").read_text()
    constexpr = "LOG2E = tl.constexpr(1.4426950408889634)"
    assert constexpr in source
    broken = tmp_path / "expert.py"
    broken.write_text(source.replace(constexpr, "LOG2E = 1.4426950408889634"))
    task = load_drawn("selective_scan")
    timed = next(w.name for w in task.workloads if w.role == "timed")
    [result] = compile_task("selective_scan", str(broken), timed)
    assert result["status"] == "error" and "LOG2E" in result["message"], result


NEGATIVES = DEFAULT_CATALOG_DIR.parent / "tests" / "catalog" / "negatives"


@pytest.mark.slow
def test_every_naive_kernel_launches_grids_a_cuda_device_takes():
    # The interpreter runs any grid. On the H200 the naive sum and scan were refused at
    # launch ("invalid argument") on their 268M-element workloads: 65,536 and 524,288
    # programs on grid axis 1, where a CUDA device takes 65,535.
    lines = script_json_lines("gpu_compile", "--grids-only", str(NEGATIVES))
    assert {line["task"] for line in lines} == set(TASKS)
    refused = {(x["task"], x["workload"]): x.get("message") for x in lines if x["status"] != "ok"}
    assert refused == {}


def test_a_grid_a_cuda_device_refuses_is_named_with_its_axis(tmp_path):
    # A grid given as a function of the launch's arguments, as Triton resolves it.
    (tmp_path / "reduction_sum.py").write_text(
        "import torch, triton, triton.language as tl\n"
        "@triton.jit\n"
        "def _wide(out_ptr, n, BLOCK: tl.constexpr):\n"
        "    tl.store(out_ptr + tl.program_id(1), 1.0)\n"
        "class ModelNew(torch.nn.Module):\n"
        "    def __init__(self, dim=None):\n"
        "        super().__init__()\n"
        "    def forward(self, x):\n"
        "        out = torch.empty(70000, device=x.device)\n"
        "        grid = lambda meta: (1, triton.cdiv(meta['n'], meta['BLOCK']))\n"
        "        _wide[grid](out, 70000, BLOCK=1)\n"
        "        return out\n"
    )
    lines = script_json_lines("gpu_compile", "--grids-only", str(tmp_path))
    assert lines and all(line["status"] == "error" for line in lines)
    assert (
        "70,000 programs on axis 1, where a CUDA device takes at most 65,535"
        in (lines[0]["message"])
    )

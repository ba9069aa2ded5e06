"""Every reference.py and baseline.py computes on the device of its inputs.

The harness makes the inputs on the GPU and runs the reference there; a
tensor the forward pass creates without `device=` lands on the CPU and the
evaluation stops with a device mismatch, which the worker can only report as
its own fault. On a machine without a GPU the same mistake is caught by
making the CPU inputs first and then running the forward pass with `meta` as
the device of every tensor it constructs without naming one: mixing such a
tensor with the CPU inputs fails as mixing CPU and CUDA tensors does on a GPU
host. A constructor given tensors (a sparse tensor from its index tensors)
takes their device, as it does on a GPU host, and is left alone.
"""

import shutil

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

from evaluator.harness.workload import as_tuple, load_module, make_inputs, make_model
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs, load_task
from taskformat.spec import Mode
from tests.catalog.test_catalog_baselines import KNOWN_WRONG

CPU = torch.device("cpu")
CONSTRUCTORS = _device_constructors()
SIDES = [
    (p.name, side)
    for p in iter_task_dirs(DEFAULT_CATALOG_DIR)
    for side in ("reference", "baseline")
    if (p / f"{side}.py").is_file()
]
# Baselines that cannot run on the CPU at all (strict: the mark fails once they can).
PARAMS = [
    pytest.param(slug, side, marks=pytest.mark.xfail(reason=KNOWN_WRONG[slug], strict=True))
    if side == "baseline" and slug in KNOWN_WRONG
    else pytest.param(slug, side)
    for slug, side in SIDES
]


class _UnnamedDeviceIsMeta(TorchFunctionMode):
    """Tensors constructed from no tensor and with no `device=` are made on `meta`."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        from_tensors = any(isinstance(a, torch.Tensor) for a in args)
        if func in CONSTRUCTORS and kwargs.get("device") is None and not from_tensors:
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


def _forward_with_meta_default(task_dir, side: str) -> tuple:
    task = load_task(task_dir)
    reference = load_module(str(task_dir / "reference.py"), f"d2k_dev_ref_{task_dir.name}")
    module = (
        reference
        if side == "reference"
        else load_module(str(task_dir / f"{side}.py"), f"d2k_dev_{side}_{task_dir.name}")
    )
    workload = task.workloads_for(Mode.INTERPRET)[0]
    inputs = make_inputs(reference, workload.params, 1234, CPU)
    model = make_model(module.Model, reference, workload.params, 1234, CPU)
    with torch.no_grad(), _UnnamedDeviceIsMeta():
        return as_tuple(model(*inputs))


@pytest.mark.parametrize(("slug", "side"), PARAMS, ids=[f"{s}-{side}" for s, side in SIDES])
def test_the_forward_pass_creates_its_tensors_on_the_inputs_device(slug, side):
    outputs = _forward_with_meta_default(DEFAULT_CATALOG_DIR / slug, side)
    assert all(t.device == CPU for t in outputs if isinstance(t, torch.Tensor))


def _row_softmax_with_baseline(tmp_path, forward_body: str):
    task_dir = shutil.copytree(DEFAULT_CATALOG_DIR / "row_softmax", tmp_path / "row_softmax")
    (task_dir / "baseline.py").write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        + forward_body
    )
    return task_dir


def test_a_forward_pass_that_mixes_in_a_tensor_made_without_a_device_is_caught(tmp_path):
    task_dir = _row_softmax_with_baseline(
        tmp_path, "        return torch.softmax(x, dim=-1) * torch.ones(x.shape[-1])\n"
    )
    with pytest.raises(RuntimeError):
        _forward_with_meta_default(task_dir, "baseline")


def test_an_output_allocated_without_a_device_is_caught(tmp_path):
    task_dir = _row_softmax_with_baseline(
        tmp_path,
        "        out = torch.empty(x.shape, dtype=x.dtype)\n"
        "        return out.copy_(torch.softmax(x, dim=-1))\n",
    )
    (output,) = _forward_with_meta_default(task_dir, "baseline")
    assert output.device.type == "meta"

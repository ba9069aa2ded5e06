"""The child's in-process instruments: what the op recorder sees, and what counts as glue."""

import contextlib

import torch

from evaluator.harness import honesty


def test_pinning_a_host_tensor_is_glue_not_computation():
    # fused_adamw's expert pins its pointer table for an asynchronous copy to
    # the device: a copy into page-locked memory and a metadata query.
    recorder = honesty.OpRecorder()
    with recorder:
        table = torch.tensor([1, 2, 3], dtype=torch.int64)
        table.is_pinned()
        with contextlib.suppress(RuntimeError):  # a torch without a GPU cannot pin
            table.pin_memory()
    assert {"aten::pin_memory", "aten::_pin_memory", "aten::is_pinned"} <= recorder.ops
    assert honesty.disallowed_ops(recorder.ops) == []


def test_computation_next_to_glue_is_still_named():
    ops = ["aten::pin_memory", "aten::_pin_memory", "aten::is_pinned", "aten::copy_"]
    assert honesty.disallowed_ops([*ops, "aten::add", "aten::sqrt"]) == ["aten::add", "aten::sqrt"]

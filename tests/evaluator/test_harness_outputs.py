"""The harness's own means of reading outputs (evaluator/harness/outputs.py) and the guard."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator.harness import honesty, outputs


class _Mode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_the_copies_are_the_harness_s_own_and_carry_the_layout():
    x = torch.randn(4, 6)
    y = x * 2
    taken = outputs.take((y,), outputs.input_spans([x]))
    [copy] = taken.copies
    assert torch.equal(copy, y) and copy.data_ptr() != y.data_ptr()
    y.zero_()  # the submission's tensor changes later: the copy does not
    assert torch.equal(copy, x * 2)
    [layout] = taken.layouts
    assert layout.shape == (4, 6) and layout.strides == (6, 1) and layout.aliases == ()


def test_a_view_of_an_input_is_reported_as_an_alias_with_its_strides():
    x = torch.randn(4, 6)
    padded = torch.randn(8, 8)
    [view, inside] = outputs.take((x.t(), padded[:2, :2].clone()), outputs.input_spans([x])).layouts
    assert view.aliases == (0,) and view.strides == (1, 6)
    assert inside.aliases == ()
    # An output in the padding of an input's storage, outside the view, is in its storage.
    base = torch.randn(4, 8)
    [tail] = outputs.take(base[:, 6:], outputs.input_spans([base[:, :6]])).layouts
    assert tail.aliases == (0,)


class _Subclass(torch.Tensor):
    pass


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda: torch.randn(3).as_subclass(_Subclass), "not a plain torch.Tensor"),
        (lambda: [1.0], "builtins.float"),
        (lambda: torch.randn(3).to_sparse(), "not a dense strided tensor"),
    ],
)
def test_an_output_that_is_not_a_plain_dense_tensor_is_not_read(make, why):
    with pytest.raises(outputs.UnreadableOutput, match=why):
        outputs.take(make())


def test_an_output_with_attributes_of_its_own_is_not_read():
    y = torch.randn(3)
    y.note = "hooks could hide here"
    with pytest.raises(outputs.UnreadableOutput, match="attributes of its own"):
        outputs.take(y)


def test_a_mode_left_pushed_stops_the_read_and_only_the_harness_s_own_is_allowed():
    mine, theirs = _Mode(), _Mode()
    with mine:
        assert outputs.take(torch.ones(2), (), (mine,)).copies[0].tolist() == [1.0, 1.0]
        with theirs, pytest.raises(outputs.ModeLeftPushed):
            outputs.take(torch.ones(2), (), (mine,))
    with theirs, pytest.raises(outputs.ModeLeftPushed):
        outputs.take(torch.ones(2), (), (mine,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_raw_files_round_trip_without_pickle(tmp_path, dtype):
    values = (torch.randn(3, 5) * 10).to(dtype)
    empty = torch.empty(0, 4, dtype=dtype)
    path = tmp_path / "w.0.out"
    outputs.write_raw([values, empty], path)
    assert b"pickle" not in path.read_bytes() and b"torch._utils" not in path.read_bytes()
    back, back_empty = outputs.read_raw(path, torch.device("cpu"))
    assert back.dtype == dtype and torch.equal(back, values)
    assert back_empty.shape == (0, 4)


def test_outputs_of_mixed_widths_read_back_whatever_their_alignment_in_the_file(tmp_path):
    """Each output is a view of the one buffer the body is read into, or a copy where its
    bytes start off its element size (a bool or bf16 output of odd length before it)."""
    made = (
        torch.tensor([True, False, True]),
        torch.randn(3).to(torch.bfloat16),
        torch.arange(5, dtype=torch.int64) - 2**40,
        torch.randn(2, 3),
    )
    path = tmp_path / "w.0.out"
    digest = outputs.write_raw(made, path)
    back = outputs.read_raw(path, torch.device("cpu"), sha256=digest)
    assert [t.dtype for t in back] == [t.dtype for t in made]
    assert all(torch.equal(a, b) for a, b in zip(back, made, strict=True))
    path.write_bytes(path.read_bytes() + b"\0")  # one byte more than the header says
    with pytest.raises(outputs.OutputChanged):
        outputs.read_raw(path, torch.device("cpu"), sha256=digest)
    with pytest.raises(ValueError, match="does not match its header"):
        outputs.read_raw(path, torch.device("cpu"))


@pytest.mark.parametrize(
    "content",
    [b"not json\n", b'{"a": 1}\n', b'[{"shape": [2], "dtype": "float32", "bytes": 8}]\n\x00'],
)
def test_a_malformed_raw_file_is_a_value_error(tmp_path, content):
    path = tmp_path / "bad.out"
    path.write_bytes(content)
    with pytest.raises(ValueError):
        outputs.read_raw(path, torch.device("cpu"))


def test_the_guard_sees_any_change_to_torch_tensor_torch_and_builtins(monkeypatch):
    guard = honesty.PatchGuard()
    before = set(guard.patched())
    monkeypatch.setattr(torch.Tensor, "__getitem__", lambda self, i: 0, raising=False)
    monkeypatch.setattr(torch, "cat", lambda *a, **k: None)
    monkeypatch.setattr("builtins.breakpoint", lambda *a, **k: None)
    found = set(guard.patched()) - before
    assert found == {"torch.Tensor.__getitem__", "torch.cat", "builtins.breakpoint"}


def test_the_guard_sees_a_garbage_collector_callback():
    guard = honesty.PatchGuard()

    def callback(phase, info):
        return None

    gc.callbacks.append(callback)
    try:
        assert any(name.startswith("gc.callbacks") for name in guard.patched())
    finally:
        gc.callbacks.remove(callback)
    assert guard.patched() == []


def test_a_module_may_gain_a_submodule_but_a_class_may_not_gain_an_entry(monkeypatch):
    guard = honesty.PatchGuard()
    import types

    monkeypatch.setattr(torch, "d2k_new_submodule", types.ModuleType("x"), raising=False)
    assert guard.patched() == []
    monkeypatch.setattr(torch.Tensor, "d2k_new_method", lambda self: 0, raising=False)
    assert guard.patched() == ["torch.Tensor.d2k_new_method"]


@pytest.mark.slow
def test_no_audit_hook_can_be_added_after_the_harness_s_own():
    # In a process of its own: an audit hook cannot be removed. Python drops
    # the addition quietly when an earlier hook refuses it.
    code = (
        "import sys\n"
        "from evaluator.harness import honesty\n"
        "honesty.block_audit_hooks()\n"
        "sys.addaudithook(lambda event, args: event == 'open' and print('hook ran'))\n"
        "open(sys.executable, 'rb').close()\n"
        "print('opened')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert done.stdout.split() == ["opened"]


@pytest.mark.slow
def test_a_compiled_baseline_changes_nothing_the_guard_watches_once_torch_is_settled():
    # In a process of its own: TorchDynamo's first compile wraps torch.manual_seed
    # and nn.Module.__init__ once per process, the harness's settle_torch first.
    code = (
        "import torch\n"
        "from evaluator.harness import honesty\n"
        "honesty.settle_torch()\n"
        "guard = honesty.PatchGuard()\n"
        "torch.compile(lambda x: torch.sin(x) + 1, backend='eager')(torch.randn(8))\n"
        "print('patched:', guard.patched())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    assert "patched: []" in done.stdout, done.stdout + done.stderr[-2000:]


def test_torch_s_own_state_flipping_is_not_a_patch_but_code_in_its_place_is(monkeypatch):
    # torch.cuda._initialized turns True on the first CUDA call, after the snapshot.
    guard = honesty.PatchGuard()
    before = set(guard.patched())
    monkeypatch.setattr(torch.cuda, "_initialized", not torch.cuda._initialized)
    assert set(guard.patched()) - before == set()
    monkeypatch.setattr(torch.cuda, "_initialized", lambda: True)
    assert set(guard.patched()) - before == {"torch.cuda._initialized"}

"""Fingerprints of a call's outputs, and the judge's comparison of them with the reference's.

Their size and cost must not grow with the number of outputs, and a stale,
half-done or reshaped output must still mismatch.
"""

import dataclasses
import json
import math

import pytest
import torch

from evaluator.harness import fingerprints
from evaluator.harness.compare import fingerprint_matches
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Tolerance

TASK = dataclasses.replace(
    load_task(DEFAULT_CATALOG_DIR / "row_softmax"),
    tolerances={
        "default": Tolerance(atol=1e-5, rtol=1e-5, rel_l2=1e-5),
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2, rel_l2=1e-2),
    },
)
SEED = 4242


def many_outputs(count: int, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(64 + 7 * i, generator=generator) for i in range(count)]


def matches(outputs, expected) -> bool:
    return fingerprint_matches(fingerprints.fingerprint(outputs, seed=SEED), expected, SEED, TASK)


def test_the_size_of_a_fingerprint_does_not_grow_with_the_number_of_outputs():
    one = json.dumps(fingerprints.fingerprint([torch.cat(many_outputs(800))], seed=SEED))
    many = json.dumps(fingerprints.fingerprint(many_outputs(800), seed=SEED))
    assert len(many) < 1.1 * len(one) < 2000
    audit = fingerprints.fingerprint(many_outputs(800), seed=SEED, samples=1024)
    assert len(audit["values"]) == 1024


def test_positions_are_drawn_over_all_outputs_in_proportion_to_their_size():
    small, large = torch.zeros(10), torch.ones(990)
    places = fingerprints.sample_places([10, 990], seed=SEED, samples=1000)
    assert len(places) == 1000
    assert 980 <= sum(output == 1 for output, _ in places) < 1000
    assert all(0 <= index < (10, 990)[output] for output, index in places)
    values = fingerprints.fingerprint([small, large], seed=SEED, samples=1000)["values"]
    assert values == [float(output) for output, _ in places]


def test_empty_outputs_hold_no_position():
    places = fingerprints.sample_places([0, 5, 0, 3, 0], seed=SEED, samples=200)
    assert {output for output, _ in places} == {1, 3}


def test_one_transfer_from_the_device_per_fingerprint(monkeypatch):
    # The values and every output's norm come back in one `.cpu()`, never one read per output.
    transfers = []
    real_cpu = torch.Tensor.cpu
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self: transfers.append(1) or real_cpu(self))
    monkeypatch.setattr(torch.Tensor, "item", lambda self: pytest.fail("read per output"))
    monkeypatch.setattr(fingerprints, "sample_positions", lambda total, seed, samples: [3, 70])
    reading = fingerprints.read(many_outputs(300), seed=SEED)
    assert transfers == [1] and len(reading.norms) == 300


@pytest.mark.parametrize(
    ("spoil", "matching"),
    [
        (lambda outs: outs, True),
        (lambda outs: [o * (1 + 1e-7) for o in outs], True),
        # Stale: another call's answer.
        (lambda outs: many_outputs(len(outs), seed=1), False),
        # Half done: the second half of every output never written.
        (lambda outs: [torch.cat([o[: len(o) // 2], 0 * o[len(o) // 2 :]]) for o in outs], False),
        # Half the outputs never written (left as they were, or poisoned).
        (lambda outs: [o if i % 2 else torch.zeros_like(o) for i, o in enumerate(outs)], False),
        (lambda outs: [*outs[:-1], torch.full_like(outs[-1], math.nan)], False),
        # The same elements in another shape, or fewer outputs.
        (lambda outs: [*outs[:-1], outs[-1].reshape(-1, 1)], False),
        (lambda outs: outs[:-1], False),
    ],
    ids=["honest", "rounding", "stale", "half done", "half the outputs", "nan", "shape", "count"],
)
def test_the_judge_matches_honest_outputs_only(spoil, matching):
    expected = tuple(many_outputs(300))
    assert matches(spoil(list(expected)), expected) is matching


def test_a_skipped_share_of_the_work_is_caught_in_almost_every_call():
    # A quarter of every output skipped: missed with probability 0.75^32 per call.
    expected = tuple(many_outputs(300))
    lazy = [o.clone() for o in expected]
    for o in lazy:
        o[: len(o) // 4] = 0.0
    caught = sum(
        not fingerprint_matches(fingerprints.fingerprint(lazy, seed=s), expected, s, TASK)
        for s in range(200)
    )
    assert caught == 200


def test_each_dtype_is_compared_with_its_own_tolerance_and_integers_exactly():
    expected = (
        torch.linspace(1, 2, 500),
        torch.linspace(1, 2, 500).to(torch.bfloat16),
        torch.arange(500),
    )
    near = (expected[0] * (1 + 1e-6), expected[1] * (1 + 4e-3), expected[2])
    assert matches(near, expected)
    # bfloat16's tolerance for the fp32 output is too loose.
    off = (expected[0] * (1 + 4e-3), *expected[1:])
    assert not matches(off, expected)
    assert not matches((*expected[:2], expected[2] + 1), expected)


@pytest.mark.parametrize(
    "forge",
    [
        lambda fp: [fp],
        lambda fp: fp | {"values": fp["values"][:-1]},
        lambda fp: fp | {"values": ["0.5"] * len(fp["values"])},
        lambda fp: fp | {"values": [None] * len(fp["values"])},
        lambda fp: fp | {"values": "many"},
        lambda fp: fp | {"nonfinite_outputs": 1},
        lambda fp: fp | {"layout": "0" * 16},
        lambda fp: {k: v for k, v in fp.items() if k != "numel"},
    ],
)
def test_a_forged_fingerprint_matches_nothing_and_raises_nothing(forge):
    expected = tuple(many_outputs(5))
    fp = fingerprints.fingerprint(expected, seed=SEED)
    assert fingerprint_matches(fp, expected, SEED, TASK)
    assert not fingerprint_matches(forge(fp), expected, SEED, TASK)

"""The clean reference under a shared GPU lease: measured once, reused on its GPU for a
while by the evaluations of the same task, never across GPUs, tasks or a failed run."""

import json
import threading
import time
from pathlib import Path

import pytest

from evaluator.harness import cleanreference, gpulease
from evaluator.harness.job import CleanReference, TimingSettings
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Mode

SOFTMAX = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
LAYERNORM = load_task(DEFAULT_CATALOG_DIR / "layernorm_fwd")


@pytest.fixture
def measured(monkeypatch):
    """Each clean run the harness starts (its task's slug), answering `answer`."""
    runs: list[str] = []
    answer = {"clean": CleanReference(ref_median_ms={"w": 0.5})}

    def clean_reference_times(task, *args):
        runs.append(task.slug)
        return answer["clean"]

    monkeypatch.setattr(cleanreference, "clean_reference_times", clean_reference_times)
    return runs, answer


def clean(task=SOFTMAX, gpu="GPU-aaaa", settings=None):
    return cleanreference.reusable_clean_reference(
        task, Mode.CUDA, settings or TimingSettings(), Path("/nonexistent"), 60.0, None, gpu
    )


def test_under_a_shared_lease_a_clean_measurement_is_reused_on_its_gpu(tmp_path, measured):
    runs, _ = measured
    with gpulease.joined(tmp_path / "lease"):
        first, second = clean(), clean()
        clean(gpu="GPU-bbbb")  # another GPU: its own measurement
        clean(task=LAYERNORM)  # another task
        clean(settings=TimingSettings(budget_s=0.5))  # other timing settings
    assert runs == ["row_softmax", "row_softmax", "layernorm_fwd", "row_softmax"]
    assert first.age_s == 0.0 and not first.reused
    assert second.ref_median_ms == {"w": 0.5} and second.reused
    assert 0.0 <= second.age_s <= cleanreference.REUSE_S
    stored = list((tmp_path / "lease" / "clean-reference").glob("*.json"))
    assert len(stored) == 4
    assert (tmp_path / "lease" / "clean-reference").stat().st_mode & 0o077 == 0


def test_an_old_or_failed_measurement_is_measured_again(tmp_path, measured, monkeypatch):
    runs, answer = measured
    with gpulease.joined(tmp_path / "lease"):
        answer["clean"] = CleanReference(ref_median_ms={"w": 0.9}, problem="did not finish")
        clean()
        answer["clean"] = CleanReference(ref_median_ms={"w": 0.5})
        clean()  # the failed run was not kept
        (stored,) = (tmp_path / "lease" / "clean-reference").glob("*.json")
        kept = json.loads(stored.read_text())
        stored.write_text(json.dumps({**kept, "at": kept["at"] - cleanreference.REUSE_S - 1}))
        clean()  # too old
        stored.write_text("not json")
        clean()  # unreadable
        assert clean().age_s >= 0.0
    assert len(runs) == 4


def test_without_a_shared_lease_or_a_gpu_name_every_evaluation_measures(tmp_path, measured):
    runs, _ = measured
    clean(), clean()  # one evaluation on its GPU (no lease folder)
    with gpulease.joined(tmp_path / "lease"):
        clean(gpu=""), clean(gpu="")
    assert len(runs) == 4


def test_evaluations_needing_one_measurement_at_once_take_turns(tmp_path, monkeypatch):
    # A paired campaign's two kernels of a task, evaluated side by side: the second asks
    # while the first is measuring, waits for it, and reuses it.
    runs: list[str] = []
    measuring = threading.Event()

    def clean_reference_times(task, *args):
        runs.append(task.slug)
        measuring.set()
        time.sleep(0.5)
        return CleanReference(ref_median_ms={"w": 0.5})

    monkeypatch.setattr(cleanreference, "clean_reference_times", clean_reference_times)
    answers: list[CleanReference] = []
    with gpulease.joined(tmp_path / "lease"):
        first = threading.Thread(target=lambda: answers.append(clean()))
        first.start()
        assert measuring.wait(30)
        second = clean()
        first.join(30)
    assert runs == ["row_softmax"]
    assert answers[0].age_s == 0.0 and not answers[0].reused
    # Taken at once, its age may round to 0: the verdict says it was reused all the same.
    assert second.ref_median_ms == {"w": 0.5} and second.reused and second.age_s >= 0.0


def test_a_measurement_that_failed_is_taken_up_by_the_one_that_waited(tmp_path, monkeypatch):
    # Nothing is kept from a failed run: the evaluation that waited measures itself.
    results = iter(
        [CleanReference(ref_median_ms={}, problem="did not finish"),
         CleanReference(ref_median_ms={"w": 0.5})]
    )  # fmt: skip
    measuring = threading.Event()
    runs: list[str] = []

    def clean_reference_times(task, *args):
        runs.append(task.slug)
        measuring.set()
        time.sleep(0.3)
        return next(results)

    monkeypatch.setattr(cleanreference, "clean_reference_times", clean_reference_times)
    with gpulease.joined(tmp_path / "lease"):
        first = threading.Thread(target=clean)
        first.start()
        assert measuring.wait(30)
        second = clean()
        first.join(30)
    assert len(runs) == 2 and second.ref_median_ms == {"w": 0.5}
    assert second.age_s == 0.0 and not second.reused

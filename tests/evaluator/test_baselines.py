"""Importing the experts' GPU verdicts (import_baselines) and writing docs/baselines.md.

Every GPU number below is a test fixture, invented for these tests: the real file is
produced on a GPU by `bench/gpu_check.py experts` and committed as docs/baselines.json.
"""

import gzip
import hashlib
import json
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from evaluator.models import Evaluation, EvaluationStatus
from evaluator.services import EXPERT_USERNAME, BaselineImportError, baseline_import
from submissions.models import Submission
from tests.bench_scripts import bench_script
from tests.evaluator.fake_cli import verdict_dict, workload_dict
from tests.factories import TaskVersionFactory, WorkloadFactory

ROOT = Path(__file__).resolve().parents[2]
baselines_md = bench_script("baselines_md")

pytestmark = pytest.mark.django_db

FIXTURE_GPU = "Test Fixture GPU (not a measurement)"
EXPERT_SOURCE = "import triton\n\nclass ModelNew:\n    pass\n"


def gpu_workload(name, *, ref_ms, ms, role="timed", hidden=False, sol=0.5, ref_host_bound=0):
    return workload_dict(
        name,
        role=role,
        hidden=hidden,
        median_ms=ms,
        ref_median_ms=ref_ms,
        speedup=ref_ms / ms,
        sol_fraction=sol,
        achieved_tflops=12.5,
        achieved_tbps=3.25,
        timing={
            "median_ms": ms,
            "iqr_ms": ms / 100,
            "min_ms": ms * 0.98,
            "calls": 200,
            "ref_median_ms": ref_ms,
            "ref_iqr_ms": ref_ms / 100,
            "ref_calls": 200,
            "cold_start_ms": 40.0,
            "ref_host_bound_calls": ref_host_bound,
        },
    )


def gpu_verdict(task="row_softmax", *, workloads=None, **extra):
    """A fixture of one verdict as `python -m evaluator check --mode cuda --json` prints it."""
    if workloads is None:
        workloads = [
            gpu_workload("bf16_4096x4096", ref_ms=0.2, ms=0.1, sol=0.8),
            gpu_workload("fp32_1024x50000", ref_ms=0.9, ms=0.3, sol=0.7),
            gpu_workload("hidden_tail", ref_ms=0.1, ms=0.1, role="untimed", hidden=True),
        ]
    environment = {
        "gpu": FIXTURE_GPU,
        "device": FIXTURE_GPU,
        "driver": "000.00-fixture",
        "torch": "2.13.0+fixture",
        "triton": "3.9.0-fixture",
        "cuda": "13.0",
    }
    fields = {"task": task, "mode": "cuda", "environment": environment, "wall": 12.0, **extra}
    return verdict_dict("correct", workloads=workloads, **fields)


@pytest.fixture
def version():
    version = TaskVersionFactory(task__slug="row_softmax", expert_source=EXPERT_SOURCE)
    WorkloadFactory(version=version, name="check_small", role="check", position=0)
    WorkloadFactory(version=version, name="bf16_4096x4096", role="timed", position=1)
    WorkloadFactory(version=version, name="fp32_1024x50000", role="timed", position=2)
    WorkloadFactory(version=version, name="hidden_tail", role="untimed", position=3)
    return version


def test_import_creates_a_public_expert_submission_with_its_gpu_evaluation(version):
    report = baseline_import(data={"row_softmax": gpu_verdict()}, source_label="baselines.json")

    [line] = report.lines
    assert line.outcome == "created"
    assert "geomean speedup 2.45x over 2 timed workloads" in str(line)
    expert = get_user_model().objects.get(username=EXPERT_USERNAME)
    assert not expert.is_active
    assert not expert.has_usable_password()
    submission = Submission.objects.get(owner=expert)
    assert submission.task_version == version
    assert submission.source == EXPERT_SOURCE
    assert submission.sha256 == Submission.digest(EXPERT_SOURCE)
    assert submission.is_public
    evaluation = submission.evaluations.get()
    assert evaluation.pk == line.evaluation_id
    assert evaluation.status == EvaluationStatus.CORRECT
    assert evaluation.mode == "cuda"
    assert evaluation.environment["gpu"] == FIXTURE_GPU
    assert evaluation.finished_at is not None
    assert evaluation.worker.startswith("import sha256:")
    assert evaluation.worker.endswith(" baselines.json")
    results = {r.name: r for r in evaluation.results.all()}
    assert set(results) == {"bf16_4096x4096", "fp32_1024x50000", "hidden_tail"}
    assert results["fp32_1024x50000"].speedup == pytest.approx(3.0)
    assert results["hidden_tail"].hidden
    assert results["bf16_4096x4096"].timing["calls"] == 200


def test_import_is_idempotent_for_the_same_verdict_and_version(version):
    data = {"row_softmax": gpu_verdict()}
    first = baseline_import(data=data, source_label="a.json")

    again = baseline_import(data=json.loads(json.dumps(data)), source_label="b.json")

    assert [line.outcome for line in again.lines] == ["unchanged"]
    assert again.lines[0].evaluation_id == first.lines[0].evaluation_id
    assert Submission.objects.count() == 1
    assert Evaluation.objects.count() == 1
    assert get_user_model().objects.filter(username=EXPERT_USERNAME).count() == 1


def test_a_new_verdict_adds_an_evaluation_to_the_same_expert_submission(version):
    baseline_import(data={"row_softmax": gpu_verdict()}, source_label="a.json")

    report = baseline_import(
        data={"row_softmax": gpu_verdict(message="re-measured")}, source_label="a.json"
    )

    assert [line.outcome for line in report.lines] == ["created"]
    assert Submission.objects.count() == 1
    assert Evaluation.objects.count() == 2


def test_a_new_task_version_gets_its_own_expert_submission(version):
    baseline_import(data={"row_softmax": gpu_verdict()}, source_label="a.json")
    newer = TaskVersionFactory(task=version.task, expert_source=EXPERT_SOURCE + "# v2\n")
    for workload in version.workloads.all():
        WorkloadFactory(version=newer, name=workload.name, role=workload.role)

    baseline_import(data={"row_softmax": gpu_verdict()}, source_label="a.json")

    assert Submission.objects.filter(task_version=newer, source=newer.expert_source).count() == 1
    assert Evaluation.objects.count() == 2


def test_unknown_slugs_are_reported_and_skipped(version):
    data = {"no_such_task": gpu_verdict("no_such_task"), "row_softmax": gpu_verdict()}

    report = baseline_import(data=data, source_label="a.json")

    assert [(line.slug, line.outcome) for line in report.lines] == [
        ("no_such_task", "unknown task"),
        ("row_softmax", "created"),
    ]
    assert Evaluation.objects.count() == 1


def test_a_verdict_for_other_workloads_than_the_current_versions_is_skipped(version):
    stale = gpu_verdict(workloads=[gpu_workload("old_shape", ref_ms=1.0, ms=0.5)])

    report = baseline_import(data={"row_softmax": stale}, source_label="a.json")

    [line] = report.lines
    assert line.outcome == "skipped"
    assert "old_shape" in line.detail and "bf16_4096x4096" in line.detail
    assert not Evaluation.objects.exists()


def test_a_verdict_that_measured_other_content_is_skipped(version):
    stale = gpu_verdict(task_hash="e" * 64)
    report = baseline_import(data={"row_softmax": stale}, source_label="baselines.json")
    assert report.count("skipped") == 1
    assert "measured other content than v" in str(report)
    assert not Evaluation.objects.exists()

    current = gpu_verdict(task_hash=version.content_hash)
    report = baseline_import(data={"row_softmax": current}, source_label="baselines.json")
    assert report.count("created") == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mode": "interpret"}, "produced in interpret mode, not on a GPU"),
        ({"mode": ""}, "produced in no mode"),
        ({"environment": {"device": "CPU (Triton interpreter)"}}, "does not name the GPU"),
        ({"environment": {"driver": "570.00"}}, "does not name the GPU"),
        ({"task": "other_task"}, "is a verdict for task 'other_task'"),
        ({"status": "cli_error"}, "unknown status 'cli_error'"),
    ],
)
def test_non_gpu_or_unreadable_verdicts_are_refused_and_nothing_is_imported(
    version, change, message
):
    data = {"row_softmax": gpu_verdict(), "layernorm_fwd": gpu_verdict("layernorm_fwd")}
    data["layernorm_fwd"].update(change)

    with pytest.raises(BaselineImportError, match=message):
        baseline_import(data=data, source_label="a.json")

    assert not Evaluation.objects.exists()
    assert not get_user_model().objects.filter(username=EXPERT_USERNAME).exists()


def test_a_file_that_is_not_an_object_is_refused():
    with pytest.raises(BaselineImportError, match="not a JSON object"):
        baseline_import(data=[gpu_verdict()], source_label="a.json")


# --- the management command ---------------------------------------------------------


def write_json(tmp_path, data) -> Path:
    path = tmp_path / "baselines.json"
    path.write_text(json.dumps(data))
    return path


def test_command_prints_one_line_per_task_and_is_idempotent(version, tmp_path, capsys):
    path = write_json(tmp_path, {"row_softmax": gpu_verdict(), "gone": gpu_verdict("gone")})

    call_command("import_baselines", str(path))
    call_command("import_baselines", str(path))

    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("row_softmax: created (evaluation #")
    assert f"correct on {FIXTURE_GPU}" in out[0]
    assert out[1] == "gone: unknown task: no such task in the catalog"
    assert out[2] == f"1 created, 2 in {path}"
    assert out[3].startswith("row_softmax: unchanged")
    assert out[5] == f"0 created, 2 in {path}"
    assert Evaluation.objects.count() == 1


def test_command_refuses_an_interpret_mode_verdict_with_a_sentence(version, tmp_path):
    path = write_json(tmp_path, {"row_softmax": gpu_verdict(mode="interpret")})

    with pytest.raises(CommandError) as caught:
        call_command("import_baselines", str(path))

    assert str(caught.value) == (
        "The verdict for 'row_softmax' was produced in interpret mode, not on a GPU "
        "(cuda mode): the portal shows only real GPU numbers. "
        f"Nothing was imported from {path}."
    )
    assert not Evaluation.objects.exists()


@pytest.mark.parametrize("content", [None, "{not json"])
def test_command_refuses_a_missing_or_broken_file(tmp_path, content):
    path = tmp_path / "baselines.json"
    if content is not None:
        path.write_text(content)

    with pytest.raises(CommandError, match=r"Cannot read .*baselines\.json as JSON"):
        call_command("import_baselines", str(path))


# --- bench/baselines_md.py ------------------------------------------------------------


def md_fixture() -> dict:
    gemm = gpu_verdict(
        "gemm_bf16",
        workloads=[gpu_workload("bf16_8192", ref_ms=1.0, ms=1.25, sol=0.6)],
    )
    broken = {"status": "cli_error", "message": "no GPU here", "workloads": [], "flags": []}
    return {"row_softmax": gpu_verdict(), "gemm_bf16": gemm, "topk_rows": broken}


def test_markdown_has_a_row_per_public_timed_workload_with_its_numbers():
    text = baselines_md.render(md_fixture(), source="docs/baselines.json")

    assert "| `bf16_4096x4096` | 200.0 | 100.0 | 2.00× | 80.0 | 12.50 | 3.25 |" in text
    assert "| `fp32_1024x50000` | 900.0 | 300.0 | 3.00× | 70.0 | 12.50 | 3.25 |" in text
    assert "| `bf16_8192` | 1,000.0 | 1,250.0 | 0.80× | 60.0 | 12.50 | 3.25 |" in text
    assert "hidden_tail" not in text
    assert f"| {FIXTURE_GPU} | 000.00-fixture | 13.0 | 2.13.0+fixture | 3.9.0-fixture |" in text
    assert "`python bench/gpu_check.py experts --out gpu-results`" in text
    assert "`python manage.py import_baselines docs/baselines.json`" in text


def test_markdown_gives_each_tasks_geomean_and_says_when_the_expert_is_slower():
    text = baselines_md.render(md_fixture(), source="docs/baselines.json")

    assert "| `row_softmax` | correct | — | 2 | 2.45× | 74.8% |" in text
    assert "Task geomean speedup: 2.45×." in text
    assert (
        "Task geomean speedup: 0.80× (slower than the baseline's library call: the expert "
        "reaches 80% of its speed and 60% of the device's speed of light)." in text
    )
    assert "Timed workloads: 3 over 2 tasks." in text
    assert "Geometric mean over the 2 correct tasks: 1.40×." in text
    assert "- `topk_rows`: cli_error (mode —) no GPU here" in text


def test_markdown_marks_a_baseline_bound_by_its_host_and_says_what_that_means():
    data = md_fixture()
    data["gemm_bf16"]["workloads"] = [
        gpu_workload("bf16_8192", ref_ms=1.0, ms=1.25, sol=0.6, ref_host_bound=101),
        gpu_workload("bf16_4096", ref_ms=1.0, ms=1.25, sol=0.6, ref_host_bound=100),
    ]

    text = baselines_md.render(data, source="docs/baselines.json")

    # more than half of its 200 calls: marked; exactly half: not
    assert "| `bf16_8192` | 1,000.0 † | 1,250.0 |" in text
    assert "| `bf16_4096` | 1,000.0 | 1,250.0 |" in text
    assert (
        "† Host-bound baseline: timed calls that outlasted their launch cover, "
        "`bf16_8192` 101 of 200." in text
    )
    assert "Baselines bound by their host (marked † below): `gemm_bf16`." in text
    assert "row_softmax` 1" not in text


def test_markdown_without_a_host_bound_baseline_says_nothing_about_it():
    text = baselines_md.render(md_fixture(), source="docs/baselines.json")

    assert "†" not in text
    assert "bound by their host" not in text


def test_markdown_names_the_file_each_expert_was_timed_against():
    data = md_fixture()
    data["gemm_bf16"]["timed_against"] = "baseline.py"
    text = baselines_md.render(data, source="docs/baselines.json")

    assert "| `gemm_bf16` | correct | `baseline.py` | 1 | 0.80× | 60.0% |" in text
    assert "| Workload | Baseline µs | Expert µs |" in text


def test_markdown_says_per_task_whether_the_expert_meets_the_catalogs_bar():
    data = md_fixture()
    data["gemm_bf16"]["timed_against"] = "baseline.py"
    # 12.5 TFLOP/s of 20 is a larger share than 3.25 TB/s of 10: bound by FLOPs.
    data["gemm_bf16"]["environment"]["ceilings"] = {"peak_tflops_bf16": 20.0, "peak_tbps": 10.0}

    text = baselines_md.render(data, source="docs/baselines.json")

    assert "| Geomean SOL | Catalog bar |" in text
    assert (
        "| `row_softmax` | correct | — | 2 | 2.45× | 74.8% | Meets the catalog's bar: beats "
        "its baseline (geomean 2.45×). |"
    ) in text
    assert (
        "| 60.0% | Below the catalog's bar: 0.80× of its baseline's speed (`baseline.py`), "
        "under the 90% asked of a compute-bound task; 60% of speed of light on its largest "
        "workload by FLOPs (`bf16_8192`). |"
    ) in text


def test_markdown_script_writes_the_file_and_names_the_command(tmp_path):
    source = write_json(tmp_path, md_fixture())
    out = tmp_path / "baselines.md"

    assert baselines_md.main([str(source), "--out", str(out), "--command", "make gpu"]) == 0

    text = out.read_text()
    assert text.startswith("# Expert baselines\n")
    assert "Produced by: `make gpu`" in text


def test_markdown_lists_the_memory_bound_experts_traffic_against_their_minimum():
    counted = gpu_workload("bf16_4096x4096", ref_ms=0.2, ms=0.1)
    counted["counters"] = {
        "min_bytes": 67_108_864,
        "dram_read_bytes": 33_554_432,
        "dram_write_bytes": 2_048,
        "l2_write_bytes": 33_554_432,
        "traffic_ratio": 1.0,
    }
    compute = gpu_workload("bf16_8192", ref_ms=1.0, ms=1.25)
    compute["achieved_tflops"] = 600.0  # 185 FLOP a byte: bound by the tensor cores
    data = {
        "row_softmax": gpu_verdict(workloads=[counted]),
        "gemm_bf16": gpu_verdict("gemm_bf16", workloads=[compute]),
    }
    for verdict in data.values():
        verdict["environment"]["ceilings"] = {"peak_tflops_bf16": 700.0, "peak_tbps": 4.4}

    text = baselines_md.render(data, source="docs/baselines.json")

    section = text.split("## DRAM traffic of the memory-bound experts")[1].split("\n## ")[0]
    # Written is the larger of DRAM writes and L2 writes: the output left in the L2 counts.
    assert "| `row_softmax` | `bf16_4096x4096` | 67.1 | 33.6 | 33.6 | 1.00× |" in section
    assert "gemm_bf16" not in section


def test_markdown_names_the_catalog_tasks_the_file_has_no_verdict_for():
    text = baselines_md.render({"row_softmax": gpu_verdict()}, source="docs/baselines.json")
    absent = text.split("## Not in this file")[1]
    assert "`gemm_bf16`" in absent and "`row_softmax`" not in absent


def test_markdown_scores_each_experts_properties_with_the_portals_formula(monkeypatch):
    from scoring.formulas import PropertyRow

    rows = [
        PropertyRow("max_subtraction", "L1", 1.0),
        PropertyRow("online_normalizer", "L1", 2.0, ("max_subtraction",)),
        PropertyRow("single_pass", "L2", 3.0),
        PropertyRow("looped", "L2", 1.0, ("online_normalizer",)),
        PropertyRow("exp2", "L3", 1.0),
        PropertyRow("vector_loads", "L3", 1.0),
    ]
    monkeypatch.setattr(baselines_md, "property_rows", lambda slug: rows)
    implemented = {"online_normalizer": False, "vector_loads": None}
    properties = [
        {"key": r.key, "level": r.level, "implemented": implemented.get(r.key, True)} for r in rows
    ]
    data = md_fixture()
    data["row_softmax"]["properties"] = properties
    data["flash_decoding"] = gpu_verdict("flash_decoding")
    data["flash_decoding"]["status"] = "incorrect"
    data["flash_decoding"]["properties"] = [{**p, "implemented": True} for p in properties]

    text = baselines_md.render(data, source="docs/baselines.json")

    section = text.split("## Implementation score on the H200")[1].split("\n## ")[0]
    # L1 1 of 3, L2 3 of 4 (`looped` depends on the missing normalizer), L3 1 of 2,
    # combined 5 of 9; an incorrect kernel earns nothing, as on the portal.
    assert (
        "| `row_softmax` | 33 | 75 | 50 | 56 | `online_normalizer`, "
        "`vector_loads` (not assessed) |" in section
    )
    assert "| `flash_decoding` | 0 | 0 | 0 | 0 | all (incorrect: no credit) |" in section
    assert "| 2 tasks, pooled | 17 | 38 | 25 | 28 | |" in section
    assert "without property assessments: `gemm_bf16`." in section


def test_the_naive_kernels_scores_stand_beside_the_experts_from_their_source():
    # The naive GEMM multiplies on the CUDA cores: nothing of the guidance, 0; the naive
    # transpose reads and writes once (`single_pass`, weight 1 of 10), 10.
    assert baselines_md.naive_score("gemm_bf16") == "0"
    assert baselines_md.naive_score("transpose_2d") == "10"
    assert baselines_md.naive_score("no_such_task") == "—"


# -- the committed GPU file ------------------------------------------------------------


def test_the_committed_gpu_baselines_import_against_the_committed_catalog():
    # docs/baselines.json is a real H200 run; `./dev serve` imports it. Every entry is
    # imported, or skipped because a catalog edit changed its task's measured content
    # since; docs/baselines.md names exactly those, and the portal shows no GPU figure
    # for them until their experts are re-measured.
    from task_catalog.services import catalog_load
    from taskformat.package import DEFAULT_CATALOG_DIR

    catalog_load(directory=DEFAULT_CATALOG_DIR)
    data = json.loads((ROOT / "docs" / "baselines.json").read_text())
    report = baseline_import(data=data, source_label="docs/baselines.json")
    assert data and report.count("created") + report.count("skipped") == len(data), str(report)
    skipped = {line.slug for line in report.lines if line.outcome == "skipped"}
    assert all(
        "measured other content" in line.detail
        for line in report.lines
        if line.outcome == "skipped"
    ), str(report)
    assert skipped == set(baselines_md.stale_tasks(data))
    evaluations = Evaluation.objects.filter(submission__owner__username=EXPERT_USERNAME)
    assert evaluations.count() == len(data) - len(skipped)
    assert {e.status for e in evaluations} <= {EvaluationStatus.CORRECT}
    assert all("H200" in e.environment.get("gpu", "") for e in evaluations)


def test_the_committed_baselines_page_is_generated_from_the_committed_file():
    text = (ROOT / "docs" / "baselines.md").read_text()
    produced_by = next(line for line in text.splitlines() if line.startswith("- Produced by: `"))
    command = produced_by.removeprefix("- Produced by: `").split("` (file ")[0]
    data = json.loads((ROOT / "docs" / "baselines.json").read_text())
    # The naive kernels' GPU verdicts, where the page names a file of them.
    this_page = next(line for line in text.splitlines() if line.startswith("- This page: `"))
    naive_source = this_page.split(" --naive ")[1].split()[0] if " --naive " in this_page else ""
    naive = (
        json.loads(gzip.decompress((ROOT / naive_source).read_bytes())) if naive_source else None
    )
    assert text == baselines_md.render(
        data,
        source="docs/baselines.json",
        command=command,
        naive=naive,
        naive_source=naive_source,
    )


def test_the_naive_kernels_gpu_verdicts_are_scored_as_the_portal_scores_them(tmp_path):
    # A correct naive transpose that reads and writes once earns `single_pass` (10); an
    # incorrect naive kernel earns nothing whatever its properties say, and its verdict
    # stands beside its 0; a task with no naive GPU verdict keeps its source score.
    def assessed(slug: str, verdict: dict, implemented) -> dict:
        verdict["properties"] = [
            {"key": r.key, "level": r.level, "implemented": implemented(r.key)}
            for r in baselines_md.property_rows(slug)
        ]
        return verdict

    experts = {
        slug: assessed(slug, gpu_verdict(slug), lambda key: True)
        for slug in ("gemm_bf16", "row_softmax", "transpose_2d")
    }
    wrong = gpu_verdict("row_softmax")
    wrong["status"] = "incorrect"
    naive = {
        "transpose_2d": assessed(
            "transpose_2d", gpu_verdict("transpose_2d"), lambda key: key == "single_pass"
        ),
        "row_softmax": assessed("row_softmax", wrong, lambda key: True),
        # A verdict of another kernel than the file's now: not the file's score.
        "gemm_bf16": {
            **assessed("gemm_bf16", gpu_verdict("gemm_bf16"), lambda key: True),
            "source_sha256": "0" * 64,
        },
    }
    kernel = ROOT / "tests" / "catalog" / "negatives" / "transpose_2d.py"
    naive["transpose_2d"]["source_sha256"] = hashlib.sha256(kernel.read_bytes()).hexdigest()
    path = tmp_path / "without.json.gz"
    path.write_bytes(gzip.compress(json.dumps(naive).encode()))
    out = tmp_path / "baselines.md"

    source = str(write_json(tmp_path, experts))
    assert baselines_md.main([source, "--naive", str(path), "--out", str(out)]) == 0

    text = out.read_text()
    section = text.split("## Implementation score on the H200")[1].split("\n## ")[0]
    assert "| Naive kernel |" in section and "scored it on the GPU" in section
    assert "| `transpose_2d` | 100 | 100 | 100 | 100 | — | 10 |" in section
    assert re.search(r"\| `row_softmax` \|[^\n]*\| 0 \(incorrect\) \|", section)
    assert re.search(r"\| `gemm_bf16` \|[^\n]*\| 0 \(source\) \|", section)
    assert f"--naive {path} --out docs/baselines.md" in text


def test_an_unreadable_naive_file_is_refused_with_a_sentence(tmp_path, capsys):
    broken = tmp_path / "without.json.gz"
    broken.write_bytes(b"not gzip")
    source = str(write_json(tmp_path, md_fixture()))
    with pytest.raises(SystemExit) as exit_info:
        baselines_md.main([source, "--naive", str(broken)])
    assert exit_info.value.code == 2
    assert f"cannot read {broken} as JSON" in capsys.readouterr().err

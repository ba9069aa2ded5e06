import importlib
import re
import shutil
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.conf import settings
from django.core.exceptions import ValidationError

from task_catalog.models import DesignProperty, Guidance, Task, TaskVersion, Workload
from task_catalog.services import (
    LoadAction,
    catalog_export,
    catalog_load,
    task_version_update,
    task_version_write_package,
)
from taskformat.hidden import hidden_declaration_dict
from taskformat.package import (
    DEFAULT_CATALOG_DIR,
    TaskPackageError,
    load_task,
    measured_content,
    measured_content_hash,
)
from tests.factories import SubmissionFactory, WorkloadFactory

pytestmark = pytest.mark.django_db

SOURCE = Path(settings.BASE_DIR) / "catalog" / "row_softmax"


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    directory = tmp_path / "catalog"
    shutil.copytree(SOURCE, directory / "row_softmax")
    return directory


def load(directory: Path) -> dict[str, str]:
    return {r.slug: r.action for r in catalog_load(directory=directory).results}


def test_load_creates_task_version_workloads_guidance_and_properties(catalog):
    assert load(catalog) == {"row_softmax": LoadAction.CREATED}

    spec = load_task(catalog / "row_softmax")
    task = Task.objects.get(slug="row_softmax")
    version = task.current_version
    assert version.number == 1
    assert version.reference_source == spec.reference_source
    assert version.tolerances["bfloat16"] == {"atol": 1e-3, "rtol": 1.6e-2, "rel_l2": 8e-3}
    assert [w.name for w in version.workloads.all()] == [w.name for w in spec.workloads]
    # The hidden workloads are stored as their declaration, never as workloads.
    assert not version.workloads.filter(hidden=True).exists()
    assert not version.workloads.filter(role=Workload.Role.UNTIMED).exists()
    assert version.hidden_draws == hidden_declaration_dict(spec.hidden)
    assert version.hidden_draws["cuda"] and version.hidden_draws["interpret"]
    assert version.workloads.get(name="bf16_16384x1024").bytes == 2 * 16384 * 1024 * 2
    assert sorted(g.level for g in task.guidance.all()) == ["L1", "L2", "L3"]
    assert task.guidance.get(level="L3").depends_on == ["L1", "L2"]
    assert task.properties.count() == len(spec.properties)


def test_load_is_idempotent(catalog):
    load(catalog)
    stamps = {
        "task": Task.objects.get().updated_at,
        "guidance": sorted(Guidance.objects.values_list("updated_at", flat=True)),
        "properties": sorted(DesignProperty.objects.values_list("updated_at", flat=True)),
    }

    assert load(catalog) == {"row_softmax": LoadAction.UNCHANGED}

    assert TaskVersion.objects.count() == 1
    assert stamps == {
        "task": Task.objects.get().updated_at,
        "guidance": sorted(Guidance.objects.values_list("updated_at", flat=True)),
        "properties": sorted(DesignProperty.objects.values_list("updated_at", flat=True)),
    }


def test_reference_edit_makes_a_new_version_and_keeps_the_old_one(catalog):
    load(catalog)
    old = Task.objects.get().current_version
    submission = SubmissionFactory(task_version=old, task=old.task)
    reference = catalog / "row_softmax" / "reference.py"
    reference.write_text(reference.read_text() + "\n# edited\n")

    assert load(catalog) == {"row_softmax": LoadAction.NEW_VERSION}

    task = Task.objects.get()
    assert task.current_version.number == 2
    assert task.current_version.reference_source.endswith("# edited\n")
    assert task.current_version.workloads.count() == old.workloads.count()
    old.refresh_from_db()
    assert "# edited" not in old.reference_source
    submission.refresh_from_db()
    assert submission.task_version_id == old.pk


def test_workload_edit_makes_a_new_version(catalog):
    load(catalog)
    toml = catalog / "row_softmax" / "task.toml"
    toml.write_text(toml.read_text().replace("rows = 16384,", "rows = 8192,"))

    assert load(catalog) == {"row_softmax": LoadAction.NEW_VERSION}


def test_reverting_returns_to_the_existing_version(catalog):
    load(catalog)
    reference = catalog / "row_softmax" / "reference.py"
    original = reference.read_text()
    reference.write_text(original + "\n# edited\n")
    load(catalog)
    reference.write_text(original)

    assert load(catalog) == {"row_softmax": LoadAction.SWITCHED}
    assert Task.objects.get().current_version.number == 1
    assert TaskVersion.objects.count() == 2


def test_guidance_and_property_edits_change_no_version(catalog):
    load(catalog)
    (catalog / "row_softmax" / "guidance" / "L2.md").write_text("New L2 text.\n")
    (catalog / "row_softmax" / "statement.md").write_text("New statement.\n")
    toml = catalog / "row_softmax" / "task.toml"
    text = toml.read_text()
    start = text.index('[[properties]]\nkey = "warps_sized_to_row"')
    toml.write_text(text[:start])  # drops the last property

    assert load(catalog) == {"row_softmax": LoadAction.UNCHANGED}

    task = Task.objects.get()
    assert TaskVersion.objects.count() == 1
    assert task.statement == "New statement.\n"
    assert task.guidance.get(level="L2").text == "New L2 text.\n"
    assert not task.properties.filter(key="warps_sized_to_row").exists()


def test_broken_package_raises_and_writes_nothing(catalog):
    broken = catalog / "zz_broken"
    broken.mkdir()
    (broken / "task.toml").write_text('slug = "zz_broken"\n')

    with pytest.raises(TaskPackageError):
        catalog_load(directory=catalog)

    assert not Task.objects.exists()


def test_missing_directory_raises_a_package_error(tmp_path):
    with pytest.raises(TaskPackageError, match="no such catalog directory"):
        catalog_load(directory=tmp_path / "nope")


def test_written_package_loads_back_to_an_equivalent_spec(catalog, tmp_path):
    load(catalog)
    version = Task.objects.get().current_version

    folder = task_version_write_package(version=version, directory=tmp_path / "out")

    assert folder == tmp_path / "out" / "row_softmax"
    original = load_task(catalog / "row_softmax")
    again = load_task(folder)
    assert again.__class__ is original.__class__
    fields = set(original.__dataclass_fields__) - {"directory"}
    for name in fields:
        assert getattr(again, name) == getattr(original, name), name


def test_a_baseline_and_allowed_ops_are_measured_and_written_back_out(catalog, tmp_path):
    load(catalog)
    before = Task.objects.get().current_version
    package = catalog / "row_softmax"
    (package / "baseline.py").write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x):\n        return torch.softmax(x.float(), -1).to(x.dtype)\n"
    )
    toml = (package / "task.toml").read_text()
    (package / "task.toml").write_text('allowed_ops = ["aten::arange"]\n' + toml)

    assert load(catalog) == {"row_softmax": LoadAction.NEW_VERSION}
    version = Task.objects.get().current_version
    assert version.number == before.number + 1 and version.content_hash != before.content_hash
    assert "class Model" in version.baseline_source
    assert version.allowed_ops == ["aten::arange"]

    folder = task_version_write_package(version=version, directory=tmp_path / "out")
    again = load_task(folder)
    assert again.baseline_source == version.baseline_source
    assert again.allowed_ops == ("aten::arange",)
    assert measured_content_hash(measured_content(again)) == version.content_hash


def test_a_compute_dtype_is_measured_per_workload_and_written_back_out(catalog, tmp_path):
    load(catalog)
    before = Task.objects.get().current_version
    _edit_toml(catalog, 'slug = "row_softmax"\n', 'slug = "row_softmax"\ncompute_dtype = "fp8"\n')
    _edit_toml(
        catalog,
        'name = "fp32_4096x4096"\n',
        'name = "fp32_4096x4096"\ncompute_dtype = "bf16"\n',
    )

    assert load(catalog) == {"row_softmax": LoadAction.NEW_VERSION}
    version = Task.objects.get().current_version
    assert version.content_hash != before.content_hash
    units = dict(version.workloads.values_list("name", "compute_dtype"))
    assert units["bf16_16384x1024"] == "fp8" and units["fp32_4096x4096"] == "bf16"

    again = load_task(task_version_write_package(version=version, directory=tmp_path / "out"))
    assert {w.name: w.compute_dtype for w in again.workloads} == units
    assert measured_content_hash(measured_content(again)) == version.content_hash


def test_the_default_compute_dtype_leaves_the_hash_as_it_was(catalog):
    spec = load_task(catalog / "row_softmax")
    hashed = measured_content(spec)
    for workload in hashed["workloads"]:
        del workload["compute_dtype"]
    assert measured_content_hash(hashed) == measured_content_hash(measured_content(spec))


def test_an_unknown_compute_dtype_is_rejected(catalog):
    _edit_toml(catalog, 'slug = "row_softmax"\n', 'slug = "row_softmax"\ncompute_dtype = "fp4"\n')
    with pytest.raises(TaskPackageError, match="compute_dtype 'fp4' is none of bf16, fp8"):
        load_task(catalog / "row_softmax")


def test_export_writes_every_current_version(catalog, tmp_path):
    load(catalog)

    folders = catalog_export(directory=tmp_path / "export")

    assert [f.name for f in folders] == ["row_softmax"]
    assert load(tmp_path / "export") == {"row_softmax": LoadAction.UNCHANGED}


def test_version_update_with_new_reference_makes_a_new_version(catalog):
    load(catalog)
    task = Task.objects.get()
    old = task.current_version

    version = task_version_update(task=task, reference_source="class Model: ...\n")

    assert version.number == 2
    task.refresh_from_db()
    assert task.current_version == version
    assert version.workloads.count() == old.workloads.count()
    assert version.tolerances == old.tolerances
    old.refresh_from_db()
    assert old.reference_source != "class Model: ...\n"


def test_version_update_with_same_content_returns_the_current_version(catalog):
    load(catalog)
    task = Task.objects.get()

    version = task_version_update(task=task, seeds=task.current_version.seeds)

    assert version == task.current_version
    assert TaskVersion.objects.count() == 1


def test_version_update_takes_an_absolute_l2_floor(catalog):
    load(catalog)
    floored = {"default": {"atol": 1e-8, "rtol": 1e-5, "rel_l2": 1e-6, "abs_l2": 1e-9}}

    version = task_version_update(task=Task.objects.get(), tolerances=floored)

    assert version.number == 2 and version.tolerances == floored


def test_version_update_takes_a_share_of_the_reference_rms_and_refuses_unknown_keys(catalog):
    load(catalog)
    widened = {"default": {"atol": 1e-2, "rtol": 1.6e-2, "rel_l2": 8e-3, "atol_rms": 0.15}}

    version = task_version_update(task=Task.objects.get(), tolerances=widened)

    assert version.number == 2 and version.tolerances == widened
    with pytest.raises(ValidationError, match="optionally abs_l2, atol_rms"):
        task_version_update(
            task=Task.objects.get(),
            tolerances={"default": {"atol": 1e-2, "rtol": 1e-2, "rel_l2": 1e-2, "atol_max": 1}},
        )


def test_version_update_computes_workload_counts_from_formulas(catalog):
    load(catalog)
    task = Task.objects.get()
    workloads = [
        {
            "name": "one",
            "role": "timed",
            "params": {"rows": 2, "cols": 3, "dtype": "float32"},
            "flops_formula": "5 * rows * cols",
            "bytes_formula": "2 * rows * cols * esize",
        },
        {"name": "c", "role": "check", "params": {"rows": 1, "cols": 1, "dtype": "float32"}},
    ]

    version = task_version_update(task=task, workloads=workloads)

    one, check = version.workloads.all()
    assert (one.flops, one.bytes) == (30.0, 48.0)
    assert check.hidden is False


@pytest.mark.parametrize(
    "workload",
    [
        {"name": "h", "role": "untimed", "params": {"rows": 7, "cols": 9, "dtype": "float32"}},
        {"name": "c", "role": "check", "hidden": True, "params": {"rows": 7, "cols": 9}},
    ],
)
def test_a_listed_hidden_workload_is_refused(catalog, workload):
    load(catalog)
    task = Task.objects.get()
    with pytest.raises(ValidationError, match="drawn from the version's hidden_draws"):
        task_version_update(task=task, workloads=[workload])


def test_a_changed_hidden_declaration_is_a_new_version_and_exports_back(catalog, tmp_path):
    load(catalog)
    task = Task.objects.get()
    old = task.current_version
    draws = {"interpret": [{"count": 2, "params": {"rows": {"min": 2, "max": 5}, "cols": 77}}]}

    version = task_version_update(task=task, hidden_draws=draws)

    assert version.number == old.number + 1
    assert version.hidden_draws == {
        "interpret": [{"count": 2, "params": draws["interpret"][0]["params"]}]
    }
    folder = task_version_write_package(version=version, directory=tmp_path / "out")
    spec = load_task(folder)
    assert hidden_declaration_dict(spec.hidden) == version.hidden_draws
    assert measured_content_hash(measured_content(spec)) == version.content_hash
    # The same declaration again is the same version.
    assert task_version_update(task=task, hidden_draws=draws) == version


def test_a_bad_hidden_declaration_is_a_validation_error_naming_the_parameter(catalog):
    load(catalog)
    task = Task.objects.get()
    draws = {"cuda": [{"params": {"cols": {"min": 24, "max": 28, "prime": True}}}]}
    with pytest.raises(ValidationError, match=r"hidden\.cuda\[0\]\.params\.cols"):
        task_version_update(task=task, hidden_draws=draws)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"tolerances": {"bfloat16": {"atol": 1, "rtol": 1, "rel_l2": 1}}}, "default"),
        ({"workloads": [{"name": "x", "role": "bogus", "params": {}}]}, "valid role"),
        (
            {"workloads": [{"name": "x", "role": "timed", "params": {}, "flops_formula": "os"}]},
            "unknown name",
        ),
        ({"colour": "red"}, "not measured content"),
        (
            {"tolerances": {"default": {"atol": 1, "rtol": 1, "rel_l2": 1, "floor": 1}}},
            "exactly atol, rtol and rel_l2",
        ),
        (
            {"workloads": [{"name": "x", "role": "timed", "params": {}, "compute_dtype": "fp4"}]},
            "compute_dtype 'fp4'",
        ),
    ],
)
def test_version_update_rejects_invalid_content(catalog, fields, message):
    load(catalog)
    with pytest.raises(ValidationError, match=message):
        task_version_update(task=Task.objects.get(), **fields)
    assert TaskVersion.objects.count() == 1


def test_a_package_written_from_a_version_hashes_to_that_version(tmp_path):
    # The worker evaluates the package written from the stored version, and the
    # verdict's task hash must equal the version's: the round trip is exact.
    catalog_load(directory=DEFAULT_CATALOG_DIR)
    for task in Task.objects.select_related("current_version"):
        version = task.current_version
        task_version_write_package(version=version, directory=tmp_path / task.slug)
        spec = load_task(tmp_path / task.slug / task.slug)
        assert measured_content_hash(measured_content(spec)) == version.content_hash, task.slug


# --- dependency validation ---------------------------------------------------------


def _edit_toml(catalog: Path, old: str, new: str) -> None:
    toml = catalog / "row_softmax" / "task.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'key = "max_subtraction"\nlevel = "L1"\n',
            'key = "max_subtraction"\nlevel = "L1"\ndepends_on = ["nope"]\n',
            "depends on unknown",
        ),
        (
            'key = "max_subtraction"\nlevel = "L1"\n',
            'key = "max_subtraction"\nlevel = "L1"\ndepends_on = ["row_per_program"]\n',
            "of a higher level",
        ),
        (
            'key = "max_subtraction"\nlevel = "L1"\n',
            'key = "max_subtraction"\nlevel = "L1"\ndepends_on = ["online_normalizer"]\n',
            "cycle: max_subtraction -> online_normalizer -> max_subtraction",
        ),
        (
            '[guidance.L2]\ndepends_on = ["L1"]',
            '[guidance.L2]\ndepends_on = ["L1", "L2"]',
            "lower levels only",
        ),
        (
            '[guidance.L3]\ndepends_on = ["L1", "L2"]',
            '[guidance.L3]\ndepends_on = ["L2"]',
            "its properties build on ['L1', 'L2']",
        ),
    ],
    ids=["unknown", "higher-level", "cycle", "guidance-same-level", "guidance-inconsistent"],
)
def test_a_dependency_must_exist_be_lower_or_equal_and_form_no_cycle(catalog, old, new, message):
    _edit_toml(catalog, old, new)

    with pytest.raises(TaskPackageError, match=re.escape(message)):
        catalog_load(directory=catalog)

    assert not Task.objects.exists()


def test_the_untimed_role_migration_renames_hidden_rows_both_ways():
    migration = importlib.import_module("task_catalog.migrations.0007_house_untimed_role")
    workload = WorkloadFactory(name="hidden_1", role="hidden", hidden=True)
    timed = WorkloadFactory(version=workload.version, name="w", role="timed", position=1)

    migration.forwards(django_apps, None)
    assert (Workload.objects.get(pk=workload.pk).role, Workload.objects.get(pk=timed.pk).role) == (
        "untimed",
        "timed",
    )
    migration.backwards(django_apps, None)
    assert Workload.objects.get(pk=workload.pk).role == "hidden"

import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from task_catalog.models import Task

pytestmark = pytest.mark.django_db

SOURCE = Path(settings.BASE_DIR) / "catalog" / "row_softmax"


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    directory = tmp_path / "catalog"
    shutil.copytree(SOURCE, directory / "row_softmax")
    return directory


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_load_catalog_prints_one_line_per_task(catalog):
    assert "row_softmax: created (v1)" in run("load_catalog", "--dir", str(catalog))
    assert "row_softmax: unchanged (v1)" in run("load_catalog", "--dir", str(catalog))
    assert Task.objects.count() == 1


def test_load_catalog_defaults_to_the_configured_directory(catalog, settings):
    settings.D2K_CATALOG_DIR = catalog
    assert "row_softmax: created" in run("load_catalog")


def test_load_catalog_reports_a_broken_package_as_a_command_error(catalog):
    (catalog / "row_softmax" / "statement.md").unlink()
    with pytest.raises(CommandError, match=r"missing statement\.md"):
        run("load_catalog", "--dir", str(catalog))


def test_export_catalog_writes_loadable_folders(catalog, tmp_path):
    run("load_catalog", "--dir", str(catalog))
    out = run("export_catalog", str(tmp_path / "export"))
    assert "1 tasks written" in out
    assert "row_softmax: unchanged" in run("load_catalog", "--dir", str(tmp_path / "export"))

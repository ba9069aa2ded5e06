"""The client installs on its own: its wheel carries the run format, and no portal code."""

import subprocess
import sys
import zipfile
from pathlib import Path

import runformat

ROOT = Path(__file__).resolve().parents[2]
PIP_WHEEL = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]


def test_the_clients_run_format_is_the_portals_source():
    import d2k_client.runformat

    # ./dev setup installs the client editable: one folder, two import names.
    assert Path(d2k_client.runformat.__file__).resolve() == Path(runformat.__file__).resolve()


def test_the_client_wheel_carries_the_run_format_and_nothing_of_the_portal(tmp_path):
    subprocess.run(
        [*PIP_WHEEL, "-w", str(tmp_path), str(ROOT / "client")],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("d2k_client-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"d2k_client"}
    source = {p.name for p in (ROOT / "runformat").glob("*.py")}
    assert {n.rsplit("/", 1)[1] for n in names if n.startswith("d2k_client/runformat/")} >= {
        *source,
        "manifest-v1.json",
        "trace-v1.json",
    }
    # The unpacked wheel alone validates a manifest (schemas found, imports relative).
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    probe = (
        f"import d2k_client.runformat as r; assert r.__file__.startswith({str(tmp_path)!r}); "
        "print(r.schema_errors(name='manifest-v1', instance={}))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "'model' is a required property" in shown.stdout

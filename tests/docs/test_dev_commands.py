"""`./dev`, the README's commands: the quick inner loop is named where a newcomer looks,
and leaves out the slow kinds of test that pyproject.toml registers."""

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_usage_line_names_every_command():
    done = subprocess.run(["bash", str(ROOT / "dev"), "nope"], capture_output=True, text=True)
    assert done.returncode == 2
    for command in ("serve", "test", "quick", "lint", "setup"):
        assert re.search(rf"\b{command}\b", done.stderr), done.stderr


def test_the_readme_gives_the_set_up_commands_and_the_quick_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in ("./dev serve", "./dev test", "./dev quick"):
        assert command in readme


def test_quick_leaves_out_the_slow_kinds():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    markers = {m.split(":")[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]}
    expression = re.search(r'^QUICK_MARKERS="(.*)"$', (ROOT / "dev").read_text(), re.M)
    assert expression is not None
    slow_kinds = {"slow", "fuzz", "browser", "gpu"}
    assert slow_kinds <= markers
    assert set(re.findall(r"not (\w+)", expression.group(1))) == slow_kinds


def test_the_folders_quick_skips_exist():
    skipped = re.search(r"^QUICK_SKIPPED=\((.*)\)$", (ROOT / "dev").read_text(), re.M)
    assert skipped is not None
    folders = skipped.group(1).split()
    assert "tests/catalog" in folders
    assert all((ROOT / folder).is_dir() for folder in folders), folders

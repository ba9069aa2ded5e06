"""The d2k client against a live test server: the CLI runs in-process, over real HTTP."""

import pytest
from d2k_client.cli import app
from typer.testing import CliRunner


@pytest.fixture
def d2k(tmp_path, monkeypatch):
    """Run `d2k ARGS…`; the config file lives in tmp_path."""
    monkeypatch.setenv("D2K_CONFIG", str(tmp_path / "d2k" / "config.json"))
    monkeypatch.delenv("D2K_SERVER", raising=False)
    monkeypatch.delenv("D2K_TOKEN", raising=False)
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(app, list(args), input=input, catch_exceptions=False)

    return invoke


@pytest.fixture
def portal(transactional_db, live_server, run_tasks, fake_cli, d2k):
    """A live portal with two tasks, a user and `d2k login` done; yields the token."""
    from tests.factories import GuidanceFactory, UserFactory, api_token_key

    for level in ("L1", "L2", "L3"):
        GuidanceFactory(task=run_tasks[0], level=level, text=f"Guidance of {level}.")
    token = api_token_key(UserFactory(username="cli-user"))
    result = d2k("--server", live_server.url, "login", "--token", token)
    assert result.exit_code == 0, result.output
    return token

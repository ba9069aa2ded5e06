"""The client prints what the server says as text: a kernel's exception text (a verdict's
message, a flag, a table cell) or a run's manifest (its model name) cannot forge a verdict
with rich markup, a hyperlink, or a terminal escape sequence.

A fake API answers the crafted replies; the commands run as a user runs them, on a console
that is not a terminal and on one that is."""

import json
import re

import pytest
from rich.console import Console

from tests.client.fake_api import NOT_FOUND, FakeApi, json_reply

# What a kernel can raise: markup that would print a green "correct ×14.2", a hyperlink in
# markup and as OSC 8, colour, a cursor move and a line erase, a C1 CSI, a carriage return
# that would overwrite the line, a bidirectional override.
FORGED = (
    "[bold green]correct[/bold green] ×14.2 "
    "[link=https://evil.example]docs[/link] "
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ "
    "\x1b[32mgreen\x1b[0m \x1b[1A\x1b[2K\x9b31mred\r:smile: \u202eevil"
)
# What is left of it to read: every printable character, in its order, markup as written.
SHOWN = "[bold green]correct[/bold green] ×14.2 [link=https://evil.example]docs[/link] click"
HARMLESS = "everything is fine"


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch):
    """A terminal wide enough that no table cell is cut: the whole forged text shows.

    (The width rich finds otherwise depends on how the tests are run.)"""
    from d2k_client import display

    monkeypatch.setattr(display.console, "width", 400)


def _evaluation(message):
    result = {
        "name": message,
        "role": "check",
        "status": "incorrect",
        "max_abs_err": 0.5,
        "median_ms": None,
        "speedup": None,
        "message": message,
    }
    return {
        "id": 5,
        "task": "row_softmax",
        "task_version": 1,
        "evaluation": {
            "status": "incorrect",
            "is_finished": True,
            "mode": "interpret",
            "message": message,
            "results": [result],
            "flags": [{"check": "escaped_work", "detail": message}],
        },
    }


def _run(model):
    result = {"status": "incorrect", "is_finished": True, "speedup": None, "submission": 5}
    return {
        "id": 7,
        "url": "http://portal.test/runs/7/",
        "model": model,
        "agent": "agent-y",
        "condition": "none",
        "state": "complete",
        "example_label": None,
        "tasks": [{"task": "row_softmax", "result": result, "pair_result": None}],
        # The pool's name is the GPU's as its workers report it; `d2k run --wait` shows it.
        "progress": {
            "total": 1,
            "finished": 1,
            "running": 0,
            "waiting": 0,
            "hardware": model,
            "queue_position": 3,
            "eta_seconds": None,
            "per_evaluation_s": None,
            "slots": 0,
            "basis": model,
        },
    }


def _serving(text):
    def answer(method, path, query):
        if path == "/api/submissions/5/":
            return json_reply(_evaluation(text))
        if path == "/api/runs/7/":
            return json_reply(_run(text))
        if path == "/api/leaderboard/":
            return json_reply({"results": [{"model": text, text: 1.5}]})
        if path == "/api/tasks/":
            return json_reply({"results": [{"slug": "row_softmax"}], "next": None})
        return NOT_FOUND

    return answer


@pytest.fixture
def serve(monkeypatch):
    """`serve(text)`: a fake API saying `text` wherever a kernel or a manifest can."""
    monkeypatch.setenv("COLUMNS", "400")  # no table cell wrapped over lines
    fakes = []

    def start(text):
        fakes.append(FakeApi(_serving(text)))
        return fakes[-1]

    yield start
    for fake in fakes:
        fake.close()


@pytest.fixture
def terminal(monkeypatch):
    """The client's consoles as on a colour terminal: its own styles come out as SGR."""
    from d2k_client import cli, display, follow

    out = Console(force_terminal=True, color_system="truecolor", width=400)
    err = Console(force_terminal=True, color_system="truecolor", width=400, stderr=True)
    for module in (display, cli, follow):
        for name, console in (("console", out), ("err_console", err)):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, console)


COMMANDS = {
    "status": (["status", "5"], 3),
    "run": (["run", "7"], 0),
    "run --wait": (["run", "7", "--wait"], 3),
    "leaderboard": (["leaderboard"], 0),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_forged_server_text_prints_as_its_plain_text(command, d2k, serve):
    args, code = COMMANDS[command]
    api = serve(FORGED)

    result = d2k("--server", api.url, *args)

    assert result.exit_code == code, result.output
    raw = result.stdout_bytes + result.stderr_bytes
    assert b"\x1b" not in raw and "\x9b".encode() not in raw and b"\r" not in raw
    assert "\u202e" not in result.output
    assert SHOWN in result.stdout.replace("\n", "")


def _styles(output: str) -> set[str]:
    return set(re.findall(r"\x1b\[[0-9;]*m", output)) | set(re.findall(r"\x1b\][^\x1b]*", output))


@pytest.mark.parametrize("command", list(COMMANDS))
def test_on_a_terminal_forged_text_brings_no_style_of_its_own(command, d2k, serve, terminal):
    args, code = COMMANDS[command]
    forged = d2k("--server", serve(FORGED).url, *args)
    harmless = d2k("--server", serve(HARMLESS).url, *args)

    assert forged.exit_code == harmless.exit_code == code, forged.output
    # Whatever styles the client gives its own words, and nothing more: no green, no
    # hyperlink, no cursor move.
    assert _styles(forged.output) == _styles(harmless.output)
    assert "evil.example" not in "".join(re.findall(r"\x1b\][^\x1b]*", forged.output))
    assert re.sub(r"\x1b\[[0-9;]*m", "", forged.stdout).count("\x1b") == 0


def test_an_error_from_the_server_is_one_plain_line(d2k):
    def answer(method, path, query):
        return json_reply({"detail": f"[red]denied[/red] {FORGED}"}, 403)

    api = FakeApi(answer)
    try:
        result = d2k("--server", api.url, "tasks")
    finally:
        api.close()
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("d2k: error: GET /api/tasks/: HTTP 403: [red]denied[/red] ")
    assert "\x1b" not in line and "\r" not in line


def test_json_output_keeps_the_servers_text_escaped(d2k, serve):
    result = d2k("--server", serve(FORGED).url, "status", "5", "--json")
    assert b"\x1b" not in result.stdout_bytes
    assert json.loads(result.stdout)["evaluation"]["message"] == FORGED

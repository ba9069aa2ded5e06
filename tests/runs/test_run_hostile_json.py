"""Hostile JSON at every JSON door: nesting past the depth limit, lone UTF-16 surrogates
and NUL characters are a 400 naming the file and the line (or, in a trace event's text,
replaced by U+FFFD), nothing is half-stored, and a stored trace never breaks its pages."""

import json

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from accounts.models import User
from runformat.jsonsafe import MAX_JSON_DEPTH, JsonRefused, json_loads_checked
from runs.models import Run, Trace
from runs.traces import TraceRefused, trace_pack, trace_summarize
from tests.factories import RunFactory
from tests.runs.bundles import good_files, make_zip, manifest, trace_lines
from tests.runs.test_run_api import assert_nothing_stored

pytestmark = pytest.mark.django_db

DEEP = "[" * 5000 + "]" * 5000  # past the interpreter's recursion limit
NESTED = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)  # just past ours
START = {"type": "start", "ts": 0, "task": "row_softmax", "condition": "none"}


def _refused(response, file, line):
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [(e["file"], e["line"]) for e in errors] == [(file, line)], errors
    return errors[0]["message"]


def _manifest_text(**changes) -> str:
    # One key a line, so that the refusal's line number means something.
    return json.dumps(json.loads(manifest(**changes)), indent=1)


@pytest.mark.parametrize(
    ("notes_json", "said"),
    [
        ('"a\\u0000b"', "NUL"),
        ('"\\ud800"', "surrogate"),
        (NESTED, "nested deeper"),
        (DEEP, "nested deeper"),
    ],
    ids=["nul", "lone-surrogate", "just-too-deep", "recursion-deep"],
)
def test_a_hostile_manifest_is_400_naming_its_line(
    post, uploader, run_tasks, storage_before, notes_json, said
):
    text = _manifest_text(notes="PLACEHOLDER").replace('"PLACEHOLDER"', notes_json)
    line = next(n for n, t in enumerate(text.splitlines(), start=1) if '"notes"' in t)
    files = good_files("row_softmax")
    files["manifest.json"] = text
    message = _refused(post(uploader, make_zip(files)), "manifest.json", line)
    assert said in message
    assert_nothing_stored(storage_before)


def test_a_nul_in_a_proposal_is_400_naming_its_line(post, uploader, run_tasks, storage_before):
    files = good_files("row_softmax")
    files["proposals/row_softmax.md"] = "# plan\n\nfuse\x00 it\n"
    message = _refused(post(uploader, make_zip(files)), "proposals/row_softmax.md", 3)
    assert "NUL" in message
    assert_nothing_stored(storage_before)


@pytest.mark.parametrize("deep", [NESTED, DEEP], ids=["just-too-deep", "recursion-deep"])
def test_a_trace_line_nested_too_deeply_is_400_and_leaves_no_folder(
    post, uploader, run_tasks, fake_cli, on_disk, deep
):
    files = good_files("row_softmax", "layernorm_fwd")
    event = json.dumps({"type": "message", "ts": 1, "payload": "X"}).replace('"X"', deep)
    files["traces/row_softmax.jsonl"] = trace_lines(START) + event + "\n"
    message = _refused(post(uploader, make_zip(files)), "traces/row_softmax.jsonl", 2)
    assert f"deeper than {MAX_JSON_DEPTH} levels" in message
    assert_nothing_stored()
    assert not (on_disk / "runs").exists() or not any((on_disk / "runs").rglob("*"))


def test_nul_and_surrogates_in_trace_text_are_replaced_and_every_page_answers(
    post, uploader, run_tasks, fake_cli, client
):
    files = good_files("row_softmax")
    hostile = (
        '{"type": "message\\u0000x", "ts": 1, "content": "a\\ud800b\\u0000"}\n'
        '{"type": "tool_call", "ts": 2, "name": "comp\\udfffile",'
        ' "args": "{\\"k\\": \\"\\\\ud800\\"}"}\n'
        '{"type": "end", "ts": 3, "reason": "sub\\u0000mitted"}\n'
    )
    files["traces/row_softmax.jsonl"] = trace_lines(START) + hostile
    response = post(uploader, make_zip(files))
    assert response.status_code == 201, response.content
    trace = Trace.objects.get()
    assert trace.event_types["message\ufffdx"] == 1
    assert trace.tool_calls == {"comp\ufffdile": 1}
    assert trace.end_reason == "sub\ufffdmitted"
    run = Run.objects.get()
    for url in (
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/traces/row_softmax/",
        f"/runs/{run.pk}/traces/row_softmax/?type=tool_call",
        f"/api/runs/{run.pk}/",
        f"/api/runs/{run.pk}/traces/row_softmax/",
    ):
        page = client.get(url)
        assert page.status_code == 200, url
        page.content.decode("utf-8")  # encodable: no lone surrogate reached the output
    events = client.get(f"/api/runs/{run.pk}/traces/row_softmax/").json()["events"]
    assert events[1]["data"]["content"] == "a\ufffdb\ufffd"


def test_a_trace_stored_before_the_checks_still_shows(post, uploader, run_tasks, fake_cli, client):
    """A file stored unchecked (an older upload) with every hostile line: its pages answer."""
    response = post(uploader, make_zip(good_files("row_softmax")))
    assert response.status_code == 201
    trace = Trace.objects.get()
    raw = (trace_lines(START) + f'{{"type": "x", "deep": {DEEP}}}\n"\\ud800"\n').encode()
    name = trace.file.name
    default_storage.delete(name)
    default_storage.save(name, ContentFile(trace_pack(data=raw).data))
    trace.pages = trace_pack(data=raw).pages
    trace.save()
    for url in (
        f"/runs/{trace.run_id}/traces/row_softmax/",
        f"/api/runs/{trace.run_id}/traces/row_softmax/",
    ):
        assert client.get(url).status_code == 200, url


def test_the_summary_refuses_a_deep_line_and_names_it():
    data = (trace_lines(START) + NESTED + "\n").encode()
    with pytest.raises(TraceRefused) as caught:
        trace_summarize(data=data, final_source=None)
    assert caught.value.line == 2


@pytest.mark.parametrize(
    "body",
    ['{"is_public": "\\u0000"}', '{"is_public": "\\udc00"}', DEEP, NESTED],
    ids=["nul", "lone-surrogate", "recursion-deep", "just-too-deep"],
)
def test_a_hostile_json_body_is_400_at_the_api(uploader, body):
    run = RunFactory(owner=User.objects.get(username="lab-bot"))
    response = uploader.patch(f"/api/runs/{run.pk}/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert "JSON parse error" in response.json()["detail"]


def test_the_checked_loader_names_the_line():
    with pytest.raises(JsonRefused) as caught:
        json_loads_checked('{\n "a": 1,\n "b": "\\u0000"\n}')
    assert caught.value.line == 3
    assert json_loads_checked('{"ok": "\\ud83d\\ude00"}') == {"ok": "\U0001f600"}

"""The converter from OpenAI-style chat transcripts, on a transcript written for the test."""

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from runformat import schema_errors
from runs.convert import TranscriptError, openai_chat_to_trace
from runs.traces import trace_summarize

TRANSCRIPT = Path(__file__).resolve().parents[1] / "data" / "openai_transcript.json"


def test_an_openai_transcript_becomes_valid_trace_events():
    transcript = json.loads(TRANSCRIPT.read_text())
    events = openai_chat_to_trace(transcript=transcript, task="row_softmax", condition="L1")
    assert [e["type"] for e in events] == [
        "start",
        "message",
        "message",
        "message",
        "tool_call",
        "tool_result",
        "message",
        "tool_call",
        "tool_result",
        "message",
        "tool_call",
        "submit",
        "tool_result",
        "message",
        "end",
    ]
    for event in events:
        assert schema_errors(name="trace-v1", instance=event) == [], event
    assert events[0] == {
        "type": "start",
        "ts": 0.0,
        "turn": 0,
        "task": "row_softmax",
        "condition": "L1",
    }
    call = events[4]
    assert call["name"] == "compile" and call["arguments"] == {"path": "kernel.py"}
    assert events[5]["name"] == "compile" and events[5]["ok"] is False
    assert events[8]["ok"] is True
    assert events[11]["source"].startswith("import torch")
    assert events[-1] == {
        "type": "end",
        "ts": events[-1]["ts"],
        "turn": 4,
        "reason": "transcript_end",
        "turns_used": 4,
    }
    summary = trace_summarize(
        data="".join(json.dumps(e) + "\n" for e in events).encode(),
        final_source=events[11]["source"],
    )
    assert summary.turns_used == 4 and summary.final_submit_turn == 3
    assert (summary.tokens_in, summary.tokens_out) == (3000, 410)
    assert summary.attempts_before_final == 2


def test_text_parts_and_created_timestamps_are_read():
    events = openai_chat_to_trace(
        transcript={
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                    "created": 100,
                }
            ]
        },
        task="t",
        condition="none",
    )
    assert events[1]["content"] == "a\nb" and events[1]["ts"] == 100.0


@pytest.mark.parametrize("bad", [{"messages": "x"}, [{"content": "no role"}], 3])
def test_something_else_is_refused_with_the_reason(bad):
    with pytest.raises(TranscriptError):
        openai_chat_to_trace(transcript=bad, task="t", condition="none")


def test_the_command_writes_json_lines(tmp_path, capsys):
    out = tmp_path / "row_softmax.jsonl"
    call_command("convert_trace", str(TRANSCRIPT), "--task", "row_softmax", "--output", str(out))
    lines = out.read_text().splitlines()
    assert len(lines) == 15 and json.loads(lines[0])["type"] == "start"


def test_the_command_reports_a_bad_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{")
    with pytest.raises(CommandError, match=r"x\.json"):
        call_command("convert_trace", str(bad), "--task", "t")

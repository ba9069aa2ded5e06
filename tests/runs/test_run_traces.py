"""Trace summary, paged gzip storage and page reading: pure functions, no database."""

import gzip
import io
import json

from runs.traces import PAGE_LINES, page_of_line, trace_pack, trace_page_read, trace_summarize
from tests.runs.bundles import trace_lines

FINAL = "class ModelNew:\n    BLOCK = 2\n"


def episode() -> bytes:
    return trace_lines(
        {"type": "start", "ts": "2026-05-01T10:00:00Z", "task": "t", "condition": "none"},
        {
            "type": "message",
            "ts": "2026-05-01T10:00:05Z",
            "turn": 1,
            "role": "assistant",
            "content": "plan",
            "tokens_in": 100,
            "tokens_out": 20,
        },
        {
            "type": "tool_call",
            "ts": "2026-05-01T10:00:06Z",
            "turn": 1,
            "name": "compile",
            "arguments": {"path": "k.py"},
        },
        {
            "type": "tool_result",
            "ts": "2026-05-01T10:00:09Z",
            "turn": 1,
            "name": "compile",
            "ok": False,
            "output": "error",
            "wall_time_s": 3.0,
        },
        {
            "type": "tool_call",
            "ts": "2026-05-01T10:00:10Z",
            "turn": 2,
            "name": "run_tests",
            "arguments": "{}",
        },
        {
            "type": "submit",
            "ts": "2026-05-01T10:00:11Z",
            "turn": 2,
            "source": "class ModelNew:\n    BLOCK = 1\n",
        },
        {
            "type": "message",
            "ts": "2026-05-01T10:00:12Z",
            "turn": 3,
            "role": "assistant",
            "content": "better",
            "tokens_in": 200,
            "tokens_out": 30,
        },
        {
            "type": "tool_call",
            "ts": "2026-05-01T10:00:13Z",
            "turn": 3,
            "name": "read_file",
            "arguments": {},
        },
        {"type": "submit", "ts": "2026-05-01T10:00:14Z", "turn": 3, "source": FINAL},
        {
            "type": "tool_call",
            "ts": "2026-05-01T10:00:15Z",
            "turn": 4,
            "name": "benchmark",
            "arguments": {},
        },
        {"type": "submit", "ts": "2026-05-01T10:00:16Z", "turn": 4, "source": FINAL + "\n"},
        {"type": "thought_summary", "ts": "2026-05-01T10:00:17Z", "text": "kept"},
        {"type": "end", "ts": "2026-05-01T10:01:40Z", "reason": "submitted", "turns_used": 4},
    ).encode()


def test_the_summary_counts_turns_tools_tokens_time_and_the_final_kernels_first_turn():
    summary = trace_summarize(data=episode(), final_source=FINAL)
    assert summary.event_count == 13
    assert summary.turns_used == 4
    assert summary.tool_calls == {"compile": 1, "run_tests": 1, "read_file": 1, "benchmark": 1}
    assert (summary.tokens_in, summary.tokens_out) == (300, 50)
    assert summary.wall_time_s == 100.0
    # compile and run_tests come before the final kernel's first submit; benchmark after.
    assert summary.attempts_before_final == 2
    assert summary.final_submit_turn == 3 and summary.final_submit_line == 9
    assert summary.submit_lines == [6, 9, 11]
    assert summary.event_types["thought_summary"] == 1
    assert summary.end_reason == "submitted" and summary.problems == []


def test_malformed_and_invalid_lines_are_reported_by_number_and_kept():
    data = (
        episode()
        + b"not json\n[1, 2]\n"
        + b'{"type": "message", "ts": 1, "role": "robot", "content": "x"}\n{"ts": 3}\n'
    )
    summary = trace_summarize(data=data, final_source=FINAL)
    assert summary.problems == [
        {"line": 14, "message": "Not JSON: Expecting value (column 1)."},
        {"line": 15, "message": "Not a JSON object: every line is one event object."},
        {
            "line": 16,
            "message": "role: 'robot' is not one of ['system', 'user', 'assistant', 'tool']",
        },
        {"line": 17, "message": "'type' is a required property"},
    ]
    assert summary.event_count == 17
    assert summary.event_types["malformed"] == 2


def test_without_an_end_event_turns_come_from_the_events_and_no_kernel_means_no_final():
    data = b"\n".join(episode().splitlines()[:-1]) + b"\n"
    summary = trace_summarize(data=data, final_source=None)
    assert summary.turns_used == 4
    assert summary.final_submit_turn is None and summary.final_submit_line is None
    assert summary.attempts_before_final == 3


def test_a_kernel_never_submitted_in_the_trace_points_at_the_last_submit():
    summary = trace_summarize(data=episode(), final_source="something else")
    assert summary.final_submit_line == 11


def test_the_packed_trace_is_gzip_of_the_original_bytes_in_page_members():
    data = b"".join(
        json.dumps({"type": "message", "ts": n, "role": "user", "content": str(n)}).encode() + b"\n"
        for n in range(450)
    )
    packed = trace_pack(data=data)
    assert gzip.decompress(packed.data) == data
    assert [p["first_line"] for p in packed.pages] == [1, 201, 401]
    assert [p["lines"] for p in packed.pages] == [200, 200, 50]
    assert packed.pages[2]["types"] == {"message": 50}
    assert page_of_line(pages=packed.pages, line=401) == 2


def test_a_trace_without_a_final_newline_round_trips():
    data = b'{"type": "start", "ts": 0}\n{"type": "end", "ts": 1}'
    assert gzip.decompress(trace_pack(data=data).data) == data


def test_a_page_is_read_from_its_own_member_only():
    data = b"".join(
        json.dumps({"type": "message", "ts": n, "role": "user", "content": str(n)}).encode() + b"\n"
        for n in range(450)
    )
    packed = trace_pack(data=data)

    class Handle(io.BytesIO):
        reads: list[int] = []

        def read(self, size=-1):
            self.reads.append(size)
            return super().read(size)

    handle = Handle(packed.data)
    events, count = trace_page_read(handle=handle, pages=packed.pages, submit_lines=[], page=1)
    assert count == 3
    assert [e.line for e in events] == list(range(201, 401))
    assert events[0].data["content"] == "200"
    assert handle.reads == [packed.pages[1]["length"]]


def test_filtering_by_type_pages_over_the_matching_events_only():
    events = []
    for n in range(1000):
        events.append(
            {
                "type": "tool_call" if n % 3 == 0 else "message",
                "ts": n,
                "name": "x",
                "arguments": {},
                "role": "user",
                "content": "c",
            }
        )
    packed = trace_pack(data=trace_lines(*events).encode())
    calls = [n + 1 for n in range(1000) if n % 3 == 0]
    handle = io.BytesIO(packed.data)
    first, count = trace_page_read(
        handle=handle, pages=packed.pages, submit_lines=[], page=0, event_type="tool_call"
    )
    second, _ = trace_page_read(
        handle=handle, pages=packed.pages, submit_lines=[], page=1, event_type="tool_call"
    )
    assert count == 2
    assert [e.line for e in first] == calls[:PAGE_LINES]
    assert [e.line for e in second] == calls[PAGE_LINES:]


def test_each_submit_carries_its_diff_against_the_previous_one_even_across_pages():
    events = [{"type": "submit", "ts": 0, "source": "a = 1\n"}]
    events += [{"type": "message", "ts": n, "role": "user", "content": "c"} for n in range(300)]
    events += [{"type": "submit", "ts": 1, "source": "a = 2\n"}]
    packed = trace_pack(data=trace_lines(*events).encode())
    handle = io.BytesIO(packed.data)
    page0, _ = trace_page_read(handle=handle, pages=packed.pages, submit_lines=[1, 302], page=0)
    page1, _ = trace_page_read(handle=handle, pages=packed.pages, submit_lines=[1, 302], page=1)
    assert page0[0].diff == ""
    submit = next(e for e in page1 if e.type == "submit")
    assert "-a = 1\n+a = 2\n" in submit.diff
    assert submit.diff.startswith("--- submit at line 1\n+++ submit at line 302\n")

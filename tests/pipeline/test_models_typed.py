"""Typed reads of segment events: accessors for CONTENT / ARGUMENT / END payloads, END's segment type, and
error kinds that are Literals (so mypy catches a misspelt kind)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast, get_args

import pytest

from pipeline.models import (
    ArgumentErrorKind,
    PipelineEvent,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    ToolCallError,
    ToolCallErrorKind,
    ToolInvocation,
)
from pipeline.testing import replay
from tests.conftest import TESTS
from tests.reference import FIXTURES, call_id_for
from tests.typecheck import TEST_TIMEOUT, run_mypy

GOLDEN_INPUTS = TESTS / "golden" / "inputs"


def segments(events: list[PipelineEvent]) -> list[SegmentEvent]:
    return [event for event in events if isinstance(event, SegmentEvent)]


def test_content_and_argument_accessors() -> None:
    content = SegmentEvent.content("s", "hi")
    assert (content.delta, content.path, content.has_value, content.value) == ("hi", None, False, None)
    streaming = SegmentEvent.argument_delta("s", ("files", 0, "body"), "x")
    assert (streaming.path, streaming.delta, streaming.has_value) == (("files", 0, "body"), "x", False)
    complete = SegmentEvent.argument_value("s", ("n",), None)
    assert (complete.path, complete.delta, complete.has_value, complete.value) == (("n",), None, True, None)
    assert SegmentEvent.argument_value("s", (), {"a": 1}).path == ()


def test_start_and_end_accessors() -> None:
    start = SegmentEvent.start("c", SegmentType.TOOL_CALL, {"tool_name": "f", "call_id": "c"})
    assert (start.tool_name, start.call_id, start.arguments, start.error) == ("f", "c", None, None)
    error = {"kind": "truncated", "message": "cut off", "raw": '{"a": ', "offset": 6}
    end = SegmentEvent.end(
        "c",
        {"tool_name": "write_file", "call_id": "c", "arguments": {}, "error": error, "path": "a.py"},
        segment_type=SegmentType.WRITE_FILE,
    )
    assert end.segment_type is SegmentType.WRITE_FILE
    assert (end.tool_name, end.arguments, end.file_path) == ("write_file", {}, "a.py")
    assert end.error == ToolCallError("truncated", "cut off", '{"a": ', 6)
    bare = SegmentEvent.end("t")
    assert (bare.segment_type, bare.tool_name, bare.error, bare.file_path, bare.delta) == (
        None,
        None,
        None,
        None,
        None,
    )


def test_end_segment_type_is_not_on_the_wire() -> None:
    end = SegmentEvent.end("s", {"signature": "x"}, segment_type=SegmentType.REASONING)
    assert end.to_dict() == {
        "type": "SEGMENT_END",
        "segment_id": "s",
        "payload": {"metadata": {"signature": "x"}},
    }


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "tool_format"),
    [
        (GOLDEN_INPUTS / "hermes_file_tools_and_invalid_json.txt", "hermes"),
        (FIXTURES / "anthropic" / "pydantic-ai_claude_parallel_server_tool_uses.sse", None),
        (FIXTURES / "gemini" / "pydantic-ai_gemini-2.5-pro_thought_summaries_then_text_signature.sse", None),
        (
            FIXTURES
            / "anthropic"
            / "anthropic-sdk-python_claude-3-7-sonnet_tool_use_truncated_max_tokens.sse",
            None,
        ),
    ],
    ids=lambda value: getattr(value, "stem", str(value)),
)
async def test_every_end_carries_its_start_segment_type(path: Path, tool_format: str | None) -> None:
    events = segments(await replay(path, tool_format=cast(Any, tool_format), id_factory=call_id_for))
    started = {
        event.segment_id: event.segment_type for event in events if event.event_type is SegmentEventType.START
    }
    ends = [event for event in events if event.event_type is SegmentEventType.END]
    assert ends
    assert len(ends) == len(started)
    assert {event.segment_id: event.segment_type for event in ends} == started
    assert all(
        event.segment_type is None
        for event in events
        if event.event_type not in {SegmentEventType.START, SegmentEventType.END}
    )


@pytest.mark.anyio
async def test_accessors_read_a_replayed_response() -> None:
    events = await replay(
        GOLDEN_INPUTS / "hermes_file_tools_and_invalid_json.txt", tool_format="hermes", id_factory=call_id_for
    )
    ends = {event.segment_id: event for event in segments(events) if event.event_type is SegmentEventType.END}
    assert ends["call_0"].segment_type is SegmentType.WRITE_FILE
    assert ends["call_0"].file_path == "src/a.py"
    assert ends["call_1"].segment_type is SegmentType.PATCH_FILE
    assert ends["call_2"].arguments == {"query": "cats", "limit": 3, "tags": ["a", {"b": None}]}
    broken = ends["call_3"].error
    assert broken is not None
    assert (broken.kind, broken.raw, broken.offset) == ("invalid_json", '{"a": 1, "b": tru}', 17)
    file_text = "".join(
        event.delta or ""
        for event in segments(events)
        if event.segment_id == "call_0" and event.event_type is SegmentEventType.CONTENT
    )
    assert file_text == 'def f():\n    return "\u00e9"\n'
    values = [
        (event.path, event.value)
        for event in segments(events)
        if event.segment_id == "call_2" and event.has_value
    ]
    assert values == [(("query",), "cats"), (("limit",), 3), (("tags",), ["a", {"b": None}])]
    invocation = next(event for event in events if isinstance(event, ToolInvocation) and event.id == "call_3")
    assert invocation.error == broken


def test_error_kinds_are_literals() -> None:
    assert set(get_args(ArgumentErrorKind)) == {"invalid_json", "truncated", "too_large"}
    assert set(get_args(ToolCallErrorKind)) == {
        "invalid_json",
        "truncated",
        "too_large",
        "interrupted",
        "not_an_object",
        "invalid_arguments",
        "missing_name",
    }


@pytest.mark.timeout(TEST_TIMEOUT)
def test_mypy_rejects_a_misspelt_error_kind(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from pipeline.models import ArgumentError, ToolCallError\n"
        'ToolCallError("truncated", "ok")\n'
        'ToolCallError("invalid-json", "typo")\n'
        'ArgumentError("interrupted", "not a splitter kind", 0)\n'
    )
    report, status = run_mypy("--strict", "--follow-imports=silent", "--config-file=", str(snippet))
    assert status == 1, report
    errors = [line for line in report.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["3", "4"], report

"""The seeds' synchronous API (seed documents 000, 003 and 004), over the same cores as the operators."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from pipeline import (
    ChunkResponse,
    ConfigurationError,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    ToolCallDelta,
)
from pipeline.seeds import (
    ApiToolCallStreamingResponseHandler,
    ParsingStreamingResponseHandler,
    PassThroughStreamingResponseHandler,
    create_streaming_handler,
)
from pipeline.seeds.handlers import PARSER_ENVIRONMENT_VARIABLE, StreamingResponseHandler, resolve_parser_name


def openai_like(
    call_id: str, name: str, arguments: str, *, index: int = 0, size: int = 7
) -> list[ChunkResponse]:
    """A call as OpenAI streams it: id and name first, then the arguments in pieces, then finished."""
    chunks = [ChunkResponse(tool_calls=[ToolCallDelta(index, call_id, name, "")])]
    for start in range(0, len(arguments), size):
        chunks.append(
            ChunkResponse(tool_calls=[ToolCallDelta(index, arguments_delta=arguments[start : start + size])])
        )
    chunks.append(ChunkResponse(tool_calls=[ToolCallDelta(index, finished=True)]))
    return chunks


def run(handler: StreamingResponseHandler, chunks: list[ChunkResponse]) -> list[SegmentEvent]:
    events = [event for chunk in chunks for event in handler.feed(chunk)]
    return events + handler.finalize()


def of_type(events: list[SegmentEvent], kind: SegmentEventType) -> list[SegmentEvent]:
    return [event for event in events if event.event_type is kind]


def test_text_and_a_tool_call_segment_whose_id_is_the_invocation_id() -> None:
    handler = ApiToolCallStreamingResponseHandler()
    events = run(
        handler,
        [ChunkResponse(content="Checking."), *openai_like("call_1", "get_weather", '{"city": "Paris"}')],
    )
    starts = of_type(events, SegmentEventType.START)
    assert [(event.segment_type, event.metadata.get("tool_name")) for event in starts] == [
        (SegmentType.TEXT, None),
        (SegmentType.TOOL_CALL, "get_weather"),
    ]
    assert starts[1].segment_id == "call_1"
    content = "".join(
        e.payload["delta"] for e in of_type(events, SegmentEventType.CONTENT) if e.segment_id == "call_1"
    )
    assert content == '{"city": "Paris"}'  # tool_call CONTENT is the raw JSON, for UIs that show it
    end = of_type(events, SegmentEventType.END)[-1]
    assert end.metadata["arguments"] == {"city": "Paris"}  # pre-parsed arguments on SEGMENT_END (seed 003)
    [invocation] = handler.get_all_invocations()
    assert (invocation.id, invocation.name, invocation.arguments) == (
        "call_1",
        "get_weather",
        {"city": "Paris"},
    )
    assert handler.get_all_events() == events


@pytest.mark.parametrize(
    ("tool", "key", "kind"), [("write_file", "content", "write_file"), ("patch_file", "patch", "patch_file")]
)
def test_file_tools_stream_decoded_content_and_fold_once(tool: str, key: str, kind: str) -> None:
    body = 'def main():\n\tprint("hi \\\\ there")\n'
    arguments = json.dumps({"path": "src/app.py", key: body})
    handler = ApiToolCallStreamingResponseHandler()
    events = run(handler, openai_like("call_f", tool, arguments, size=3))
    assert [event.segment_type for event in of_type(events, SegmentEventType.START)] == [SegmentType(kind)]
    streamed = "".join(event.payload["delta"] for event in of_type(events, SegmentEventType.CONTENT))
    assert streamed == body  # decoded text, escapes resolved, not JSON (seed 004)
    end = of_type(events, SegmentEventType.END)[0]
    assert end.metadata["path"] == "src/app.py"
    [invocation] = handler.get_all_invocations()  # no duplicate tool_call invocation
    assert invocation.id == "call_f"
    assert invocation.arguments == {"path": "src/app.py", key: body}


def test_file_content_before_path_still_reports_the_path() -> None:
    arguments = json.dumps({"content": "x = 1\n", "path": "late.py"})
    handler = ApiToolCallStreamingResponseHandler()
    events = run(handler, openai_like("call_late", "write_file", arguments, size=4))
    path_events = [e for e in of_type(events, SegmentEventType.ARGUMENT) if e.payload["path"] == ["path"]]
    assert path_events[-1].payload == {"path": ["path"], "value": "late.py"}
    assert of_type(events, SegmentEventType.END)[0].metadata["path"] == "late.py"


def test_non_file_tools_keep_tool_call_segments_and_one_invocation_per_call() -> None:
    handler = ApiToolCallStreamingResponseHandler()
    chunks = openai_like("a", "search", '{"q": "x"}') + openai_like(
        "b", "write_file", '{"path": "p", "content": ""}', index=1
    )
    run(handler, chunks)
    assert [(i.id, i.name) for i in handler.get_all_invocations()] == [("a", "search"), ("b", "write_file")]


def test_invalid_arguments_give_an_error_not_an_empty_dict() -> None:
    handler = ApiToolCallStreamingResponseHandler()
    run(handler, openai_like("c", "f", '{"a": 1,, }'))
    [invocation] = handler.get_all_invocations()
    assert invocation.error is not None
    assert invocation.error.kind == "invalid_json"
    assert invocation.error.raw == '{"a": 1,, }'


def test_unfinished_call_is_truncated_at_finalize() -> None:
    handler = ApiToolCallStreamingResponseHandler()
    run(handler, openai_like("c", "f", '{"a": "long')[:-1])
    [invocation] = handler.get_all_invocations()
    assert invocation.error is not None
    assert invocation.error.kind == "truncated"


def test_finalize_reset_and_feed_after_finalize() -> None:
    handler = ApiToolCallStreamingResponseHandler()
    run(handler, [ChunkResponse(content="a")])
    assert handler.finalize() == []
    with pytest.raises(RuntimeError, match="finalized"):
        handler.feed(ChunkResponse(content="b"))
    handler.reset()
    assert handler.get_all_events() == []
    assert handler.get_all_invocations() == []
    assert [e.event_type for e in run(handler, [ChunkResponse(content="b")])] == [
        SegmentEventType.START,
        SegmentEventType.CONTENT,
        SegmentEventType.END,
    ]


def test_a_failing_callback_is_logged_and_isolated(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[SegmentEvent] = []

    def callback(event: SegmentEvent) -> None:
        seen.append(event)
        raise RuntimeError("ui is down")

    handler = ApiToolCallStreamingResponseHandler(on_segment_event=callback, segment_id_prefix="agent1:")
    with caplog.at_level(logging.ERROR, logger="streamfold"):
        events = run(handler, [ChunkResponse(content="hello")])
    assert seen == events
    assert events[0].segment_id.startswith("agent1:")
    assert "on_segment_event raised" in caplog.text


def test_pass_through_ignores_tool_calls() -> None:
    handler = PassThroughStreamingResponseHandler()
    events = run(handler, [ChunkResponse(content="hi"), *openai_like("c", "f", "{}")])
    assert {event.segment_type for event in of_type(events, SegmentEventType.START)} == {SegmentType.TEXT}
    assert handler.get_all_invocations() == []


XML_CALL = (
    'Let me write it.<tool name="write_file"><arguments><arg name="path">a.py</arg>'
    '<arg name="content">__START_CONTENT__print("hi")\n__END_CONTENT__</arg></arguments></tool> Done.'
)


@pytest.mark.parametrize(
    ("parser", "text", "expected"),
    [
        ("xml", XML_CALL, ("write_file", {"path": "a.py", "content": 'print("hi")\n'})),
        (
            "json",
            'Sure. {"tool": {"function": "search", "parameters": {"query": "x"}}}',
            ("search", {"query": "x"}),
        ),
        (
            "sentinel",
            '[[SEG_START {"type": "write_file", "path": "notes.md"}]]\n# Notes\n[[SEG_END]]',
            ("write_file", {"path": "notes.md", "content": "# Notes\n"}),
        ),
        (
            "kimi_k2",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
            '{"a": 1}<|tool_call_end|><|tool_calls_section_end|>',
            ("f", {"a": 1}),
        ),
    ],
)
@pytest.mark.parametrize("size", [1, 3, 1000])
def test_parsing_handler_text_formats(
    parser: str, text: str, expected: tuple[str, dict[str, Any]], size: int
) -> None:
    handler = ParsingStreamingResponseHandler(parser_name=parser)
    run(handler, [ChunkResponse(content=text[i : i + size]) for i in range(0, len(text), size)])
    assert [(i.name, i.arguments) for i in handler.get_all_invocations()] == [expected]


def test_factory_and_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PARSER_ENVIRONMENT_VARIABLE, raising=False)
    assert isinstance(create_streaming_handler(), ApiToolCallStreamingResponseHandler)
    monkeypatch.setenv(PARSER_ENVIRONMENT_VARIABLE, "sentinel")
    handler = create_streaming_handler()
    assert isinstance(handler, ParsingStreamingResponseHandler)
    assert handler.parser_name == "sentinel"
    assert isinstance(create_streaming_handler(parse_tool_calls=False), PassThroughStreamingResponseHandler)
    assert isinstance(create_streaming_handler("api_tool_call"), ApiToolCallStreamingResponseHandler)
    assert resolve_parser_name(" XML ") == "xml"


def test_native_is_refused_with_a_message_naming_api_tool_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PARSER_ENVIRONMENT_VARIABLE, "native")
    with pytest.raises(ConfigurationError, match="api_tool_call"):
        create_streaming_handler()


def test_unknown_parser_names_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match="kimi_k2"):
        create_streaming_handler("nonsense")

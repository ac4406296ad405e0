"""The OpenAI Chat converter under hostile or unusual input: many calls, repeated ids, mistyped choice
indexes, nameless calls, openai-python's ``.stream()`` helper, Groq's executed tools."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter.sse import EventParser, SSEDecoder
from operators.convert.openai_chat import DEFAULT_MAX_HELD_ARGUMENTS, OpenAIChatConverter
from pipeline import PipelineEvent, ResponseEnd, SegmentEvent, SegmentEventType, ToolInvocation, process
from pipeline.errors import ConverterError
from pipeline.models import ChunkResponse, SegmentType, ToolCallDelta, ToolCallError, ToolResult
from pipeline.testing import counter_segment_ids, sequential_call_ids
from tests.conftest import FIXTURES
from tests.converter_cases import collect, run_converter, sequential_ids

try:  # the HTTP client openai-python is built on: httpx2 in its newer releases, httpx in the older ones
    import httpx2 as httpx
except ImportError:
    import httpx  # type: ignore[no-redef]

PARALLEL = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"


def convert(*events: Any) -> list[ChunkResponse]:
    return run_converter(OpenAIChatConverter(id_factory=sequential_ids), events)


def chunk(delta: dict[str, Any], finish_reason: str | None = None, index: Any = 0) -> dict[str, Any]:
    return {"choices": [{"index": index, "delta": delta, "finish_reason": finish_reason}]}


def call(index: int | None, id: str | None, name: str | None, args: str | None) -> dict[str, Any]:
    raw: dict[str, Any] = {"function": {}}
    if index is not None:
        raw["index"] = index
    if id is not None:
        raw["id"] = id
    if name is not None:
        raw["function"]["name"] = name
    if args is not None:
        raw["function"]["arguments"] = args
    return raw


def tools(*calls: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return chunk({"tool_calls": list(calls)}, finish_reason)


async def items(values: list[Any]) -> AsyncIterator[Any]:
    for value in values:
        yield value


async def run(events: list[Any], **options: Any) -> tuple[list[PipelineEvent], BaseException | None]:
    """Every pipeline event of ``events`` through ``process()``, and the error that ended it, if any."""
    received: list[PipelineEvent] = []
    try:
        await collect(
            process(
                items(events),
                id_factory=sequential_call_ids,
                segment_ids=counter_segment_ids(),
                **options,
            ),
            received,
        )
    except ConverterError as exc:
        return received, exc
    return received, None


def invocations(events: list[PipelineEvent]) -> list[ToolInvocation]:
    return [event for event in events if isinstance(event, ToolInvocation)]


class TestClosingManyCalls:
    @staticmethod
    def lines_run_to_close(calls: int) -> int:
        """Lines of the converter run while the ``finish_reason`` chunk closes ``calls`` open calls."""
        converter = OpenAIChatConverter(id_factory=sequential_ids)
        for position in range(calls):
            converter.feed(tools(call(position, f"c{position}", "f", "{}")))
        count = 0

        def trace(frame: FrameType, event: str, arg: object) -> Any:
            nonlocal count
            if frame.f_code.co_filename.endswith("openai_chat.py"):
                if event == "line":
                    count += 1
                return trace
            return None

        sys.settrace(trace)
        try:
            [closing] = converter.feed(tools(finish_reason="tool_calls"))
        finally:
            sys.settrace(None)
        assert closing.tool_calls == [ToolCallDelta(position, finished=True) for position in range(calls)]
        return count

    def test_closing_calls_costs_the_same_per_call(self) -> None:
        """Each open call used to be looked up by a scan of the chunk's deltas: quadratic in the calls."""
        small, large = self.lines_run_to_close(200), self.lines_run_to_close(800)
        assert large < 4.4 * small  # linear: 4x the calls, 4x the lines (quadratic was about 13x)

    def test_a_finish_chunk_that_also_streams_arguments_marks_their_last_delta(self) -> None:
        assert convert(
            tools(call(0, "a", "f", "{"), call(1, "b", "g", "{")),
            tools(call(1, None, None, "}"), call(0, None, None, "}"), finish_reason="tool_calls"),
        )[1] == ChunkResponse(
            tool_calls=[
                ToolCallDelta(1, arguments_delta="}", finished=True),
                ToolCallDelta(0, arguments_delta="}", finished=True),
            ],
            finish_reason="tool_calls",
            metadata={"stop_reason": "tool_calls"},
        )


class TestRepeatedIds:
    EVENTS = (
        tools(call(0, "dup", "f", '{"a": 1}')),
        tools(call(1, "dup", "g", '{"b": ')),
        tools(call(1, None, None, "2}")),
        tools(finish_reason="tool_calls"),
    )

    def test_two_calls_with_one_id_keep_their_positions_and_the_id(self) -> None:
        assert [c.tool_calls for c in convert(*self.EVENTS)[:4]] == [
            [ToolCallDelta(0, "dup", "f", '{"a": 1}')],
            [ToolCallDelta(1, "dup", "g", '{"b": ')],
            [ToolCallDelta(1, arguments_delta="2}")],
            [ToolCallDelta(0, finished=True), ToolCallDelta(1, finished=True)],
        ]

    def test_without_index_an_earlier_calls_id_is_a_new_call(self) -> None:
        chunks = convert(
            tools(call(None, "x", "f", "{}")),
            tools(call(None, "y", "g", "{}")),
            tools(call(None, "x", "h", "{}")),
            tools(call(None, "x", None, "")),
        )
        assert [c.tool_calls for c in chunks[:3]] == [
            [ToolCallDelta(0, "x", "f", "{}")],
            [ToolCallDelta(1, "y", "g", "{}")],
            [ToolCallDelta(2, "x", "h", "{}")],
        ]
        assert chunks[3] == ChunkResponse(is_complete=True)

    @pytest.mark.anyio
    async def test_through_process_one_invocation_per_call(self) -> None:
        events, error = await run(list(self.EVENTS), provider="openai")
        assert error is None
        assert [(i.id, i.name, i.arguments, i.error) for i in invocations(events)] == [
            ("dup", "f", {"a": 1}, None),
            ("dup_2", "g", {"b": 2}, None),
        ]
        second = next(
            e
            for e in events
            if isinstance(e, SegmentEvent)
            and e.event_type is SegmentEventType.START
            and e.segment_id == "dup_2"
        )
        assert second.metadata["provider_call_id"] == "dup"


class TestChoiceIndex:
    @pytest.mark.parametrize("index", ["0", True, [0], 0.0])
    def test_a_mistyped_index_names_the_field(self, index: Any) -> None:
        converter = OpenAIChatConverter()
        assert converter.feed(chunk({"content": "a"})) == [ChunkResponse(content="a")]
        with pytest.raises(
            ConverterError, match=re.escape("event 1: field 'choices[0].index': Expected `int | null`")
        ):
            converter.feed(chunk({"content": "lost?"}, index=index))

    def test_true_is_not_choice_one(self) -> None:
        converter = OpenAIChatConverter(choice=1)
        with pytest.raises(ConverterError, match=re.escape("choices[0].index")):
            converter.feed(chunk({"content": "x"}, index=True))

    def test_an_event_with_a_bad_choice_is_refused_whole(self) -> None:
        """The event does not fit the chunk's schema: nothing of it is taken (no call is announced)."""
        converter = OpenAIChatConverter(id_factory=sequential_ids)
        event = {
            "choices": [
                {"index": 0, "delta": {"content": "x", "tool_calls": [call(0, "c", "f", "{}")]}},
                {"index": "1", "delta": {"content": "y"}},
            ]
        }
        with pytest.raises(ConverterError, match=re.escape("event 0: field 'choices[1].index'")) as caught:
            converter.feed(event)
        assert caught.value.partial_outputs == []
        assert converter.feed(chunk({"tool_calls": [call(0, "c", "f", "{}")]})) == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, "c", "f", "{}")])
        ]

    def test_a_wrong_field_after_the_text_of_a_delta_refuses_the_delta(self) -> None:
        converter = OpenAIChatConverter()
        with pytest.raises(ConverterError, match=re.escape("choices[0].delta.tool_calls")) as caught:
            converter.feed(chunk({"content": "kept", "tool_calls": "nope"}))
        assert caught.value.partial_outputs == []

    @pytest.mark.anyio
    async def test_through_process_the_text_before_comes_out_then_the_error(self) -> None:
        events, error = await run([chunk({"content": "a"}), chunk({"content": "b"}, index="0")])
        assert isinstance(error, ConverterError)
        assert "choices[0].index" in str(error)
        assert [e.to_dict() for e in events if isinstance(e, SegmentEvent)] == [
            {"type": "SEGMENT_START", "segment_id": "text_0", "segment_type": "text", "payload": {}},
            {"type": "SEGMENT_CONTENT", "segment_id": "text_0", "payload": {"delta": "a"}},
            {"type": "SEGMENT_END", "segment_id": "text_0", "payload": {}},
        ]


class TestNamelessCalls:
    def test_arguments_held_before_the_name_are_capped(self) -> None:
        converter = OpenAIChatConverter(id_factory=sequential_ids, max_held_arguments=10)
        assert converter.feed(tools(call(0, None, None, "x" * 6))) == []
        with pytest.raises(
            ConverterError,
            match="event 1: tool call 0 sent more than 10 characters of arguments before its function name",
        ) as caught:
            converter.feed(tools(call(0, None, None, "y" * 6)))
        assert caught.value.partial_outputs == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, "gen_0", None, "x" * 6 + "y" * 6)])
        ]

    def test_the_default_cap_is_the_argument_cap(self) -> None:
        from operators.arguments.splitter import DEFAULT_MAX_ARGUMENT_SIZE

        assert DEFAULT_MAX_HELD_ARGUMENTS == DEFAULT_MAX_ARGUMENT_SIZE

    def test_a_name_within_the_cap_gets_everything_held(self) -> None:
        converter = OpenAIChatConverter(id_factory=sequential_ids, max_held_arguments=10)
        assert converter.feed(tools(call(0, None, None, "x" * 10))) == []
        assert converter.feed(tools(call(0, None, "f", "y"))) == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, "gen_0", "f", "x" * 10 + "y")])
        ]

    def test_a_call_without_a_name_at_the_end_of_the_stream_comes_out_then_fails(self) -> None:
        converter = OpenAIChatConverter(id_factory=sequential_ids)
        assert converter.feed(tools(call(0, "c", None, '{"a": 1}'))) == []
        with pytest.raises(
            ConverterError, match="end of stream after event 0: tool call 0 never got a function name"
        ) as caught:
            converter.finish()
        assert caught.value.partial_outputs == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, "c", None, '{"a": 1}')])
        ]

    @pytest.mark.anyio
    async def test_through_process_a_nameless_call_at_the_end_is_one_invocation_with_an_error(self) -> None:
        events, error = await run([tools(call(0, "c", None, '{"a": 1}'))], provider="openai")
        assert isinstance(error, ConverterError)
        [invocation] = invocations(events)
        assert invocation.id == "c"
        assert invocation.name == ""
        assert invocation.error == ToolCallError(
            "missing_name", "the call never got a function name", '{"a": 1}'
        )

    @pytest.mark.anyio
    async def test_through_process_a_nameless_call_at_finish_reason_beside_a_named_one(self) -> None:
        events, error = await run(
            [tools(call(0, "a", "f", "{}"), call(1, "b", None, "{}")), tools(finish_reason="tool_calls")],
            provider="openai",
        )
        assert isinstance(error, ConverterError)
        assert "event 1: tool call 1 ended without a function name" in str(error)
        assert [(i.id, i.name, i.error.kind if i.error else None) for i in invocations(events)] == [
            ("a", "f", None),
            ("b", "", "missing_name"),
        ]

    @pytest.mark.anyio
    async def test_through_process_held_arguments_past_the_cap(self, monkeypatch: pytest.MonkeyPatch) -> None:
        defaults = OpenAIChatConverter.__init__.__kwdefaults__
        assert defaults is not None
        monkeypatch.setitem(defaults, "max_held_arguments", 32)
        events, error = await run([tools(call(0, "c", None, "x" * 20)), tools(call(0, None, None, "y" * 20))])
        assert isinstance(error, ConverterError)
        assert "event 1: tool call 0 sent more than 32 characters" in str(error)
        [invocation] = invocations(events)
        assert (invocation.id, invocation.name) == ("c", "")
        assert invocation.error is not None
        assert (invocation.error.kind, invocation.error.raw) == ("missing_name", "x" * 20 + "y" * 20)

    @pytest.mark.anyio
    async def test_an_announced_call_cut_off_at_the_end_is_truncated(self) -> None:
        events, error = await run([tools(call(0, "c", "f", '{"a": '))], provider="openai")
        assert error is None
        [invocation] = invocations(events)
        assert invocation.error is not None
        assert invocation.error.kind == "truncated"


@asynccontextmanager
async def helper_stream(body: bytes) -> AsyncIterator[Any]:
    """openai-python's ``client.chat.completions.stream()`` over a recorded SSE body (no network)."""
    import openai

    def serve(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(serve)) as http:
        client = openai.AsyncOpenAI(api_key="test", base_url="http://127.0.0.1:9/v1", http_client=http)
        messages: Any = [{"role": "user", "content": "weather and stock"}]
        async with client.chat.completions.stream(model="gpt-4o", messages=messages) as stream:
            yield stream


class TestStreamHelper:
    @pytest.mark.anyio
    @pytest.mark.parametrize("provider", ["openai", "auto"])
    async def test_the_helpers_events_give_what_the_bytes_give(self, provider: str) -> None:
        body = PARALLEL.read_bytes()
        expected, error = await run([body])
        assert error is None
        async with helper_stream(body) as stream:
            got, error = await run([event async for event in stream], provider=provider)
        assert error is None
        assert got == expected
        assert [(i.name, i.arguments) for i in invocations(got)] == [
            ("GetWeatherArgs", {"city": "Edinburgh", "country": "GB", "units": "c"}),
            ("get_stock_price", {"ticker": "AAPL", "exchange": "NASDAQ"}),
        ]
        assert isinstance(got[-1], ResponseEnd)
        assert got[-1].finish_reason == "tool_calls"

    @pytest.mark.anyio
    async def test_the_helper_stream_itself_as_the_source(self) -> None:
        async with helper_stream(PARALLEL.read_bytes()) as stream:
            events = await collect(process(stream, id_factory=sequential_call_ids))
        assert len(invocations(events)) == 2

    def test_derived_events_say_nothing_and_chunk_events_are_read(self) -> None:
        inner = chunk({"content": "hi"})
        assert convert(
            {"type": "chunk", "chunk": inner, "snapshot": {"choices": []}},
            {"type": "content.delta", "delta": "hi", "snapshot": "hi"},
            {"type": "tool_calls.function.arguments.done", "name": "f", "index": 0, "arguments": "{}"},
        ) == [ChunkResponse(content="hi"), ChunkResponse(is_complete=True)]

    def test_a_chunk_event_without_its_chunk(self) -> None:
        with pytest.raises(ConverterError, match="event 0: field 'chunk' should be an object"):
            convert({"type": "chunk", "chunk": None})


GROQ_HEAD = {
    "id": "chatcmpl-3b1e",
    "object": "chat.completion.chunk",
    "created": 1757000000,
    "model": "groq/compound",
    "system_fingerprint": None,
}
SEARCH_ARGUMENTS = '{"query": "Paris weather today"}'
SEARCH_RESULTS = {
    "results": [
        {
            "title": "Paris, France Weather Forecast",
            "url": "https://weather.example/paris",
            "content": "Sunny, 24 C",
            "score": 0.91,
        }
    ]
}


def groq(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        **GROQ_HEAD,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


GROQ_EVENTS = [
    groq({"role": "assistant", "content": ""}),
    groq({"reasoning": "I should search."}),
    groq({"executed_tools": [{"index": 0, "type": "search", "arguments": SEARCH_ARGUMENTS}]}),
    groq(
        {
            "executed_tools": [
                {
                    "index": 0,
                    "type": "search",
                    "arguments": SEARCH_ARGUMENTS,
                    "output": "Title: Paris, France Weather Forecast\nURL: https://weather.example/paris\n",
                    "search_results": SEARCH_RESULTS,
                }
            ]
        }
    ),
    groq({"content": "It is sunny."}),
    groq({}, "stop"),
    {
        **GROQ_HEAD,
        "choices": [],
        "x_groq": {"id": "req_1", "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}},
    },
]
SEARCH_OUTPUT = {
    "output": "Title: Paris, France Weather Forecast\nURL: https://weather.example/paris\n",
    "search_results": SEARCH_RESULTS,
}


class TestGroqExecutedTools:
    def test_an_executed_tool_is_a_server_call_and_a_result(self) -> None:
        chunks = convert(*GROQ_EVENTS)
        assert chunks[2:4] == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, "gen_0", "search", SEARCH_ARGUMENTS, kind="server")]),
            ChunkResponse(
                tool_calls=[ToolCallDelta(0, finished=True, kind="server")],
                tool_results=[ToolResult(call_id="gen_0", name="search", content=SEARCH_OUTPUT)],
            ),
        ]
        assert chunks[-1] == ChunkResponse(is_complete=True, finish_reason="stop")

    def test_a_whole_executed_tool_in_one_delta_and_a_second_one(self) -> None:
        whole = {"index": 0, "type": "python", "arguments": '{"code": "1+1"}', "output": "2"}
        chunks = convert(
            groq({"executed_tools": [whole, {"index": 1, "type": "search", "arguments": "{}"}]}),
            groq({"executed_tools": [{"index": 1, "type": "search", "arguments": "{}", "output": ""}]}),
        )
        assert chunks[:2] == [
            ChunkResponse(
                tool_calls=[
                    ToolCallDelta(0, "gen_0", "python", '{"code": "1+1"}', kind="server"),
                    ToolCallDelta(0, finished=True, kind="server"),
                    ToolCallDelta(1, "gen_1", "search", "{}", kind="server"),
                ],
                tool_results=[ToolResult(call_id="gen_0", name="python", content={"output": "2"})],
                metadata={"id": "chatcmpl-3b1e", "model": "groq/compound", "created": 1757000000},
            ),
            ChunkResponse(
                tool_calls=[ToolCallDelta(1, finished=True, kind="server")],
                tool_results=[ToolResult(call_id="gen_1", name="search", content={"output": ""})],
            ),
        ]

    def test_mistyped_executed_tools(self) -> None:
        with pytest.raises(
            ConverterError,
            match=re.escape("'choices[0].delta.executed_tools[0]': Object missing required field `index`"),
        ):
            convert(groq({"executed_tools": [{"type": "search", "arguments": "{}"}]}))
        with pytest.raises(
            ConverterError, match=re.escape("field 'choices[0].delta.executed_tools': Expected `array")
        ):
            convert(groq({"executed_tools": {"index": 0}}))

    @pytest.mark.anyio
    async def test_through_process(self) -> None:
        events, error = await run(GROQ_EVENTS, provider="openai")
        assert error is None
        [invocation] = invocations(events)
        assert invocation == ToolInvocation(
            "call_0", "search", json.loads(SEARCH_ARGUMENTS), provider_executed=True
        )
        starts = [
            (e.segment_type, e.metadata)
            for e in events
            if isinstance(e, SegmentEvent) and e.event_type is SegmentEventType.START
        ]
        assert starts[1:3] == [
            (
                SegmentType.TOOL_CALL,
                {"tool_name": "search", "call_id": "call_0", "provider_executed": True},
            ),
            (
                SegmentType.TOOL_RESULT,
                {"call_id": "call_0", "tool_name": "search", "provider_executed": True},
            ),
        ]
        result_end = next(
            e
            for e in events
            if isinstance(e, SegmentEvent) and e.event_type is SegmentEventType.END and "result" in e.metadata
        )
        assert result_end.metadata["result"] == SEARCH_OUTPUT


@settings(max_examples=40, deadline=None)
@given(size=st.integers(min_value=1, max_value=200))
def test_groq_executed_tools_at_any_chunking_of_the_bytes(size: int) -> None:
    data = b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in GROQ_EVENTS)
    data += b"data: [DONE]\n\n"
    decoder, parser = SSEDecoder(), EventParser()
    converter = OpenAIChatConverter(id_factory=sequential_ids)
    chunks: list[ChunkResponse] = []
    for start in range(0, len(data), size):
        for event in decoder.feed(data[start : start + size]):
            for payload in parser.feed(event):
                chunks.extend(converter.feed(payload))
    for event in decoder.finish():
        for payload in parser.feed(event):
            chunks.extend(converter.feed(payload))
    chunks.extend(converter.finish())
    assert chunks == convert(*GROQ_EVENTS)

"""The proxy's other front doors: ``/v1/responses`` (the real openai client) and ``/v1/messages`` (the real
anthropic client) over a Chat Completions upstream replaying recorded model output; the reasoning option
(``reasoning_tags``) on all three routes; the encoders' cores at every split."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import httpx
import openai
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseStreamEvent

from operators.encode.anthropic import MessagesEncoder
from operators.encode.responses import ResponsesEncoder
from pipeline.models import ChunkResponse
from pipeline.proxy._front import ChunkPipeline, StreamCore
from pipeline.proxy.app import create_app
from pipeline.proxy.messages import MessagesWire
from pipeline.proxy.messages import chat_request as messages_chat_request
from pipeline.proxy.responses import ResponsesWire
from pipeline.proxy.responses import chat_request as responses_chat_request
from tests.conftest import FIXTURES
from tests.proxy_upstream import (
    USAGE,
    FakeUpstream,
    Scenario,
    chat_completion,
    chat_sse,
    closed_port,
    serving,
    split_bytes,
    sse_events,
)

RAW = FIXTURES / "raw_model_output"
KIMI = (RAW / "vllm-test_kimi-k2_text_then_single_tool.txt").read_text()
GLM = (RAW / "vllm-test_glm-4.5_think_text_then_tool_arg_key_value.txt").read_text()
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "date": {"type": "string"}}}
RESPONSES_TOOLS: list[Any] = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
MESSAGES_TOOLS: list[Any] = [{"name": "get_weather", "input_schema": WEATHER}]
EVENTS: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponseStreamEvent)


@asynccontextmanager
async def proxy(upstream: FakeUpstream, **options: Any) -> AsyncIterator[str]:
    options.setdefault("tool_format", "kimi_k2")
    async with serving(upstream.app) as upstream_url, serving(create_app(upstream_url, **options)) as url:
        yield url


@asynccontextmanager
async def openai_client(url: str) -> AsyncIterator[Any]:
    """The real openai client (typed ``Any``: the tests read the SDK's unions by their ``type``)."""
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="k", max_retries=0) as client:
        yield client


@asynccontextmanager
async def anthropic_client(url: str) -> AsyncIterator[Any]:
    async with anthropic.AsyncAnthropic(base_url=url, api_key="key", max_retries=0) as client:
        yield client


def kimi_upstream() -> FakeUpstream:
    upstream = FakeUpstream()
    upstream.add("kimi", Scenario(sse_events(chat_sse([KIMI[:15], KIMI[15:60], KIMI[60:]]))))
    upstream.add("glm", Scenario(sse_events(chat_sse(list(GLM)))))
    return upstream


# --- /v1/responses ----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_responses_stream_create_helper_and_whole_with_the_openai_client() -> None:
    upstream = kimi_upstream()
    async with proxy(upstream) as url, openai_client(url) as client:
        events = [
            event
            async for event in await client.responses.create(
                model="kimi", input="weather?", tools=RESPONSES_TOOLS, stream=True
            )
        ]
        async with client.responses.stream(model="kimi", input="weather?", tools=RESPONSES_TOOLS) as stream:
            async for _ in stream:
                pass
            final = await stream.get_final_response()
        whole = await client.responses.create(model="kimi", input="weather?", tools=RESPONSES_TOOLS)
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert [event.type for event in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    for response in (events[-1].response, final, whole):
        assert response.status == "completed"
        message, call = response.output
        assert message.type == "message"
        assert message.content[0].text == "I'll check. "
        assert call.type == "function_call"
        assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Beijing"})
        assert call.call_id
        assert response.usage is not None
        assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 22)
    sent = upstream.requests_for("kimi")[0].body
    assert sent["messages"] == [{"role": "user", "content": "weather?"}]
    assert sent["tools"] == [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    assert (sent["stream"], sent["stream_options"]) == (True, {"include_usage": True})


@pytest.mark.anyio
async def test_responses_multi_turn_input_becomes_the_chat_history() -> None:
    upstream = kimi_upstream()
    async with proxy(upstream) as url, openai_client(url) as client:
        await client.responses.create(
            model="kimi",
            instructions="be brief",
            input=[
                {"role": "user", "content": "weather?"},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "I'll"}],
                },
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "get_weather",
                    "arguments": '{"city":"B"}',
                },
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            ],
            tools=RESPONSES_TOOLS,
            tool_choice={"type": "function", "name": "get_weather"},
            max_output_tokens=50,
        )
    sent = upstream.requests_for("kimi")[0].body
    assert sent["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "I'll",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"B"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["max_tokens"] == 50


def test_responses_request_refuses_what_a_chat_upstream_cannot_serve() -> None:
    with pytest.raises(Exception, match=r"tools\[0\].*'web_search'"):
        responses_chat_request({"model": "m", "input": "x", "tools": [{"type": "web_search"}]})
    with pytest.raises(Exception, match="previous_response_id"):
        responses_chat_request({"model": "m", "input": "x", "previous_response_id": "resp_1"})


def responses_core(tags: str | None = None, request: dict[str, Any] | None = None) -> StreamCore:
    chunks = ChunkPipeline(
        "glm45" if tags else "kimi_k2",
        reasoning_tags=tags,
        tool_schemas={"get_weather": WEATHER},
        max_event_size=1 << 20,
        max_response_bytes=1 << 20,
    )
    return StreamCore(chunks, ResponsesWire(request or {"model": "m"}))


def parse_sse(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for frame in data.split(b"\n\n"):
        if frame:
            name, payload = frame.split(b"\n", 1)
            out.append((name.removeprefix(b"event: ").decode(), json.loads(payload.removeprefix(b"data: "))))
    return out


def test_responses_events_validate_against_the_sdk_union_and_fail_keeps_the_output() -> None:
    body = chat_sse([KIMI[:40]], finish_reason=None, usage=None, done=False)
    core = responses_core()
    events = parse_sse(
        core.feed(body) + core.fail({"error": {"message": "cut", "code": "upstream_disconnected"}})
    )
    for name, event in events:
        assert EVENTS.validate_python(event).type == name
    failed = events[-1][1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["error"] == {"code": "server_error", "message": "upstream_disconnected: cut"}
    assert failed["response"]["output"][0]["content"][0]["text"] == KIMI[:40]  # what the rewriter held too


def test_responses_stream_without_finish_reason_fails_and_length_is_incomplete() -> None:
    core = responses_core()
    events = parse_sse(core.feed(chat_sse(["hi"], finish_reason=None)) + core.finish())
    assert events[-1][1]["response"]["error"]["message"].startswith("upstream_truncated: ")
    core = responses_core()
    events = parse_sse(core.feed(chat_sse(["hi"], finish_reason="length")) + core.finish())
    assert events[-1][0] == "response.incomplete"
    assert events[-1][1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


# --- reasoning tags ---------------------------------------------------------------------------------------


def glm_outcome(data: list[bytes], tags: str | None) -> tuple[str, str, list[tuple[str, Any]]]:
    core = responses_core(tags)
    raw = b"".join(core.feed(piece) for piece in data) + core.finish()
    response = parse_sse(raw)[-1][1]["response"]
    reasoning = "".join(
        part["text"] for item in response["output"] if item["type"] == "reasoning" for part in item["content"]
    )
    text = "".join(
        part["text"] for item in response["output"] if item["type"] == "message" for part in item["content"]
    )
    calls = [
        (item["name"], json.loads(item["arguments"]))
        for item in response["output"]
        if item["type"] == "function_call"
    ]
    return reasoning, text, calls


def test_reasoning_tags_become_a_reasoning_item_at_every_split() -> None:
    body = chat_sse([GLM])
    expected = (
        "I want to get the weather.",
        "\n\nI will help you get the weather.\n",
        [("get_weather", {"city": "Beijing", "date": "2025-08-01"})],
    )
    for cut in range(1, len(body)):
        assert glm_outcome([body[:cut], body[cut:]], "think") == expected, cut
    per_char = chat_sse(list(GLM))
    assert glm_outcome(split_bytes(per_char, [7]), "think") == expected
    reasoning, text, _ = glm_outcome([body], None)
    assert (reasoning, text.startswith("<think>I want")) == ("", True)


@pytest.mark.anyio
async def test_reasoning_tags_on_the_chat_route_streamed_and_whole() -> None:
    upstream = FakeUpstream()
    upstream.add("glm", Scenario(sse_events(chat_sse(list(GLM)))))
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    async with (
        proxy(upstream, tool_format="glm45", reasoning_tags="think") as url,
        httpx.AsyncClient() as http,
    ):
        response = await http.post(
            url + "/v1/chat/completions",
            json={
                "model": "glm",
                "messages": [{"role": "user", "content": "x"}],
                "tools": tools,
                "stream": True,
            },
        )
    deltas = [
        json.loads(line[6:])["choices"][0]["delta"]
        for line in response.text.split("\n\n")
        if line.startswith("data: {") and json.loads(line[6:])["choices"]
    ]
    assert "".join(delta.get("reasoning_content") or "" for delta in deltas) == "I want to get the weather."
    assert "".join(delta.get("content") or "" for delta in deltas) == "\n\nI will help you get the weather.\n"
    assert [
        call["function"]["name"] for delta in deltas for call in delta.get("tool_calls") or () if "id" in call
    ] == ["get_weather"]


# --- /v1/messages -----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_messages_stream_and_create_with_the_anthropic_client() -> None:
    upstream = kimi_upstream()
    async with (
        proxy(upstream, tool_format="glm45", reasoning_tags="think") as url,
        anthropic_client(url) as client,
    ):
        async with client.messages.stream(
            model="glm",
            max_tokens=100,
            messages=[{"role": "user", "content": "weather?"}],
            tools=MESSAGES_TOOLS,
        ) as stream:
            kinds = [event.type async for event in stream]
            final = await stream.get_final_message()
        whole = await client.messages.create(
            model="glm",
            max_tokens=100,
            messages=[{"role": "user", "content": "weather?"}],
            tools=MESSAGES_TOOLS,
        )
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    for message in (final, whole):
        thinking, text, tool = message.content
        assert thinking.type == "thinking"
        assert thinking.thinking == "I want to get the weather."
        assert thinking.signature == ""
        assert text.type == "text"
        assert text.text == "\n\nI will help you get the weather.\n"
        assert tool.type == "tool_use"
        assert tool.name == "get_weather"
        assert tool.input == {"city": "Beijing", "date": "2025-08-01"}
        assert message.stop_reason == "tool_use"
        assert (message.usage.input_tokens, message.usage.output_tokens) == (
            USAGE["prompt_tokens"],
            USAGE["completion_tokens"],
        )
    sent = upstream.requests_for("glm")[0]
    assert sent.headers["authorization"] == "Bearer key"
    assert sent.body["max_tokens"] == 100


def test_messages_request_translation_of_tool_use_and_tool_result() -> None:
    chat = messages_chat_request(
        {
            "model": "m",
            "max_tokens": 10,
            "system": [{"type": "text", "text": "sys"}],
            "messages": [
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hm", "signature": ""},
                        {"type": "text", "text": "ok"},
                        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "B"}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                        {"type": "text", "text": "thanks"},
                    ],
                },
            ],
            "tools": MESSAGES_TOOLS,
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        }
    )
    assert chat["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "ok",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"B"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "sunny"},
        {"role": "user", "content": "thanks"},
    ]
    assert (chat["tool_choice"], chat["parallel_tool_calls"]) == ("required", False)
    assert chat["tools"] == [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]


@pytest.mark.anyio
async def test_messages_refuses_no_messages_and_images_without_their_data() -> None:
    """As the real API: ``messages: []`` and a base64 image without its ``data`` (or ``media_type``) are
    400s naming the field, before the upstream is asked (it got ``data:None;base64,None``)."""
    upstream = kimi_upstream()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}
    async with proxy(upstream) as url, anthropic_client(url) as client:
        with pytest.raises(anthropic.BadRequestError, match=r"messages: Expected `array` of length >= 1"):
            await client.messages.create(model="kimi", max_tokens=5, messages=[])
        with pytest.raises(
            anthropic.BadRequestError,
            match=r"messages\[0\]\.content\[1\]\.source: a base64 image needs its media_type and data",
        ):
            await client.messages.create(
                model="kimi",
                max_tokens=5,
                messages=[{"role": "user", "content": [{"type": "text", "text": "what is it?"}, image]}],
            )
    assert upstream.requests_for("kimi") == []


@pytest.mark.anyio
async def test_messages_mid_stream_failure_is_an_error_event_the_sdk_raises() -> None:
    upstream = FakeUpstream()
    upstream.add("cut", Scenario(sse_events(chat_sse(["partial answer"])), cut_after=2))
    async with proxy(upstream) as url, anthropic_client(url) as client:
        texts: list[str] = []

        async def read() -> None:
            async with client.messages.stream(
                model="cut", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            ) as stream:
                async for event in stream:
                    if event.type == "text":
                        texts.append(event.text)

        with pytest.raises(anthropic.APIStatusError, match="cut off"):
            await read()
    assert texts == ["partial answer"]


def test_encoders_pass_chunks_without_a_stream() -> None:
    """The encoders' cores alone: a call that the provider finishes closes its block at once."""
    from pipeline.models import ToolCallDelta

    encoder = MessagesEncoder("m", message_id=lambda: "msg_1")
    call = ToolCallDelta(0, call_id="t", name="f", arguments_delta='{"a":1}', finished=True)
    names = [name for name, _ in encoder.feed(ChunkResponse(tool_calls=[call]))]
    assert names == ["message_start", "content_block_start", "content_block_delta", "content_block_stop"]
    responses = ResponsesEncoder({"model": "m"}, response_id=lambda: "resp_1", clock=lambda: 0.0)
    kinds = [event["type"] for event in responses.feed(ChunkResponse(tool_calls=[call]))]
    assert kinds[-2:] == ["response.function_call_arguments.done", "response.output_item.done"]


# --- recorded OpenAI-compatible streams through both encoders, at any split --------------------------------

RECORDED = [
    "fantasy_groq_kimi-k2_text_then_2_parallel_tools.sse",
    "fantasy_llama-cpp_gpt-oss_reasoning_content_then_tool_call.sse",
    "pydantic-ai_deepseek_chat_reasoning_content_text.sse",
    "fantasy_zai_glm-4.7-flash_reasoning_text_2_parallel_tools.sse",
]
MESSAGE_EVENTS: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(anthropic.types.RawMessageStreamEvent)


def recorded(name: str) -> bytes:
    return (FIXTURES / "openai_compatible" / name).read_bytes()


def expected_outcome(body: bytes) -> tuple[str, str, list[tuple[str, str, Any]]]:
    """Reasoning, text and calls (id, name, arguments) as the chunk pipeline gives them."""
    chunks = ChunkPipeline(
        None, reasoning_tags=None, tool_schemas=None, max_event_size=1 << 20, max_response_bytes=1 << 20
    )
    out = [*chunks.feed(body), *chunks.finish()]
    calls: dict[int, list[Any]] = {}
    for chunk in out:
        for delta in chunk.tool_calls or ():
            call = calls.setdefault(delta.index, [delta.call_id, delta.name, []])
            call[2].append(delta.arguments_delta or "")
    return (
        "".join(chunk.reasoning or "" for chunk in out),
        "".join(chunk.content for chunk in out),
        [(call_id, name, json.loads("".join(parts))) for call_id, name, parts in calls.values()],
    )


def through_responses(pieces: list[bytes]) -> tuple[str, str, list[tuple[str, str, Any]]]:
    core = StreamCore(
        ChunkPipeline(
            None, reasoning_tags=None, tool_schemas=None, max_event_size=1 << 20, max_response_bytes=1 << 20
        ),
        ResponsesWire({"model": "m"}),
    )
    events = parse_sse(b"".join(core.feed(piece) for piece in pieces) + core.finish())
    for name, event in events:
        assert EVENTS.validate_python(event).type == name
    assert [event["sequence_number"] for _, event in events] == list(range(len(events)))
    output = events[-1][1]["response"]["output"]
    assert events[-1][0] == "response.completed"
    return (
        "".join(part["text"] for item in output if item["type"] == "reasoning" for part in item["content"]),
        "".join(part["text"] for item in output if item["type"] == "message" for part in item["content"]),
        [
            (item["call_id"], item["name"], json.loads(item["arguments"]))
            for item in output
            if item["type"] == "function_call"
        ],
    )


def through_messages(pieces: list[bytes]) -> tuple[str, str, list[tuple[str, str, Any]]]:
    core = StreamCore(
        ChunkPipeline(
            None, reasoning_tags=None, tool_schemas=None, max_event_size=1 << 20, max_response_bytes=1 << 20
        ),
        MessagesWire("m"),
    )
    events = parse_sse(b"".join(core.feed(piece) for piece in pieces) + core.finish())
    for name, event in events:
        assert MESSAGE_EVENTS.validate_python(event).type == name
    assert events[-1][0] == "message_stop"
    content = core.wire.whole()[1]["content"]
    return (
        "".join(block["thinking"] for block in content if block["type"] == "thinking"),
        "".join(block["text"] for block in content if block["type"] == "text"),
        [(block["id"], block["name"], block["input"]) for block in content if block["type"] == "tool_use"],
    )


@pytest.mark.parametrize("name", RECORDED)
@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(1, 400), min_size=1, max_size=6))
def test_recorded_streams_through_both_doors_at_any_split(name: str, sizes: list[int]) -> None:
    body = recorded(name)
    expected = expected_outcome(body)
    assert expected[2] or expected[0], "the fixture has calls or reasoning"
    pieces = split_bytes(body, sizes)
    assert through_responses(pieces) == expected
    assert through_messages(pieces) == expected


# --- errors before the stream -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_upstream_error_answers_reach_both_sdks_as_their_errors() -> None:
    upstream = FakeUpstream()
    body = json.dumps({"error": {"message": "model is overloaded", "type": "x"}}).encode()
    upstream.add("busy", Scenario([body], status=429, media_type="application/json"))
    async with proxy(upstream) as url, openai_client(url) as client:
        with pytest.raises(openai.RateLimitError, match="model is overloaded"):
            await client.responses.create(model="busy", input="x", stream=True)
    async with proxy(upstream) as url, anthropic_client(url) as client:
        with pytest.raises(anthropic.RateLimitError, match="model is overloaded"):
            await client.messages.create(
                model="busy", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
    async with (
        serving(create_app(f"http://127.0.0.1:{closed_port()}")) as url,
        anthropic_client(url) as client,
    ):
        with pytest.raises(anthropic.InternalServerError, match="cannot connect"):
            await client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    async with proxy(upstream) as url, anthropic_client(url) as client:
        with pytest.raises(anthropic.BadRequestError, match="web_search"):
            await client.messages.create(
                model="m",
                max_tokens=5,
                messages=[{"role": "user", "content": "x"}],
                tools=[{"type": "web_search_20250305", "name": "web_search"}],
            )


@pytest.mark.anyio
async def test_both_doors_carry_the_proxys_code_on_transport_failures_and_caps() -> None:
    """An upstream that cannot be reached (502), that does not answer in time (504), and a whole answer
    over ``max_response_bytes`` (502): Responses gives the proxy's code as ``code``, Messages leads its
    message with it and gives it as ``details.error_code``, as for failures mid-stream."""
    upstream = FakeUpstream()
    upstream.add("slow", Scenario(sse_events(chat_sse(["late"])), hold=True))
    upstream.add("big", Scenario(sse_events(chat_sse(["x" * 1000] * 50))))
    user = [{"role": "user", "content": "x"}]
    failures: list[tuple[str | None, str, dict[str, Any], int, str]] = [
        (f"http://127.0.0.1:{closed_port()}", "m", {}, 502, "upstream_unreachable"),
        (None, "slow", {"timeout": httpx.Timeout(5.0, read=0.2)}, 504, "upstream_timeout"),
        (None, "big", {"max_response_bytes": 20_000}, 502, "upstream_response_too_large"),
    ]
    async with serving(upstream.app) as upstream_url:
        for base, model, options, status, code in failures:
            app = create_app(base or upstream_url, tool_format="kimi_k2", **options)
            async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=10.0) as client:
                responses = await client.post("/v1/responses", json={"model": model, "input": "x"})
                messages = await client.post(
                    "/v1/messages", json={"model": model, "max_tokens": 5, "messages": user}
                )
            assert (responses.status_code, responses.json()["error"]["code"]) == (status, code)
            error = messages.json()["error"]
            assert messages.status_code == status
            assert (error["details"], error["message"].split(":")[0]) == ({"error_code": code}, code)
    upstream.scenarios["slow"].release.set()


@pytest.mark.anyio
async def test_reasoning_tags_on_the_whole_chat_answer() -> None:
    upstream = FakeUpstream()
    upstream.add("glm", Scenario([chat_completion(GLM)], media_type="application/json"))
    async with (
        proxy(upstream, tool_format="none", reasoning_tags="think") as url,
        openai_client(url) as client,
    ):
        completion = await client.chat.completions.create(
            model="glm", messages=[{"role": "user", "content": "x"}]
        )
    message = completion.choices[0].message
    assert message.model_extra["reasoning_content"] == "I want to get the weather."
    assert message.content.startswith("\n\nI will help you get the weather.\n<tool_call>get_weather")

"""The proxy's request edge and usage: bodies that are not JSON objects, bodies over the cap, fields of the
wrong type and requests without ``model`` answer in each route's own error shape (the real proxy in front
of the fake upstream, raw HTTP); the answers name the upstream's model; the usage reaches
``message_start`` and the Chat route asks for it without handing the client a chunk it did not ask for."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from pipeline.proxy._reads import FEED_SLICE, relay_upstream
from pipeline.proxy.app import create_app
from pipeline.proxy.ops import Metrics
from pipeline.proxy.rewriter import ChatStreamRewriter
from tests.pipeline.proxy.test_proxy_doors import anthropic_client, openai_client, proxy
from tests.proxy_upstream import MODEL, USAGE, FakeUpstream, Scenario, chat_sse, post_scope, sse_events

ROUTES = ("/v1/chat/completions", "/v1/responses", "/v1/messages")
USER = [{"role": "user", "content": "x"}]


def openai_error(message: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def anthropic_error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def shaped(route: str, message: str, code: str, param: str | None = None) -> dict[str, Any]:
    """The 400/413 body ``route`` answers: Anthropic's on ``/v1/messages``, OpenAI's elsewhere."""
    if route == "/v1/messages":
        kind = "request_too_large" if code == "request_too_large" else "invalid_request_error"
        return anthropic_error(message, kind)
    return openai_error(message, code, param)


@pytest.mark.anyio
@pytest.mark.parametrize("route", ROUTES)
async def test_bodies_that_are_not_json_objects_answer_400_in_the_routes_shape(route: str) -> None:
    bad_utf8 = b'{"model": "m", "input": "\xff"}'
    nested = b"[" * 100_000 + b"]" * 100_000
    async with proxy(FakeUpstream()) as url, httpx.AsyncClient(base_url=url) as http:
        utf8 = await http.post(route, content=bad_utf8)
        deep = await http.post(route, content=nested)
        array = await http.post(route, content=b"[1]")
        surrogate = await http.post(route, content=b'{"model": "\\ud800"}')
    assert (surrogate.status_code, surrogate.json()) == (
        400,
        shaped(
            route,
            "the request body is not I-JSON (RFC 7493): a lone surrogate escape '\\\\ud800' at byte 11 of"
            " the JSON (streamfold refuses it)",
            "invalid_json",
        ),
    )
    assert utf8.status_code == 400
    assert utf8.json() == shaped(
        route, "the request body is not valid UTF-8 (invalid start byte)", "invalid_json"
    )
    assert (deep.status_code, deep.json()) == (
        400,
        shaped(route, "the request body is JSON nested too deeply", "invalid_json"),
    )
    assert (array.status_code, array.json()) == (
        400,
        shaped(route, "the request body must be a JSON object", "invalid_json"),
    )


@pytest.mark.anyio
@pytest.mark.parametrize("route", ROUTES)
async def test_a_body_over_max_request_bytes_answers_413_in_the_routes_shape(route: str) -> None:
    body = json.dumps({"model": "m", "messages": USER, "input": "x" * 200}).encode()
    async with proxy(FakeUpstream(), max_request_bytes=100) as url, httpx.AsyncClient(base_url=url) as http:
        declared = await http.post(route, content=body)
        chunked = await http.post(route, content=pieces(body[:60], body[60:]))  # no content-length
    expected = shaped(route, "the request body is larger than max_request_bytes=100", "request_too_large")
    assert (declared.status_code, declared.json()) == (413, expected)
    assert (chunked.status_code, chunked.json()) == (413, expected)


async def pieces(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


RESPONSES_CASES: list[tuple[dict[str, Any], str, str]] = [
    ({"tools": 5}, "tools", "Expected `array | null`, got `int`"),
    ({"tools": [True]}, "tools[0]", "Expected `object`, got `bool`"),
    ({"tools": [{"type": "function", "name": 5}]}, "tools[0].name", "Expected `str | null`, got `int`"),
    ({"stream": "true"}, "stream", "Expected `bool | null`, got `str`"),
    ({"max_output_tokens": 5.5}, "max_output_tokens", "Expected `int | null`, got `float`"),
    ({"temperature": True}, "temperature", "Expected `float | null`, got `bool`"),
    ({"input": 5}, "input", "Expected `str | array | null`, got `int`"),
    ({"input": [5]}, "input[0]", "Expected `object`, got `int`"),
    ({"input": [{"role": "user", "content": 5}]}, "input[0].content", "Expected `str | array`, got `int`"),
    ({"input": [{"type": 5}]}, "input[0].type", "Expected `str`, got `int`"),
    (
        {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]},
        "input[0].arguments",
        "Expected `str | null`, got `object`",
    ),
    ({"instructions": ["x"]}, "instructions", "Expected `str | null`, got `array`"),
    ({"reasoning": {"effort": 1}}, "reasoning.effort", "Expected `str | null`, got `int`"),
    ({"text": {"format": "json"}}, "text.format", "Expected `object | null`, got `str`"),
    (
        {"text": {"format": {"type": "json_schema", "name": "a", "schema": "{}"}}},
        "text.format.schema",
        "Expected `object | null`, got `str`",
    ),
    ({"text": {"format": {"type": 1}}}, "text.format.type", "Expected `str`, got `int`"),
    ({"previous_response_id": 7}, "previous_response_id", "Expected `str | null`, got `int`"),
    ({"tool_choice": 5}, "tool_choice", "Expected `str | object | null`, got `int`"),
]


@pytest.mark.anyio
async def test_responses_fields_of_the_wrong_type_answer_400_naming_the_field() -> None:
    upstream = FakeUpstream()
    async with proxy(upstream) as url, httpx.AsyncClient(base_url=url) as http:
        for fields, param, reason in RESPONSES_CASES:
            answer = await http.post("/v1/responses", json={"model": "m", "input": "x", **fields})
            assert (answer.status_code, answer.json()) == (
                400,
                openai_error(f"{param}: {reason}", "invalid_type", param),
            ), fields
        missing = await http.post("/v1/responses", json={"input": "x"})
        missing_nested = await http.post("/v1/responses", json={"model": "m", "tools": [{}]})
    assert (missing.status_code, missing.json()) == (
        400,
        openai_error("Missing required parameter: 'model'.", "missing_required_parameter", "model"),
    )
    assert missing_nested.json() == openai_error(
        "Missing required parameter: 'tools[0].type'.", "missing_required_parameter", "tools[0].type"
    )
    assert upstream.received == []


MESSAGES_CASES: list[tuple[dict[str, Any], str]] = [
    ({"tools": 5}, "tools: Expected `array | null`, got `int`"),
    ({"tools": [{"name": 5}]}, "tools[0].name: Expected `str`, got `int`"),
    (
        {"tools": [{"name": "f", "input_schema": []}]},
        "tools[0].input_schema: Expected `object | null`, got `array`",
    ),
    ({"stream": "true"}, "stream: Expected `bool | null`, got `str`"),
    ({"max_tokens": 5.5}, "max_tokens: Expected `int | null`, got `float`"),
    ({"temperature": True}, "temperature: Expected `float | null`, got `bool`"),
    ({"messages": True}, "messages: Expected `array`, got `bool`"),
    (
        {"messages": [{"role": "user", "content": 5}]},
        "messages[0].content: Expected `str | array`, got `int`",
    ),
    ({"messages": [{"role": 1, "content": "x"}]}, "messages[0].role: Expected `str`, got `int`"),
    (
        {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
        "messages[0].content[0].text: Expected `str`, got `int`",
    ),
    (
        {"messages": [{"role": "user", "content": [{"text": "x"}]}]},
        "messages[0].content[0].type: Field required",
    ),
    (
        {
            "messages": [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": 5}]}
            ]
        },
        "messages[0].content[0].input: Expected `object | null`, got `int`",
    ),
    (
        {
            "messages": [
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "no"}]}
            ]
        },
        "messages[0].content[0].is_error: Expected `bool | null`, got `str`",
    ),
    ({"system": 5}, "system: Expected `str | array | null`, got `int`"),
    ({"tool_choice": "auto"}, "tool_choice: Expected `object | null`, got `str`"),
    (
        {"tool_choice": {"type": "auto", "disable_parallel_tool_use": 1}},
        "tool_choice.disable_parallel_tool_use: Expected `bool | null`, got `int`",
    ),
    ({"stop_sequences": "x"}, "stop_sequences: Expected `array | null`, got `str`"),
]


@pytest.mark.anyio
async def test_messages_fields_of_the_wrong_type_answer_400_in_anthropics_shape() -> None:
    upstream = FakeUpstream()
    async with proxy(upstream) as url, httpx.AsyncClient(base_url=url) as http:
        for fields, message in MESSAGES_CASES:
            answer = await http.post(
                "/v1/messages", json={"model": "m", "max_tokens": 5, "messages": USER, **fields}
            )
            assert (answer.status_code, answer.json()) == (400, anthropic_error(message)), fields
        missing = await http.post("/v1/messages", json={"max_tokens": 5, "messages": USER})
        unsupported = await http.post(
            "/v1/messages",
            json={"model": "m", "messages": USER, "tools": [{"type": "web_search_20250305", "name": "s"}]},
        )
    assert (missing.status_code, missing.json()) == (400, anthropic_error("model: Field required"))
    assert (unsupported.status_code, unsupported.json()) == (
        400,
        anthropic_error(
            "tools[0]: server tool 'web_search_20250305' cannot be served by a Chat Completions upstream"
        ),
    )
    assert upstream.received == []


@pytest.mark.anyio
async def test_the_answers_name_the_upstreams_model() -> None:
    upstream = FakeUpstream()
    upstream.add("alias", Scenario(sse_events(chat_sse(["hi"]))))
    async with proxy(upstream) as url, anthropic_client(url) as claude, openai_client(url) as client:
        message = await claude.messages.create(model="alias", max_tokens=5, messages=USER)
        async with claude.messages.stream(model="alias", max_tokens=5, messages=USER) as stream:
            started, *_ = [event async for event in stream]
        response = await client.responses.create(model="alias", input="x")
    assert message.model == MODEL
    assert started.type == "message_start"
    assert started.message.model == MODEL
    assert response.model == MODEL


def continuous_usage_sse(text: list[str]) -> list[bytes]:
    """A stream as vLLM sends it with ``continuous_usage_stats``: the usage so far on every chunk (the
    role chunk without it, as SGLang sends it), then the usage chunk."""
    events = []
    for number, piece in enumerate(sse_events(chat_sse(text))):
        if number == 0 or piece.startswith(b"data: [DONE]"):
            events.append(piece)
            continue
        payload = json.loads(piece.removeprefix(b"data: "))
        if payload["choices"]:
            payload["usage"] = {"prompt_tokens": 11, "completion_tokens": number, "total_tokens": 11 + number}
        events.append(b"data: " + json.dumps(payload).encode() + b"\n\n")
    return events


@pytest.mark.anyio
async def test_message_start_carries_the_input_tokens() -> None:
    upstream = FakeUpstream()
    upstream.add("m", Scenario(continuous_usage_sse(["hel", "lo"])))
    async with proxy(upstream) as url, httpx.AsyncClient(base_url=url) as http:
        body = {"model": "m", "max_tokens": 5, "messages": USER, "stream": True}
        answer = await http.post("/v1/messages", json=body)
    events = [
        json.loads(line.removeprefix("data: "))
        for line in answer.text.splitlines()
        if line.startswith("data: ")
    ]
    assert events[0]["type"] == "message_start"
    assert events[0]["message"]["usage"] == {"input_tokens": 11, "output_tokens": 1}
    assert [event["type"] for event in events][1:4] == [
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
    ]
    assert events[-2]["usage"] == {"output_tokens": USAGE["completion_tokens"], "input_tokens": 11}
    sent = upstream.requests_for("m")[0].body
    assert sent["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


@pytest.mark.anyio
async def test_the_chat_route_asks_for_the_usage_and_hands_it_on_only_when_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="streamfold.proxy.access")
    upstream = FakeUpstream()
    upstream.add("plain", Scenario(sse_events(chat_sse(["hi"]))))
    upstream.add("asks", Scenario(sse_events(chat_sse(["hi"]))))
    async with proxy(upstream) as url, openai_client(url) as client:
        plain = [
            chunk
            async for chunk in await client.chat.completions.create(model="plain", messages=USER, stream=True)
        ]
        asks = [
            chunk
            async for chunk in await client.chat.completions.create(
                model="asks", messages=USER, stream=True, stream_options={"include_usage": True}
            )
        ]
    assert [chunk.usage for chunk in plain] == [None] * len(plain)
    assert all(chunk.choices for chunk in plain)
    assert asks[-1].choices == []
    assert asks[-1].usage.model_dump(exclude_none=True) == USAGE
    for model in ("plain", "asks"):
        assert upstream.requests_for(model)[0].body["stream_options"] == {"include_usage": True}
    records = [json.loads(record.getMessage()) for record in caplog.records if record.name.endswith("access")]
    assert [(r["model"], r["input_tokens"], r["output_tokens"]) for r in records] == [
        ("plain", 11, 22),
        ("asks", 11, 22),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("options", [5, "yes", [True], {"include_usage": "yes"}, {"include_usage": 0}])
async def test_a_stream_options_of_the_wrong_type_reaches_the_upstream_unchanged(options: object) -> None:
    """The Chat route forwards what it does not read as the client sent it, for the upstream to refuse:
    the proxy asks for the usage only in a ``stream_options`` that is absent or an object whose
    ``include_usage`` is absent, null or false, never by replacing a value of the wrong type."""
    upstream = FakeUpstream()
    upstream.add("m", Scenario(sse_events(chat_sse(["hi"]))))
    async with proxy(upstream) as url, httpx.AsyncClient(base_url=url) as http:
        body = {"model": "m", "messages": USER, "stream": True, "stream_options": options}
        answer = await http.post("/v1/chat/completions", json=body)
    assert answer.status_code == 200
    assert upstream.requests_for("m")[0].body["stream_options"] == options
    assert '"usage":' in answer.text  # not stripped: the proxy did not ask for it


# --- /metrics: bounded series, escaped labels ---------------------------------------------------------------


def in_band_error(code: str) -> list[bytes]:
    """A stream that starts, then fails with an in-band error event carrying the upstream's ``code``."""
    error = {"error": {"message": "overloaded", "type": "server_error", "code": code}}
    return [*sse_events(chat_sse(["hi"], finish_reason=None, usage=None, done=False)), _data(error)]


def _data(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


@pytest.mark.anyio
async def test_an_upstreams_error_codes_do_not_mint_a_series_each() -> None:
    codes = [f"upstream_{number}" for number in range(20)] + ['upstream_"quoted"\\\n', "upstream_timeout"]
    upstream = FakeUpstream()
    for number, code in enumerate(codes):
        upstream.add(f"m{number}", Scenario(in_band_error(code)))
    async with proxy(upstream) as url, httpx.AsyncClient(base_url=url) as http:
        for number in range(len(codes)):
            body = {"model": f"m{number}", "messages": USER, "stream": True}
            answer = await http.post("/v1/chat/completions", json=body)
            assert answer.text.endswith('"code":' + json.dumps(codes[number]) + "}}\n\n")
        metrics = (await http.get("/metrics")).text
    series = [
        line for line in metrics.splitlines() if line.startswith("streamfold_proxy_upstream_errors_total")
    ]
    assert series == [
        'streamfold_proxy_upstream_errors_total{code="upstream_other"} 21',
        'streamfold_proxy_upstream_errors_total{code="upstream_timeout"} 1',
    ]


@pytest.mark.anyio
async def test_an_upstreams_own_error_code_counts_as_upstream_other_on_every_route() -> None:
    """An in-band error event whose code the upstream chose (``server_error``, not ``upstream_...``) is an
    upstream failure too: counted under ``upstream_other``; the tool-rule codes are the proxy's own."""
    upstream = FakeUpstream()
    for model in ("chat", "responses", "messages"):
        upstream.add(model, Scenario(in_band_error("server_error")))
    bodies = {
        "/v1/chat/completions": {"model": "chat", "messages": USER, "stream": True},
        "/v1/responses": {"model": "responses", "input": "x", "stream": True},
        "/v1/messages": {"model": "messages", "max_tokens": 5, "messages": USER, "stream": True},
    }
    async with proxy(upstream) as url, httpx.AsyncClient(base_url=url) as http:
        for route, body in bodies.items():
            assert (await http.post(route, json=body)).status_code == 200
        metrics = (await http.get("/metrics")).text
    series = [
        line for line in metrics.splitlines() if line.startswith("streamfold_proxy_upstream_errors_total")
    ]
    assert series == ['streamfold_proxy_upstream_errors_total{code="upstream_other"} 3']


def test_label_values_are_escaped_as_prometheus_text_says() -> None:
    metrics = Metrics()
    metrics.request_done('a"b\\c\nd', 200)
    assert (
        'streamfold_proxy_requests_total{route="a\\"b\\\\c\\nd",status="200"} 1' in metrics.render().decode()
    )


# --- fairness: one client's huge answer does not stall the others ----------------------------------------


def many_calls_sse(count: int) -> bytes:
    """A stream of ``count`` whole tool calls, one event each, as one upstream write."""
    events = [_data(chunk) for chunk in (_call_chunk(index) for index in range(count))]
    finish = json.loads(chat_sse([], usage=None, done=False).split(b"\n\n")[1].removeprefix(b"data: "))
    finish["choices"][0]["finish_reason"] = "tool_calls"
    return b"".join([*events, _data(finish), b"data: [DONE]\n\n"])


def _call_chunk(index: int) -> dict[str, Any]:
    call = {"index": index, "id": f"call_{index}", "type": "function"}
    call["function"] = {"name": "f", "arguments": f'{{"n": {index}}}'}
    choice = {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": MODEL, "choices": [choice]}


@pytest.mark.anyio
async def test_a_huge_answer_does_not_stall_another_clients_request() -> None:
    """While the proxy rewrites a stream of 25,000 calls that arrived in one piece, another client's
    ``GET /v1/models`` is answered before that stream ends."""
    upstream = FakeUpstream()
    first, *_ = sse_events(chat_sse([]))
    huge = upstream.add("huge", Scenario([first, many_calls_sse(25_000)], pause_after=1))
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    order: list[str] = []
    async with proxy(upstream) as url, httpx.AsyncClient(base_url=url, timeout=60) as http:

        async def other_client() -> None:
            answer = await http.get("/v1/models")
            assert answer.status_code == 200
            order.append("models answered")

        body = {"model": "huge", "messages": USER, "tools": tools, "stream": True}
        received: list[bytes] = []
        async with (
            http.stream("POST", "/v1/chat/completions", json=body) as stream,
            anyio.create_task_group() as tasks,
        ):
            huge.release.set()
            async for piece in stream.aiter_bytes():
                if not received and b"call_0" in piece:
                    tasks.start_soon(other_client)  # the proxy is inside the huge answer now
                if received or b"call_0" in piece:
                    received.append(piece)
            order.append("huge stream ended")
    assert order == ["models answered", "huge stream ended"]
    assert b"".join(received).count(b'"id":"call_') == 25_000


@pytest.mark.anyio
async def test_one_huge_upstream_read_is_fed_in_slices_with_the_loop_turning_between() -> None:
    """The proxy's relay of a stream (the Chat route's core, a real upstream response body of one 4 MB
    piece): the core is fed at most FEED_SLICE bytes at a time, and other tasks run between two feeds."""
    data = many_calls_sse(25_000)
    ticks = 0
    fed: list[tuple[int, int]] = []

    class Recording(ChatStreamRewriter):
        def feed(self, data: bytes) -> bytes:
            fed.append((len(data), ticks))
            return super().feed(data)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.lowlevel.checkpoint()
            ticks += 1

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(ticker)
        answer = await relay_one_piece(data, Recording("kimi_k2"))
        tasks.cancel_scope.cancel()
    assert sum(size for size, _ in fed) == len(data)
    assert max(size for size, _ in fed) == FEED_SLICE
    assert all(before < after for (_, before), (_, after) in itertools.pairwise(fed))
    assert answer.count(b'"id":"call_') == 25_000


async def relay_one_piece(data: bytes, core: ChatStreamRewriter) -> bytes:
    """What ``relay_upstream`` sends for an upstream body that arrives as one piece, ``data``."""

    async def body() -> AsyncIterator[bytes]:
        yield data

    sent: list[bytes] = []

    async def send(message: Any) -> None:
        sent.append(message["body"])

    upstream = httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})
    last = await relay_upstream(upstream, core, send, Metrics())
    return b"".join([*sent, last])


def multibyte_sse() -> tuple[str, bytes]:
    """A text of 1- to 4-byte characters and its stream, at least three FEED_SLICE slices long, with some
    slice boundaries inside a character (asserted: the test would prove nothing otherwise)."""
    deltas = ["aé中🙂" * 7 + str(index) for index in range(1500)]
    data = chat_sse(deltas)
    boundaries = range(FEED_SLICE, len(data), FEED_SLICE)
    assert len(boundaries) >= 3
    assert any(0x80 <= data[boundary] <= 0xBF for boundary in boundaries)  # a UTF-8 continuation byte
    return "".join(deltas), data


def sse_payloads(stream: bytes) -> list[dict[str, Any]]:
    lines = stream.decode().split("\n")
    return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]


@pytest.mark.anyio
async def test_slicing_a_read_inside_a_character_or_an_event_loses_nothing() -> None:
    """FEED_SLICE cuts a read at byte offsets, inside a multi-byte character and inside an SSE line: the
    Chat route's core and a front door's core are incremental, and the text comes out whole."""
    from pipeline.proxy._front import ChunkPipeline, StreamCore
    from pipeline.proxy._reads import feed_sliced
    from pipeline.proxy.messages import MessagesWire

    text, data = multibyte_sse()

    chat = sse_payloads(await relay_one_piece(data, ChatStreamRewriter("kimi_k2")))
    assert "".join(p["choices"][0]["delta"].get("content") or "" for p in chat if p["choices"]) == text

    pipeline = ChunkPipeline(
        None, reasoning_tags=None, tool_schemas={}, max_event_size=1 << 20, max_response_bytes=1 << 26
    )
    core = StreamCore(pipeline, MessagesWire(MODEL))
    pieces: list[bytes] = []

    async def emit(piece: bytes) -> bool:
        pieces.append(piece)
        return True

    assert await feed_sliced(core.feed, data, emit)
    pieces.append(core.finish())
    events = sse_payloads(b"".join(pieces))
    assert "".join(event["delta"].get("text", "") for event in events if "delta" in event) == text
    assert events[-1] == {"type": "message_stop"}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("declared", "status"),
    [("\u00b2", 400), ("1\u00b9", 400), ("9" * 5000, 413), ("9" * 19, 413), ("3", 400)],
    ids=["superscript-two", "superscript-one", "5000-digits", "19-digits", "ascii"],
)
async def test_a_content_length_of_other_digits_is_not_trusted(declared: str, status: int) -> None:
    """uvicorn refuses such a ``Content-Length``, another ASGI server may pass it on: a length that is not
    ASCII digits is ignored (the body is counted as it arrives: here ``{}``, refused for its missing
    model), one of 19 digits or more is over the cap (before, ``²`` and 5,000 digits raised from
    ``int()``: a 500)."""
    app = create_app("http://127.0.0.1:9/v1", max_request_bytes=100)
    headers = [(b"content-type", b"application/json"), (b"content-length", declared.encode("latin-1"))]
    scope = post_scope("/v1/messages", headers)
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async with app.router.lifespan_context(app):
        await app(scope, receive, send)
    assert sent[0]["status"] == status


@pytest.mark.anyio
async def test_a_whole_200_answer_that_is_not_json_is_a_502_not_a_crash() -> None:
    """A non-streamed chat answer whose 200 body does not decode (an HTML page, bad UTF-8, nesting past the
    decoder) is answered 502 ``invalid_upstream_response``, as a stream that does not decode is; it was a
    bare 500, or the HTML as ``application/json``. JSON that is not a completion still passes as it came."""
    upstream = FakeUpstream()
    bodies = {
        "html": b"<html>oops</html>",
        "utf8": b'{"choices": [], "x": "\xff"}',
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "other": b'{"object": "something.else"}',
    }
    for model, body in bodies.items():
        upstream.add(
            model, Scenario([body], media_type="text/html" if model == "html" else "application/json")
        )
    async with proxy(upstream) as url, httpx.AsyncClient(base_url=url) as http:
        answers = {
            model: await http.post(
                "/v1/chat/completions",
                json={
                    "model": model,
                    "messages": USER,
                    "tools": [{"type": "function", "function": {"name": "f"}}],
                },
            )
            for model in bodies
        }
    problems = {
        "html": "not valid JSON: JSON is malformed: invalid character (byte 0)",
        "utf8": "not valid JSON: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte",
        "deep": "JSON nested too deeply to decode (beyond the recursion limit of Python's C code)",
    }
    for model, problem in problems.items():
        answer = answers[model]
        assert (answer.status_code, answer.json()["error"]["code"]) == (502, "invalid_upstream_response"), (
            model
        )
        assert answer.json()["error"]["message"] == f"the upstream answered 200 with a body that is {problem}"
    other = answers["other"]
    assert (other.status_code, other.content) == (200, bodies["other"])

"""The request's tool rules on the front doors ``/v1/responses`` and ``/v1/messages``: the same semantics as
on the Chat route (test_proxy_semantics.py), read from each API's own request shape, in the shared
sans-IO core at any split and through the proxy with the real openai and anthropic clients."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any, cast

import anthropic
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.proxy._front import ChunkPipeline, StreamCore, chat_pipeline
from pipeline.proxy._shared import ProxyConfig
from pipeline.proxy.app import create_app
from pipeline.proxy.messages import MessagesWire
from pipeline.proxy.messages import chat_request as messages_chat_request
from pipeline.proxy.policy import ToolPolicy, UnknownTools
from pipeline.proxy.responses import ResponsesWire
from pipeline.proxy.responses import chat_request as responses_chat_request
from pipeline.proxy.rewriter import ChatStreamRewriter
from tests.conftest import FIXTURES
from tests.delimiter_cases import pieces_at
from tests.pipeline.proxy.test_proxy import read_back
from tests.pipeline.proxy.test_proxy_doors import anthropic_client, openai_client, parse_sse
from tests.proxy_upstream import FakeUpstream, Scenario, chat_completion, chat_sse, serving, split_bytes

THREE_CALLS = (FIXTURES / "raw_model_output" / "vllm-test_kimi-k2_text_then_3_parallel_tools.txt").read_text()
"""Text, then calls to get_weather, get_news and send_email."""
TEXT = "Multiple tasks. "
WEATHER = ("get_weather", {"city": "New York"})
NEWS = ("get_news", {"topic": "technology"})
NOT_SATISFIED = "tool_choice requires a tool to be called, but the model answered without a call"
UNKNOWN = "the model called the tool 'get_news', which the request does not offer (tools: get_weather)"


def responses_tools(*names: str, parameters: Any = None) -> list[Any]:
    return [{"type": "function", "name": name, "parameters": parameters} for name in names]


def messages_tools(*names: str, schema: Any = None) -> list[Any]:
    return [{"name": name, "input_schema": schema or {"type": "object"}} for name in names]


# --- the shared core, at any split ------------------------------------------------------------------------


def door_core(door: str, request: dict[str, Any], unknown_tools: UnknownTools = "drop") -> StreamCore:
    """The core a front door builds for ``request`` (its own shape), as its endpoint does."""
    if door == "responses":
        chat = responses_chat_request({"model": "m", "input": "x", **request})
        wire: Any = ResponsesWire({"model": "m"})
    else:
        chat = messages_chat_request({"model": "m", "max_tokens": 9, "messages": [], **request})
        wire = MessagesWire("m")
    policy = ToolPolicy.from_request(chat, unknown_tools)
    chunks = ChunkPipeline(
        "kimi_k2",
        reasoning_tags=None,
        tool_schemas=None,
        max_event_size=1 << 20,
        max_response_bytes=1 << 20,
        policy=policy,
    )
    return StreamCore(chunks, wire)


def door_outcome(door: str, core: StreamCore, cuts: list[int]) -> tuple[str, list[Any], str, str | None]:
    """Text, calls (name, arguments), the end (status or stop reason) and the error message of a door's
    stream and whole answer, checked to agree."""
    body = chat_sse(pieces_at(THREE_CALLS, cuts))
    events = parse_sse(b"".join(core.feed(piece) for piece in split_bytes(body, [37])) + core.finish())
    status, whole = core.wire.whole()
    if door == "responses":
        response = events[-1][1]["response"]
        assert (status == 200) == (response["status"] != "failed")
        assert (whole if status == 200 else whole["error"]["response"]) == response
        output = response["output"]
        text = "".join(
            part["text"] for item in output if item["type"] == "message" for part in item["content"]
        )
        calls = [
            (item["name"], json.loads(item["arguments"]))
            for item in output
            if item["type"] == "function_call"
        ]
        error = response["error"]["message"] if response["error"] else None
        return text, calls, response["status"], error
    name, last = events[-1]
    message = whole if status == 200 else whole["error"]["details"].get("message") or {"content": []}
    text = "".join(block["text"] for block in message["content"] if block["type"] == "text")
    calls = [(block["name"], block["input"]) for block in message["content"] if block["type"] == "tool_use"]
    if name == "error":  # the whole answer's error is the stream's, with the Message added to the details
        details = whole["error"]["details"]
        assert {
            **whole,
            "error": {**whole["error"], "details": {"error_code": details["error_code"]}},
        } == last
        return text, calls, "error", last["error"]["message"]
    stop = next(data["delta"]["stop_reason"] for kind, data in events if kind == "message_delta")
    return text, calls, stop, None


CUTS = st.lists(st.integers(0, len(THREE_CALLS)), max_size=6).map(sorted)


@pytest.mark.parametrize("door", ["responses", "messages"])
@settings(max_examples=25, deadline=None)
@given(cuts=CUTS)
def test_doors_keep_offered_tools_and_honour_parallel_off_at_any_split(door: str, cuts: list[int]) -> None:
    done = "completed" if door == "responses" else "tool_use"
    tools = {
        "responses": responses_tools("get_news", "get_weather"),
        "messages": messages_tools("get_news", "get_weather"),
    }[door]
    assert door_outcome(door, door_core(door, {"tools": tools}), cuts) == (TEXT, [WEATHER, NEWS], done, None)
    one = (
        {"parallel_tool_calls": False}
        if door == "responses"
        else {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}
    )
    assert door_outcome(door, door_core(door, {"tools": tools, **one}), cuts) == (TEXT, [WEATHER], done, None)


@pytest.mark.parametrize("door", ["responses", "messages"])
@settings(max_examples=25, deadline=None)
@given(cuts=CUTS)
def test_doors_drop_or_refuse_unknown_tools_at_any_split(door: str, cuts: list[int]) -> None:
    tools = responses_tools("get_weather") if door == "responses" else messages_tools("get_weather")
    done = "completed" if door == "responses" else "tool_use"
    assert door_outcome(door, door_core(door, {"tools": tools}), cuts) == (TEXT, [WEATHER], done, None)
    refusing = door_core(door, {"tools": tools}, unknown_tools="refuse")
    failed = "failed" if door == "responses" else "error"
    assert door_outcome(door, refusing, cuts) == (TEXT, [WEATHER], failed, "unknown_tool: " + UNKNOWN)
    none_offered = responses_tools("search") if door == "responses" else messages_tools("search")
    stop = "completed" if door == "responses" else "end_turn"
    assert door_outcome(door, door_core(door, {"tools": none_offered}), cuts) == (TEXT, [], stop, None)


@pytest.mark.parametrize("door", ["responses", "messages"])
@settings(max_examples=25, deadline=None)
@given(cuts=CUTS)
def test_doors_required_without_a_call_fails_after_the_text_at_any_split(door: str, cuts: list[int]) -> None:
    if door == "responses":
        tools = responses_tools("search")
        required: list[dict[str, Any]] = [
            {"tool_choice": "required"},
            {"tool_choice": {"type": "function", "name": "search"}},
        ]
    else:
        tools = messages_tools("search")
        required = [{"tool_choice": {"type": "any"}}, {"tool_choice": {"type": "tool", "name": "search"}}]
    failed = "failed" if door == "responses" else "error"
    wanted = [NOT_SATISFIED, NOT_SATISFIED.replace("a tool", "the function 'search'")]
    for choice, message in zip(required, wanted, strict=True):
        outcome = door_outcome(door, door_core(door, {"tools": tools, **choice}), cuts)
        assert outcome == (TEXT, [], failed, "tool_choice_not_satisfied: " + message)


def test_doors_read_each_api_shape_into_the_chat_rules() -> None:
    def rules(door: str, request: dict[str, Any]) -> ToolPolicy:
        if door == "responses":
            chat = responses_chat_request({"model": "m", "input": "x", **request})
        else:
            chat = messages_chat_request({"model": "m", "max_tokens": 9, "messages": [], **request})
        return ToolPolicy.from_request(chat)

    offered = frozenset({"a", "b"})
    assert rules("responses", {"tools": responses_tools("a", "b")}) == ToolPolicy(names=offered)
    assert rules("responses", {"tools": responses_tools("a", "b"), "tool_choice": "required"}) == ToolPolicy(
        names=offered, required=True
    )
    assert rules(
        "responses", {"tools": responses_tools("a", "b"), "tool_choice": {"type": "function", "name": "b"}}
    ) == ToolPolicy(names=frozenset({"b"}), required="b")
    assert rules("responses", {"tools": responses_tools("a"), "parallel_tool_calls": False}) == ToolPolicy(
        names=frozenset({"a"}), parallel=False
    )
    assert rules(
        "messages", {"tools": messages_tools("a", "b"), "tool_choice": {"type": "any"}}
    ) == ToolPolicy(names=offered, required=True)
    assert rules(
        "messages",
        {
            "tools": messages_tools("a", "b"),
            "tool_choice": {"type": "tool", "name": "a", "disable_parallel_tool_use": True},
        },
    ) == ToolPolicy(names=frozenset({"a"}), required="a", parallel=False)


def plain_core(wire: Any) -> StreamCore:
    chunks = ChunkPipeline(
        "kimi_k2", reasoning_tags=None, tool_schemas=None, max_event_size=1 << 20, max_response_bytes=1 << 20
    )
    return StreamCore(chunks, wire)


def test_door_failures_carry_the_proxy_code_streamed_and_whole() -> None:
    """Every failure, not only a broken tool rule, names the proxy's code in the whole answer's error
    (Responses ``error.code``) and in the Messages error (``details.error_code``, leading the message)."""
    cut = {"error": {"message": "cut", "code": "upstream_disconnected"}}
    unfinished = chat_sse(["hi"], finish_reason=None)
    core = plain_core(ResponsesWire({"model": "m"}))
    core.feed(unfinished[:40])
    core.fail(cut)
    error = {"message": "cut", "type": "upstream_error", "param": None, "code": "upstream_disconnected"}
    assert core.wire.whole() == (502, {"error": error})
    core = plain_core(ResponsesWire({"model": "m"}))
    core.feed(unfinished)
    core.finish()
    message = "the upstream stream ended without a finish_reason"
    assert core.wire.whole() == (502, {"error": {**error, "message": message, "code": "upstream_truncated"}})
    for code, text in [("upstream_disconnected", "cut"), ("upstream_truncated", message)]:
        core = plain_core(MessagesWire("m"))
        fed = core.feed(unfinished)
        events = parse_sse(fed + (core.fail(cut) if code == "upstream_disconnected" else core.finish()))
        body = {
            "type": "error",
            "error": {"type": "api_error", "message": f"{code}: {text}", "details": {"error_code": code}},
        }
        assert events[-1] == ("error", body)
        assert core.wire.whole() == (502, body)


# --- through the proxy, with the real clients -------------------------------------------------------------


@asynccontextmanager
async def proxied(upstream: FakeUpstream, **options: Any) -> AsyncIterator[str]:
    options.setdefault("tool_format", "kimi_k2")
    async with serving(upstream.app) as upstream_url, serving(create_app(upstream_url, **options)) as url:
        yield url


def three_calls_upstream() -> FakeUpstream:
    upstream = FakeUpstream()
    upstream.add("three", Scenario(split_bytes(chat_sse(list(THREE_CALLS)), [50])))
    upstream.add("text", Scenario([chat_sse(["just ", "text"])]))
    return upstream


def response_parts(response: Any) -> tuple[str, list[Any], str]:
    text = "".join(part.text for item in response.output if item.type == "message" for part in item.content)
    calls = [
        (item.name, json.loads(item.arguments)) for item in response.output if item.type == "function_call"
    ]
    return text, calls, response.status


@pytest.mark.anyio
async def test_responses_route_applies_the_tool_rules_with_the_openai_client() -> None:
    upstream = three_calls_upstream()
    async with proxied(upstream, unknown_tools="drop") as url, openai_client(url) as client:
        offered = responses_tools("get_weather", "get_news")

        async def both(**request: Any) -> tuple[Any, ...]:
            """The Response streamed with responses.stream() and created whole."""
            async with client.responses.stream(model="three", input="x", **request) as stream:
                streamed = await stream.get_final_response()
            whole = await client.responses.create(model="three", input="x", **request)
            return response_parts(streamed), response_parts(whole)

        for outcome in await both(tools=offered):
            assert outcome == (TEXT, [WEATHER, NEWS], "completed")
        for outcome in await both(tools=offered, parallel_tool_calls=False):
            assert outcome == (TEXT, [WEATHER], "completed")
        for outcome in await both(tools=responses_tools("get_weather")):  # get_news, send_email dropped
            assert outcome == (TEXT, [WEATHER], "completed")
        for outcome in await both(tools=offered, tool_choice="none"):  # the markers stay text
            assert outcome == (THREE_CALLS, [], "completed")

        events = [
            event
            async for event in await client.responses.create(
                model="text",
                input="x",
                tools=responses_tools("search"),
                tool_choice="required",
                stream=True,
            )
        ]
        with pytest.raises(openai.InternalServerError) as raised:
            await client.responses.create(
                model="text", input="x", tools=responses_tools("search"), tool_choice="required"
            )
    failed = events[-1]
    assert failed.type == "response.failed"
    assert response_parts(failed.response) == ("just text", [], "failed")
    assert (failed.response.error.code, failed.response.error.message) == (
        "server_error",
        "tool_choice_not_satisfied: " + NOT_SATISFIED,
    )
    error = raised.value.body
    assert isinstance(error, dict)
    assert (raised.value.status_code, error["code"], error["message"]) == (
        502,
        "tool_choice_not_satisfied",
        NOT_SATISFIED,
    )
    assert error["response"]["output"][0]["content"][0]["text"] == "just text"


@pytest.mark.anyio
async def test_responses_route_refuses_unknown_tools_with_the_refuse_option() -> None:
    upstream = three_calls_upstream()
    async with proxied(upstream, unknown_tools="refuse") as url, openai_client(url) as client:
        events = [
            event
            async for event in await client.responses.create(
                model="three", input="x", tools=responses_tools("get_weather"), stream=True
            )
        ]
        with pytest.raises(openai.InternalServerError, match="get_news") as raised:
            await client.responses.create(model="three", input="x", tools=responses_tools("get_weather"))
    assert events[-1].type == "response.failed"
    assert response_parts(events[-1].response) == (TEXT, [WEATHER], "failed")
    assert events[-1].response.error.message == "unknown_tool: " + UNKNOWN
    error = raised.value.body
    assert isinstance(error, dict)
    assert (error["code"], error["message"]) == ("unknown_tool", UNKNOWN)
    assert [item["name"] for item in error["response"]["output"] if item["type"] == "function_call"] == [
        "get_weather"
    ]


def message_parts(message: Any) -> tuple[str, list[Any], str | None]:
    text = "".join(block.text for block in message.content if block.type == "text")
    calls = [(block.name, block.input) for block in message.content if block.type == "tool_use"]
    return text, calls, message.stop_reason


@pytest.mark.anyio
async def test_messages_route_applies_the_tool_rules_with_the_anthropic_client() -> None:
    upstream = three_calls_upstream()
    async with proxied(upstream, unknown_tools="drop") as url, anthropic_client(url) as client:
        offered = messages_tools("get_weather", "get_news")
        ask: dict[str, Any] = {
            "model": "three",
            "max_tokens": 9,
            "messages": [{"role": "user", "content": "x"}],
        }

        async def both(**request: Any) -> tuple[Any, ...]:
            async with client.messages.stream(**ask, **request) as stream:
                streamed = await stream.get_final_message()
            whole = await client.messages.create(**ask, **request)
            return message_parts(streamed), message_parts(whole)

        for outcome in await both(tools=offered):
            assert outcome == (TEXT, [WEATHER, NEWS], "tool_use")
        single = {"type": "auto", "disable_parallel_tool_use": True}
        for outcome in await both(tools=offered, tool_choice=single):
            assert outcome == (TEXT, [WEATHER], "tool_use")
        for outcome in await both(tools=messages_tools("get_weather")):
            assert outcome == (TEXT, [WEATHER], "tool_use")
        for outcome in await both(tools=messages_tools("search")):  # every call dropped: an end_turn
            assert outcome == (TEXT, [], "end_turn")
        for outcome in await both(tools=offered, tool_choice={"type": "none"}):
            assert outcome == (THREE_CALLS, [], "end_turn")

        texts: list[str] = []
        ask["model"] = "text"

        async def read_required() -> None:
            async with client.messages.stream(
                **ask, tools=messages_tools("search"), tool_choice={"type": "any"}
            ) as stream:
                async for event in stream:
                    if event.type == "text":
                        texts.append(event.text)

        with pytest.raises(anthropic.APIStatusError, match="tool_choice_not_satisfied") as streamed:
            await read_required()
        with pytest.raises(anthropic.InternalServerError) as whole:
            await client.messages.create(
                **ask, tools=messages_tools("search"), tool_choice={"type": "tool", "name": "search"}
            )
    assert texts == ["just ", "text"]
    assert streamed.value.error_code == "tool_choice_not_satisfied"
    assert streamed.value.api_message == "tool_choice_not_satisfied: " + NOT_SATISFIED
    assert (whole.value.status_code, whole.value.error_code) == (502, "tool_choice_not_satisfied")
    body = whole.value.body
    assert isinstance(body, dict)
    assert body["error"]["message"] == "tool_choice_not_satisfied: " + NOT_SATISFIED.replace(
        "a tool", "the function 'search'"
    )
    assert body["error"]["details"]["message"]["content"] == [{"type": "text", "text": "just text"}]


@pytest.mark.anyio
async def test_messages_route_refuses_unknown_tools_with_the_refuse_option() -> None:
    upstream = three_calls_upstream()
    async with proxied(upstream, unknown_tools="refuse") as url, anthropic_client(url) as client:
        ask: dict[str, Any] = {
            "model": "three",
            "max_tokens": 9,
            "messages": [{"role": "user", "content": "x"}],
        }
        calls: list[str] = []

        async def read() -> None:
            async with client.messages.stream(**ask, tools=messages_tools("get_weather")) as stream:
                async for event in stream:
                    if event.type == "content_block_stop" and event.content_block.type == "tool_use":
                        calls.append(event.content_block.name)

        with pytest.raises(anthropic.APIStatusError) as streamed:
            await read()
        with pytest.raises(anthropic.InternalServerError) as whole:
            await client.messages.create(**ask, tools=messages_tools("get_weather"))
    assert calls == ["get_weather"]
    assert (streamed.value.error_code, streamed.value.api_message) == (
        "unknown_tool",
        "unknown_tool: " + UNKNOWN,
    )
    assert whole.value.error_code == "unknown_tool"


QWEN_CALL = (
    "<tool_call>\n<function=f>\n<parameter=n>\n5\n</parameter>\n"
    "<parameter=o>\n[1]\n</parameter>\n</function>\n</tool_call>"
)


@pytest.mark.anyio
async def test_xml_parameters_without_a_schema_stay_strings_on_both_doors() -> None:
    """As vLLM's Qwen3-Coder parser keeps them: a parameter the schema does not declare keeps its text."""
    upstream = FakeUpstream()
    upstream.add("qwen", Scenario([chat_sse([QWEN_CALL])]))
    typed = {"type": "object", "properties": {"n": {"type": "integer"}}}
    async with proxied(upstream, tool_format="qwen3_coder") as url:
        async with openai_client(url) as client:
            plain = await client.responses.create(model="qwen", input="x", tools=responses_tools("f"))
            schema = await client.responses.create(
                model="qwen", input="x", tools=responses_tools("f", parameters=typed)
            )
        async with anthropic_client(url) as messages_client:
            ask: dict[str, Any] = {
                "model": "qwen",
                "max_tokens": 9,
                "messages": [{"role": "user", "content": "x"}],
            }
            plain_message = await messages_client.messages.create(**ask, tools=messages_tools("f"))
            typed_message = await messages_client.messages.create(
                **ask, tools=messages_tools("f", schema=typed)
            )
    assert response_parts(plain)[1] == [("f", {"n": "5", "o": "[1]"})]
    assert response_parts(schema)[1] == [("f", {"n": 5, "o": "[1]"})]
    assert message_parts(plain_message)[1] == [("f", {"n": "5", "o": "[1]"})]
    assert message_parts(typed_message)[1] == [("f", {"n": 5, "o": "[1]"})]


@pytest.mark.anyio
async def test_auto_tool_format_serves_both_doors() -> None:
    """``--tool-format auto`` builds the auto rewriter on the front doors too (it once failed with a 500)."""
    upstream = three_calls_upstream()
    async with proxied(upstream, tool_format="auto", unknown_tools="drop") as url:
        async with openai_client(url) as client:
            response = await client.responses.create(
                model="three", input="x", tools=responses_tools("get_weather"), parallel_tool_calls=False
            )
        async with anthropic_client(url) as messages_client:
            message = await messages_client.messages.create(
                model="three",
                max_tokens=9,
                messages=[{"role": "user", "content": "x"}],
                tools=messages_tools("get_weather"),
            )
    assert response_parts(response) == (TEXT, [WEATHER], "completed")
    assert message_parts(message) == (TEXT, [WEATHER], "tool_use")


# --- the same semantics as the Chat route, for any rules ---------------------------------------------------

NAMES = ("get_weather", "get_news", "send_email", "search")


@st.composite
def tool_rules(draw: st.DrawFn) -> tuple[list[str], str | None, bool, UnknownTools]:
    """Offered tools, ``tool_choice`` (``None``: absent; ``auto``, ``none``, ``required`` or a name),
    whether parallel calls are allowed, and ``--unknown-tools``."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    choice = draw(st.sampled_from([None, "auto", "none", "required", *names]))
    unknown: UnknownTools = draw(st.sampled_from(["text", "drop", "refuse", "allow"]))
    return names, choice, draw(st.booleans()), unknown


Outcome = tuple[str, list[Any], str | None]
"""Text, calls (name, arguments) and the error code the answer ended with."""


def chat_outcome(rules: tuple[list[str], str | None, bool, UnknownTools], body: bytes) -> Outcome:
    """What the Chat route makes of ``body`` for these rules (its endpoint's decision, its core)."""
    names, choice, parallel, unknown = rules
    request: dict[str, Any] = {"tools": [{"type": "function", "function": {"name": name}} for name in names]}
    if choice in ("auto", "none", "required"):
        request["tool_choice"] = choice
    elif choice is not None:
        request["tool_choice"] = {"type": "function", "function": {"name": choice}}
    if not parallel:
        request["parallel_tool_calls"] = False
    rewrites = request.get("tool_choice") != "none"
    core = ChatStreamRewriter(
        "kimi_k2" if rewrites else None,
        policy=ToolPolicy.from_request(request, unknown) if rewrites else None,
    )
    chunks, errors, _ = read_back(
        b"".join(core.feed(piece) for piece in split_bytes(body, [29])) + core.finish()
    )
    calls: dict[int, list[str]] = {}
    for chunk in chunks:
        for call in chunk.tool_calls or ():
            calls.setdefault(call.index, [call.name or "", ""])[1] += call.arguments_delta or ""
    text = "".join(chunk.content for chunk in chunks)
    return (
        text,
        [(name, json.loads(arguments)) for name, arguments in calls.values()],
        (errors[0]["code"] if errors else None),
    )


def door_request(door: str, rules: tuple[list[str], str | None, bool, UnknownTools]) -> dict[str, Any]:
    """The same rules in the door's own request shape."""
    names, choice, parallel, _ = rules
    if door == "responses":
        request: dict[str, Any] = {"tools": responses_tools(*names)}
        if choice in ("auto", "none", "required"):
            request["tool_choice"] = choice
        elif choice is not None:
            request["tool_choice"] = {"type": "function", "name": choice}
        if not parallel:
            request["parallel_tool_calls"] = False
        return request
    request = {"tools": messages_tools(*names)}
    kind = {None: "auto", "auto": "auto", "none": "none", "required": "any"}.get(choice, "tool")
    tool_choice: dict[str, Any] = {"type": kind, **({"name": choice} if kind == "tool" else {})}
    if not parallel:
        tool_choice["disable_parallel_tool_use"] = True
    if choice is not None or not parallel:
        request["tool_choice"] = tool_choice
    return request


def door_end(door: str, rules: tuple[list[str], str | None, bool, UnknownTools], body: bytes) -> Outcome:
    """What a front door makes of ``body`` for these rules (its endpoint's pipeline, its wire)."""
    unknown = rules[3]
    request = door_request(door, rules)
    if door == "responses":
        chat = responses_chat_request({"model": "m", "input": "x", **request})
        wire: Any = ResponsesWire({"model": "m"})
    else:
        chat = messages_chat_request({"model": "m", "max_tokens": 9, "messages": [], **request})
        wire = MessagesWire("m")
    config = SimpleNamespace(
        tool_format="kimi_k2",
        unknown_tools=unknown,
        reasoning_tags=None,
        max_event_size=1 << 20,
        max_response_bytes=1 << 20,
    )
    core = StreamCore(chat_pipeline(cast(ProxyConfig, config), chat), wire)
    events = parse_sse(b"".join(core.feed(piece) for piece in split_bytes(body, [29])) + core.finish())
    if door == "responses":
        response = events[-1][1]["response"]
        output = response["output"]
        text = "".join(
            part["text"] for item in output if item["type"] == "message" for part in item["content"]
        )
        calls = [
            (item["name"], json.loads(item["arguments"]))
            for item in output
            if item["type"] == "function_call"
        ]
        error = response["error"]["message"].partition(":")[0] if response["error"] else None
        return text, calls, error
    blocks = [data["content_block"] for name, data in events if name == "content_block_start"]
    texts = [
        data["delta"]["text"]
        for name, data in events
        if name == "content_block_delta" and "text" in data["delta"]
    ]
    inputs: dict[int, str] = {}
    for name, data in events:
        if name == "content_block_delta" and data["delta"]["type"] == "input_json_delta":
            inputs[data["index"]] = inputs.get(data["index"], "") + data["delta"]["partial_json"]
    calls = [
        (block["name"], json.loads(inputs.get(index, "") or "{}"))
        for index, block in enumerate(blocks)
        if block["type"] == "tool_use"
    ]
    last_name, last = events[-1]
    error = last["error"]["details"]["error_code"] if last_name == "error" else None
    return "".join(texts), calls, error


@pytest.mark.parametrize("door", ["responses", "messages"])
@settings(max_examples=60, deadline=None)
@given(rules=tool_rules(), cuts=CUTS)
def test_doors_answer_as_the_chat_route_for_any_rules(
    door: str, rules: tuple[list[str], str | None, bool, UnknownTools], cuts: list[int]
) -> None:
    body = chat_sse(pieces_at(THREE_CALLS, cuts))
    assert door_end(door, rules, body) == chat_outcome(rules, body)


# --- unknown tools stay text (the default) ----------------------------------------------------------------

NEWS_TEXT = THREE_CALLS[
    THREE_CALLS.index("<|tool_call_begin|>functions.get_news") : THREE_CALLS.index(
        "<|tool_call_begin|>functions.send_email"
    )
]
"""The model's raw text of its call to get_news (offered below: get_weather and send_email)."""
SEND = ("send_email", {"to": "user@example.com", "subject": "Daily Update"})


@pytest.mark.anyio
async def test_unknown_tools_stay_text_on_every_route_streamed_and_whole() -> None:
    """By default a call to a tool the request does not offer goes back as the text the model wrote, in
    order between the offered calls, with the real openai and anthropic clients."""
    assert NEWS_TEXT.endswith("<|tool_call_end|>")
    expected = (TEXT + NEWS_TEXT, [WEATHER, SEND])
    offered = ("get_weather", "send_email")
    upstream = three_calls_upstream()
    upstream.add("three-whole", Scenario([chat_completion(THREE_CALLS)], media_type="application/json"))
    async with proxied(upstream) as url:
        async with openai_client(url) as client:
            chat_tools = [{"type": "function", "function": {"name": name}} for name in offered]
            chat_request: dict[str, Any] = {
                "model": "three",
                "messages": [{"role": "user", "content": "x"}],
                "tools": chat_tools,
            }
            async with client.chat.completions.stream(**chat_request) as stream:
                completion = await stream.get_final_completion()
            whole = await client.chat.completions.create(**chat_request | {"model": "three-whole"})
            for answer in (completion, whole):
                message = answer.choices[0].message
                calls = [
                    (call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls
                ]
                assert (message.content, calls) == expected
                assert answer.choices[0].finish_reason == "tool_calls"
            async with client.responses.stream(
                model="three", input="x", tools=responses_tools(*offered)
            ) as events:
                streamed = await events.get_final_response()
            whole_response = await client.responses.create(
                model="three", input="x", tools=responses_tools(*offered)
            )
            for response in (streamed, whole_response):
                assert response_parts(response) == (*expected, "completed")
        async with anthropic_client(url) as messages_client:
            request: dict[str, Any] = {
                "model": "three",
                "max_tokens": 9,
                "messages": [{"role": "user", "content": "x"}],
                "tools": messages_tools(*offered),
            }
            async with messages_client.messages.stream(**request) as message_stream:
                streamed_message = await message_stream.get_final_message()
            whole_message = await messages_client.messages.create(**request)
            for message in (streamed_message, whole_message):
                assert message_parts(message) == (*expected, "tool_use")


@pytest.mark.anyio
async def test_qwen3_coder_unknown_call_stays_text_through_the_proxy() -> None:
    text = (FIXTURES / "raw_model_output" / "vllm-test_qwen3-coder_text_then_tool_xml_params.txt").read_text()
    upstream = FakeUpstream()
    upstream.add("qwen", Scenario(split_bytes(chat_sse(list(text)), [40, 90])))
    upstream.add("qwen-whole", Scenario([chat_completion(text)], media_type="application/json"))
    async with proxied(upstream, tool_format="qwen3_coder") as url, openai_client(url) as client:
        request: dict[str, Any] = {
            "model": "qwen",
            "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "something_else"}}],
        }
        async with client.chat.completions.stream(**request) as stream:
            completion = await stream.get_final_completion()
        whole = await client.chat.completions.create(**request | {"model": "qwen-whole"})
    for answer in (completion, whole):
        assert answer.choices[0].message.content == text
        assert not answer.choices[0].message.tool_calls
        assert answer.choices[0].finish_reason == "stop"

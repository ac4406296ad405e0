"""A model that stops inside a tool call: no door tells the client to run it.

The upstream says ``stop`` after text that opens a Kimi-K2 call and never closes it. Each front door,
streamed and whole, keeps the finish a clean stop (``stop``, ``end_turn``) and marks the call as cut off
where its wire can (a Responses ``function_call`` item is ``incomplete``); the same answer with the call
closed is a call to run. Checked with the real openai and anthropic clients.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import openai
import pytest

from pipeline.proxy.app import create_app
from tests.proxy_upstream import FakeUpstream, Scenario, chat_completion, chat_sse, serving, sse_events

OPENED = (
    "Checking. <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0 "
    '<|tool_call_argument_begin|>{"city": "Bei'
)
CLOSED = OPENED + 'jing"}<|tool_call_end|><|tool_calls_section_end|>'
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
CHAT_TOOLS: list[Any] = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
RESPONSES_TOOLS: list[Any] = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
MESSAGES_TOOLS: list[Any] = [{"name": "get_weather", "input_schema": WEATHER}]
MESSAGES: list[Any] = [{"role": "user", "content": "weather?"}]


@asynccontextmanager
async def clients() -> AsyncIterator[tuple[Any, Any]]:
    """The openai and anthropic clients on a proxy whose upstream serves ``opened`` / ``closed`` (streamed)
    and ``opened-whole`` / ``closed-whole``, each cut at every few characters."""
    upstream = FakeUpstream()
    for model, text in (("opened", OPENED), ("closed", CLOSED)):
        pieces = [text[start : start + 7] for start in range(0, len(text), 7)]
        upstream.add(model, Scenario(sse_events(chat_sse(pieces))))
        upstream.add(model + "-whole", Scenario([chat_completion(text)], media_type="application/json"))
    async with (
        serving(upstream.app) as upstream_url,
        serving(create_app(upstream_url, tool_format="kimi_k2")) as url,
        openai.AsyncOpenAI(base_url=url + "/v1", api_key="k", max_retries=0) as chat,
        anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0) as messages,
    ):
        yield chat, messages


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "finish", "arguments"),
    [("opened", "stop", '{"city": "Bei'), ("closed", "tool_calls", '{"city": "Beijing"}')],
)
async def test_chat_streamed_and_whole(model: str, finish: str, arguments: str) -> None:
    async with clients() as (chat, _):
        chunks = [
            chunk
            async for chunk in await chat.chat.completions.create(
                model=model, messages=MESSAGES, tools=CHAT_TOOLS, stream=True
            )
        ]
        whole = (
            await chat.chat.completions.create(model=model + "-whole", messages=MESSAGES, tools=CHAT_TOOLS)
        ).choices[0]
    choices = [chunk.choices[0] for chunk in chunks if chunk.choices]
    streamed = "".join(
        call.function.arguments or "" for choice in choices for call in choice.delta.tool_calls or ()
    )
    assert ([choice.finish_reason for choice in choices if choice.finish_reason], streamed) == (
        [finish],
        arguments,
    )
    assert whole.finish_reason == finish
    assert whole.message.content == "Checking. "
    assert [(call.function.name, call.function.arguments) for call in whole.message.tool_calls or ()] == [
        ("get_weather", arguments)
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(("model", "status"), [("opened", "incomplete"), ("closed", "completed")])
async def test_responses_item_status(model: str, status: str) -> None:
    async with clients() as (chat, _):
        events = [
            event
            async for event in await chat.responses.create(
                model=model, input="weather?", tools=RESPONSES_TOOLS, stream=True
            )
        ]
        whole = await chat.responses.create(model=model, input="weather?", tools=RESPONSES_TOOLS)
    done = [event.item for event in events if event.type == "response.output_item.done"]
    assert [(item.type, getattr(item, "status", None)) for item in done] == [
        ("message", "completed"),
        ("function_call", status),
    ]
    for response in (events[-1].response, whole):
        assert response.status == "completed"
        assert [(item.type, item.status) for item in response.output] == [
            ("message", "completed"),
            ("function_call", status),
        ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "stop_reason", "whole_input", "streamed_input"),
    [
        ("opened", "end_turn", {"_raw_arguments": '{"city": "Bei'}, {}),
        ("closed", "tool_use", {"city": "Beijing"}, {"city": "Beijing"}),
    ],
)
async def test_messages_stop_reason(
    model: str, stop_reason: str, whole_input: dict[str, Any], streamed_input: dict[str, Any]
) -> None:
    """The anthropic client parses a streamed call's input itself (a cut-off one gives it ``{}``)."""
    async with clients() as (_, messages):
        async with messages.messages.stream(
            model=model, max_tokens=100, messages=MESSAGES, tools=MESSAGES_TOOLS
        ) as stream:
            streamed = await stream.get_final_message()
        whole = await messages.messages.create(
            model=model + "-whole", max_tokens=100, messages=MESSAGES, tools=MESSAGES_TOOLS
        )
    for message, tool_input in ((streamed, streamed_input), (whole, whole_input)):
        assert message.stop_reason == stop_reason
        text, call = message.content
        assert (text.type, text.text) == ("text", "Checking. ")
        assert (call.type, call.name, call.input) == ("tool_use", "get_weather", tool_input)

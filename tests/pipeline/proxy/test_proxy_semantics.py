"""pipeline.proxy.policy: the request's tool rules (tools, tool_choice, parallel_tool_calls) applied to
the rewritten calls, in the sans-IO core at any split and through the proxy with the real openai SDK."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import ConfigurationError
from pipeline.proxy.app import create_app
from pipeline.proxy.policy import ToolChoiceError, ToolPolicy
from pipeline.proxy.rewriter import ChatStreamRewriter
from tests.conftest import FIXTURES
from tests.delimiter_cases import numbered_ids, pieces_at
from tests.pipeline.proxy.test_proxy import MESSAGES, proxied, read_back
from tests.proxy_upstream import FakeUpstream, Scenario, chat_completion, chat_sse, split_bytes

THREE_CALLS = (FIXTURES / "raw_model_output" / "vllm-test_kimi-k2_text_then_3_parallel_tools.txt").read_text()
"""Text, then calls to get_weather, get_news and send_email."""


def tools(*names: str, parameters: Any = None) -> list[Any]:
    return [
        {"type": "function", "function": {"name": name, **({"parameters": parameters} if parameters else {})}}
        for name in names
    ]


def policy(**request: Any) -> ToolPolicy:
    unknown = request.pop("unknown_tools", "drop")
    return ToolPolicy.from_request(request, unknown)


def core_output(text: str, cuts: list[int], rules: ToolPolicy) -> tuple[str, list[Any], str | None, Any]:
    """Content, (index, id, name, arguments) of each call, finish reason and errors of the core's output."""
    core = ChatStreamRewriter("kimi_k2", policy=rules, id_factory=numbered_ids)
    body = chat_sse(pieces_at(text, cuts))
    out = b"".join(core.feed(piece) for piece in split_bytes(body, [37])) + core.finish()
    chunks, errors, done = read_back(out)
    assert done == (not errors)
    calls: dict[int, list[Any]] = {}
    for chunk in chunks:
        for call in chunk.tool_calls or ():
            entry = calls.setdefault(call.index, [call.index, call.call_id, call.name, ""])
            entry[3] += call.arguments_delta or ""
    finish = next((chunk.finish_reason for chunk in chunks if chunk.finish_reason), None)
    content = "".join(chunk.content or "" for chunk in chunks)
    return content, [tuple(entry) for entry in calls.values()], finish, errors


WEATHER = (0, "functions.get_weather:0", "get_weather", '{"city": "New York"}')
NEWS = (1, "functions.get_news:1", "get_news", '{"topic": "technology"}')


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, len(THREE_CALLS)), max_size=8).map(sorted))
def test_core_keeps_only_offered_tools_and_renumbers_at_any_split(cuts: list[int]) -> None:
    rules = policy(tools=tools("get_news", "get_weather"))
    content, calls, finish, errors = core_output(THREE_CALLS, cuts, rules)
    assert (content, calls, finish, errors) == ("Multiple tasks. ", [WEATHER, NEWS], "tool_calls", [])
    only_news = policy(tools=tools("get_news"))
    assert core_output(THREE_CALLS, cuts, only_news)[1] == [(0, *NEWS[1:])]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, len(THREE_CALLS)), max_size=8).map(sorted))
def test_core_parallel_tool_calls_false_keeps_the_first_call(cuts: list[int]) -> None:
    rules = policy(tools=tools("get_weather", "get_news", "send_email"), parallel_tool_calls=False)
    assert core_output(THREE_CALLS, cuts, rules) == ("Multiple tasks. ", [WEATHER], "tool_calls", [])


def test_core_all_calls_dropped_is_a_stop_and_refuse_is_an_error_after_the_text() -> None:
    content, calls, finish, errors = core_output(THREE_CALLS, [5, 40], policy(tools=tools("search")))
    assert (content, calls, finish, errors) == ("Multiple tasks. ", [], "stop", [])
    refusing = policy(tools=tools("get_weather"), unknown_tools="refuse")
    content, calls, finish, errors = core_output(THREE_CALLS, [5, 40], refusing)
    assert (content, calls) == ("Multiple tasks. ", [WEATHER])
    assert [(error["code"], error["message"]) for error in errors] == [
        (
            "unknown_tool",
            "the model called the tool 'get_news', which the request does not offer (tools: get_weather)",
        )
    ]


def test_core_required_tool_choice_without_a_call_ends_with_an_error_after_the_text() -> None:
    for choice, wanted in [
        ("required", "a tool"),
        ({"type": "function", "function": {"name": "search"}}, "the function 'search'"),
    ]:
        rules = policy(tools=tools("search"), tool_choice=choice)
        content, calls, finish, errors = core_output("just text", [4], rules)
        assert (content, calls, finish) == ("just text", [], "stop")
        assert errors == [
            {
                "message": f"tool_choice requires {wanted} to be called, "
                "but the model answered without a call",
                "type": "invalid_response_error",
                "param": None,
                "code": "tool_choice_not_satisfied",
            }
        ]
    named = policy(tools=tools("get_weather", "get_news"), tool_choice={"function": {"name": "get_news"}})
    assert core_output(THREE_CALLS, [9], named) == ("Multiple tasks. ", [(0, *NEWS[1:])], "tool_calls", [])
    required = policy(tools=tools("get_weather", "get_news", "send_email"), tool_choice="required")
    assert len(core_output(THREE_CALLS, [9], required)[1]) == 3


def test_policy_options_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="unknown unknown_tools 'keep'"):
        ToolPolicy.from_request({}, "keep")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown unknown_tools 'keep'"):
        create_app("http://127.0.0.1:1", unknown_tools="keep")  # type: ignore[arg-type]


# --- through the proxy, with the openai SDK ----------------------------------------------------------------


async def streamed(client: openai.AsyncOpenAI, **request: Any) -> tuple[str, list[Any], str | None]:
    stream = await client.chat.completions.create(model="stream", messages=MESSAGES, stream=True, **request)
    content, finish = "", None
    calls: dict[int, list[Any]] = {}
    async for chunk in stream:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or ():
                entry = calls.setdefault(call.index, [call.index, call.function.name, ""])
                entry[2] += call.function.arguments or ""
    return content, [tuple(entry) for entry in calls.values()], finish


@pytest.mark.anyio
async def test_the_proxy_applies_the_request_tool_rules_streamed_and_whole() -> None:
    upstream = FakeUpstream()
    upstream.add("stream", Scenario(split_bytes(chat_sse(list(THREE_CALLS)), [50])))
    upstream.add("whole", Scenario([chat_completion(THREE_CALLS)], media_type="application/json"))
    offered = tools("get_weather", "get_news")
    async with proxied(upstream, unknown_tools="drop") as client:
        weather, news = (0, "get_weather", '{"city": "New York"}'), (1, "get_news", '{"topic": "technology"}')
        assert await streamed(client, tools=offered) == ("Multiple tasks. ", [weather, news], "tool_calls")
        assert await streamed(client, tools=offered, parallel_tool_calls=False) == (
            "Multiple tasks. ",
            [weather],
            "tool_calls",
        )
        whole = await client.chat.completions.create(model="whole", messages=MESSAGES, tools=offered)
        assert [
            call.function.name
            for call in whole.choices[0].message.tool_calls or ()
            if call.type == "function"
        ] == [
            "get_weather",
            "get_news",
        ]
        none_offered = tools("search")
        assert await streamed(client, tools=none_offered) == ("Multiple tasks. ", [], "stop")
        with pytest.raises(openai.APIError, match="tool_choice requires the function 'search'"):
            await streamed(
                client, tools=none_offered, tool_choice={"type": "function", "function": {"name": "search"}}
            )
        with pytest.raises(openai.InternalServerError) as raised:
            await client.chat.completions.create(
                model="whole", messages=MESSAGES, tools=none_offered, tool_choice="required", stream=False
            )
    error = raised.value.body
    assert isinstance(error, dict)
    assert (raised.value.status_code, error["code"]) == (502, "tool_choice_not_satisfied")
    assert error["completion"]["choices"][0]["message"]["content"] == "Multiple tasks. "


@pytest.mark.anyio
async def test_xml_parameters_of_a_tool_without_a_schema_stay_strings() -> None:
    """As vLLM's Qwen3-Coder parser keeps them: no schema for a parameter, its value is the text."""
    text = (
        "<tool_call>\n<function=f>\n<parameter=n>\n5\n</parameter>\n"
        "<parameter=o>\n[1]\n</parameter>\n</function>\n</tool_call>"
    )
    upstream = FakeUpstream()
    upstream.add("stream", Scenario([chat_sse([text])]))
    async with proxied(upstream, tool_format="qwen3_coder", unknown_tools="drop") as client:
        _, calls, _ = await streamed(client, tools=tools("f"))
        typed = tools("f", parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
        _, typed_calls, _ = await streamed(client, tools=typed)
    assert [json.loads(call[2]) for call in calls] == [{"n": "5", "o": "[1]"}]
    assert [json.loads(call[2]) for call in typed_calls] == [{"n": 5, "o": "[1]"}]


def test_custom_tools_are_offered_tools_too() -> None:
    custom = [{"type": "custom", "custom": {"name": "get_weather"}}]
    assert policy(tools=custom).names == frozenset({"get_weather"})
    assert core_output(THREE_CALLS, [9], policy(tools=custom))[1] == [WEATHER]


@pytest.mark.anyio
async def test_required_is_checked_on_a_whole_answer_with_auto_and_no_marker() -> None:
    upstream = FakeUpstream()
    upstream.add("whole", Scenario([chat_completion("no call here")], media_type="application/json"))
    async with proxied(upstream, tool_format="auto", unknown_tools="drop") as client:
        with pytest.raises(openai.InternalServerError, match="tool_choice requires a tool"):
            await client.chat.completions.create(
                model="whole", messages=MESSAGES, tools=tools("search"), tool_choice="required", stream=False
            )
        whole = await client.chat.completions.create(model="whole", messages=MESSAGES, tools=tools("search"))
    assert (whole.choices[0].message.content, whole.choices[0].finish_reason) == ("no call here", "stop")


def test_named_tool_choice_is_not_satisfied_by_another_function_that_allow_lets_pass() -> None:
    """``allow`` keeps the calls to get_weather, get_news and send_email, but the named function (search) was
    not called: the answer ends with tool_choice_not_satisfied, streamed and whole."""
    named = {"type": "function", "function": {"name": "search"}}
    rules = policy(tools=tools("search"), tool_choice=named, unknown_tools="allow")
    content, calls, _, errors = core_output(THREE_CALLS, [9], rules)
    assert (content, len(calls), [error["code"] for error in errors]) == (
        "Multiple tasks. ",
        3,
        ["tool_choice_not_satisfied"],
    )
    whole = {
        "choices": [{"message": {"tool_calls": [{"function": {"name": "get_news", "arguments": "{}"}}]}}]
    }
    with pytest.raises(ToolChoiceError, match="the function 'search'"):
        rules.apply_to_completion(whole)
    called = {"choices": [{"message": {"tool_calls": [{"function": {"name": "search", "arguments": "{}"}}]}}]}
    assert rules.apply_to_completion(called) == called

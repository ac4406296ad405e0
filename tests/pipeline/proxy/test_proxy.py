"""pipeline.proxy.app: the rewriting proxy, end to end (fake upstream on 127.0.0.1, proxy, the real openai
SDK)
and its sans-IO stream core at any byte split."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import msgspec
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter.sse import SSEDecoder
from operators.convert.openai_chat import OpenAIChatConverter
from operators.delimiters import FORMATS
from pipeline.errors import ConfigurationError
from pipeline.models import ChunkResponse
from pipeline.proxy._shared import forwarded_headers
from pipeline.proxy.app import create_app
from pipeline.proxy.rewriter import ChatStreamRewriter
from tests.conftest import FIXTURES
from tests.delimiter_cases import collect, numbered_ids, pieces_at, run
from tests.guards import GUARD
from tests.proxy_upstream import (
    COMPLETION_ID,
    CREATED,
    FINGERPRINT,
    MODEL,
    MODELS,
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
MESSAGES: list[Any] = [{"role": "user", "content": "go"}]
TOOLS: list[Any] = [{"type": "function", "function": {"name": "any_tool", "parameters": {"type": "object"}}}]
"""Tools in the request: a model server parses tool calls only then (and the proxy rewrites only then)."""

# --- an independent reading of Kimi-K2 text: accumulate, then split with regexes (the seed's approach) ----

_SECTION = re.compile(r"<\|tool_calls?_section_begin\|>(.*?)(?:<\|tool_calls?_section_end\|>|\Z)", re.S)
_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*(?P<id>[^<]+?)\s*<\|tool_call_argument_begin\|>\s*(?P<args>.*?)\s*<\|tool_call_end\|>",
    re.S,
)

Calls = list[tuple[str, str, Any]]
"""``(id, name, parsed arguments)`` of each call."""


def kimi_reference(text: str) -> tuple[str, Calls]:
    """Content and calls of a Kimi-K2 text whose argument strings hold no markers."""
    content: list[str] = []
    calls: Calls = []
    position = 0
    for section in _SECTION.finditer(text):
        content.append(text[position : section.start()])
        position = section.end()
        for call in _CALL.finditer(section[1]):
            call_id = call["id"]
            name = call_id.removeprefix("functions.").rsplit(":", 1)[0]
            calls.append((call_id, name, json.loads(call["args"])))
    content.append(text[position:])
    return "".join(content), calls


KIMI_FILES = sorted(path.name for path in RAW.glob("vllm-test_kimi-k2_*"))
"""The Kimi-K2 fixtures in the layout :func:`kimi_reference` reads (not K2.5's fenced calls, not K3)."""


def kimi_text(name: str) -> str:
    path = RAW / name
    return "".join(json.loads(path.read_text())) if path.suffix == ".json" else path.read_text()


def kimi_deltas(name: str) -> list[list[str]]:
    """Ways to cut a fixture into text deltas: whole, one character, odd sizes, and the recorded deltas."""
    path = RAW / name
    text = kimi_text(name)
    ways = [[text], list(text), pieces_at(text, range(3, len(text), 7))]
    if path.suffix == ".json":
        ways.append(json.loads(path.read_text()))
    return ways


# --- generated Kimi-K2 texts with known calls -------------------------------------------------------------

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL_BEGIN, ARGUMENT_BEGIN, CALL_END = (
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
)
_PROSE = list("abc xyz.,!?é中🙂\n<>|{}\"'")
_VALUES = ["plain", "with <|tool_call_end|> inside", 'quote " and \\ slash', "ünï 🙂", "", "a\nb"]


@dataclass
class Case:
    text: str
    content: str
    calls: Calls

    def deltas(self, rng: random.Random) -> list[str]:
        """The text cut at random places (inside markers too)."""
        text = self.text
        if len(text) < 2:
            return [text]
        count = rng.randint(1, max(1, len(text) // 12))
        return pieces_at(text, rng.sample(range(1, len(text)), min(len(text) - 1, count)))


def generated_case(rng: random.Random, number: int) -> Case:
    """Prose, a section of 0-3 calls with random JSON arguments, maybe more prose."""
    before = "".join(rng.choices(_PROSE, k=rng.randint(0, 30))).replace("<|", "<")
    after = (
        "".join(rng.choices(_PROSE, k=rng.randint(0, 10))).replace("<|", "<") if rng.random() < 0.3 else ""
    )
    calls: Calls = []
    parts = [before]
    count = rng.randint(0, 3)
    if count:
        parts.append(SECTION_BEGIN)
        for index in range(count):
            name = rng.choice(["get_weather", "search", "mcp__fs__write-file", "browser.open"])
            call_id = f"functions.{name}:{number + index}"
            arguments = {
                f"k{i}": rng.choice([*_VALUES, rng.randint(-9, 99), [1, {"x": None}]]) for i in range(3)
            }
            if rng.random() < 0.2:
                arguments["long"] = "z" * rng.randint(100, 1500)
            separator = rng.choice(["", " ", "\n"])
            encoded = json.dumps(arguments, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2]))
            parts += [
                CALL_BEGIN,
                separator,
                call_id,
                separator,
                ARGUMENT_BEGIN,
                separator,
                encoded,
                separator,
                CALL_END,
            ]
            calls.append((call_id, name, arguments))
        parts.append(SECTION_END)
    parts.append(after)
    content = before + after
    return Case("".join(parts), content, calls)


# --- running the proxy ------------------------------------------------------------------------------------


@asynccontextmanager
async def proxied(
    upstream: FakeUpstream, *, upstream_url: str | None = None, **options: Any
) -> AsyncIterator[openai.AsyncOpenAI]:
    """The fake upstream and a proxy in front of it, both served on 127.0.0.1; yields an SDK client."""
    options.setdefault("tool_format", "kimi_k2")
    # The requests offer one placeholder tool while the recorded streams call their own: let them pass.
    options.setdefault("unknown_tools", "allow")
    async with serving(upstream.app) as served_url:
        app = create_app(upstream_url or served_url, **options)
        async with serving(app) as proxy_url:
            client = openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key="test", max_retries=0)
            try:
                yield client
            finally:
                await client.close()


def sdk_calls(tool_calls: Sequence[Any] | None) -> Calls:
    return [(call.id, call.function.name, json.loads(call.function.arguments)) for call in tool_calls or ()]


async def final_completion(client: openai.AsyncOpenAI, model: str) -> Any:
    """The SDK's stream helper over a streamed request that asks for the usage: its accumulated completion."""
    async with client.chat.completions.stream(
        model=model, messages=MESSAGES, tools=TOOLS, stream_options={"include_usage": True}
    ) as events:
        async for _ in events:
            pass
        return await events.get_final_completion()


async def stream_content(client: openai.AsyncOpenAI, model: str, received: list[str]) -> None:
    """Stream with the SDK's helper, appending each content delta to ``received`` (errors propagate)."""
    async with client.chat.completions.stream(model=model, messages=MESSAGES, tools=TOOLS) as events:
        async for event in events:
            if event.type == "content.delta":
                received.append(event.delta)


def assert_upstream_facts(completion: Any) -> None:
    assert (completion.id, completion.model, completion.created) == (COMPLETION_ID, MODEL, CREATED)
    assert completion.system_fingerprint == FINGERPRINT
    assert completion.usage.model_dump(exclude_none=True) == USAGE


# --- end to end: streamed ---------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("name", KIMI_FILES)
async def test_kimi_fixtures_stream_as_standard_tool_calls(name: str) -> None:
    content, calls = kimi_reference(kimi_text(name))
    assert calls, "the oracle finds the fixture's calls"
    upstream = FakeUpstream()
    models = []
    byte_sizes = ([1 << 20], [1, 7, 60], [3], [41])
    for number, deltas in enumerate(kimi_deltas(name)):
        model = f"m{number}"
        upstream.add(model, Scenario(split_bytes(chat_sse(deltas), byte_sizes[number % len(byte_sizes)])))
        models.append(model)
    async with proxied(upstream) as client:
        for model in models:
            completion = await final_completion(client, model)
            choice = completion.choices[0]
            assert (choice.message.content or "", sdk_calls(choice.message.tool_calls)) == (content, calls), (
                model
            )
            assert choice.finish_reason == "tool_calls"
            assert_upstream_facts(completion)


@pytest.mark.anyio
async def test_deltas_follow_the_openai_protocol_and_reasoning_is_rewritten_too() -> None:
    """create(stream=True): role first, each call's id/type/name on its first delta only, indexes 0, 1, ...;
    calls written in the reasoning channel come out as calls as well."""
    text = kimi_text("vllm-test_kimi-k2_text_then_3_parallel_tools.txt")
    content, calls = kimi_reference(text)
    upstream = FakeUpstream()
    upstream.add("content", Scenario(sse_events(chat_sse(pieces_at(text, range(2, len(text), 5))))))
    upstream.add("reasoning", Scenario(sse_events(chat_sse(list(text), field="reasoning_content"))))
    async with proxied(upstream) as client:
        for model in ("content", "reasoning"):
            chunks = [
                chunk
                async for chunk in await client.chat.completions.create(
                    model=model,
                    messages=MESSAGES,
                    tools=TOOLS,
                    stream=True,
                    stream_options={"include_usage": True},
                )
            ]
            deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
            assert deltas[0].role == "assistant"
            assert all(delta.role is None for delta in deltas[1:])
            seen: dict[int, list[str]] = {}
            ids: dict[int, tuple[str, str]] = {}
            for delta in deltas:
                for call in delta.tool_calls or ():
                    if call.index not in seen:
                        assert call.index == len(seen)
                        assert call.type == "function"
                        assert call.id
                        assert call.function
                        assert call.function.name
                        ids[call.index] = (call.id, call.function.name)
                        seen[call.index] = []
                    else:
                        assert call.id is None
                        assert call.type is None
                        assert call.function is not None
                        assert call.function.name is None
                    assert call.function is not None
                    seen[call.index].append(call.function.arguments or "")
            got = [(*ids[index], json.loads("".join(parts))) for index, parts in sorted(seen.items())]
            assert got == calls
            text_field = "content" if model == "content" else "reasoning_content"
            streamed = "".join(
                (delta.content if text_field == "content" else (delta.model_extra or {}).get(text_field))
                or ""
                for delta in deltas
            )
            assert streamed == content
            finishes = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices]
            assert finishes[-1] == "tool_calls"
            assert finishes.count(None) == len(finishes) - 1
            assert chunks[-1].choices == []
            assert chunks[-1].usage is not None


@pytest.mark.anyio
async def test_arguments_reach_the_client_before_the_call_ends() -> None:
    """The upstream pauses in the middle of a call's arguments: the client already has their first part."""
    head = f'Sure.{SECTION_BEGIN}{CALL_BEGIN}functions.write_file:0{ARGUMENT_BEGIN}{{"path": "/tmp/a", '
    tail = f'"content": "hello"}}{CALL_END}{SECTION_END}'
    pieces = sse_events(chat_sse([head, tail]))
    upstream = FakeUpstream()
    scenario = upstream.add("paused", Scenario(pieces, pause_after=2))  # role chunk, head chunk, then wait
    async with proxied(upstream) as client:
        received: list[str] = []
        response = await client.chat.completions.create(
            model="paused", messages=MESSAGES, tools=TOOLS, stream=True
        )
        with anyio.fail_after(GUARD):
            async for chunk in response:
                for call in (chunk.choices[0].delta.tool_calls or ()) if chunk.choices else ():
                    received.append(call.function.arguments or "" if call.function else "")
                if '"/tmp/a",' in "".join(received) and not scenario.release.is_set():
                    assert "hello" not in "".join(received)
                    scenario.release.set()
        assert json.loads("".join(received)) == {"path": "/tmp/a", "content": "hello"}
        assert scenario.release.is_set(), "the partial arguments were seen while the upstream waited"


@pytest.mark.anyio
async def test_fifty_concurrent_streams() -> None:
    rng = random.Random(6)
    cases = {f"gen{number}": generated_case(rng, number) for number in range(50)}
    upstream = FakeUpstream()
    for model, case in cases.items():
        sizes = [rng.randint(1, 90) for _ in range(3)]
        upstream.add(model, Scenario(split_bytes(chat_sse(case.deltas(rng)), sizes)))
    results: dict[str, Any] = {}
    async with proxied(upstream) as client:

        async def one(model: str) -> None:
            results[model] = await final_completion(client, model)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                for model in cases:
                    tasks.start_soon(one, model)
    assert sum(len(case.calls) for case in cases.values()) > 50
    for model, case in cases.items():
        choice = results[model].choices[0]
        assert (choice.message.content or "", sdk_calls(choice.message.tool_calls)) == (
            case.content,
            case.calls,
        )
        assert choice.finish_reason == ("tool_calls" if case.calls else "stop")
        assert_upstream_facts(results[model])


OTHER_FORMATS = [
    ("hermes", "vllm-test_hermes_qwen_2_sequential_tool_calls.txt"),
    ("qwen3_coder", "vllm-test_qwen3-coder_text_then_tool_xml_params.txt"),
    ("deepseek_v31", "vllm-test_deepseek-v3.1_prefix_2_tools_suffix.txt"),
    ("glm45", "vllm-test_glm-4.5_text_tool_text_tool.txt"),
    ("pythonic", "vllm-test_pythonic_llama3.2_parallel_calls.txt"),
    ("olmo3", "vllm-test_olmo3_parallel_calls.txt"),
    ("lfm2", "vllm-test_lfm2_text_after_call.txt"),
    ("gemma4", "vllm-test_gemma4_text_then_tool.txt"),
    ("functiongemma", "vllm-test_functiongemma_2_calls.txt"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool_format", "name"), OTHER_FORMATS)
async def test_other_formats_give_what_their_rewriter_gives(tool_format: str, name: str) -> None:
    if tool_format not in FORMATS:
        pytest.skip(f"the {tool_format} format is not registered yet")
    text = (RAW / name).read_text()
    expected = run(tool_format, [text], id_factory=numbered_ids)
    assert expected.calls
    upstream = FakeUpstream()
    upstream.add("chars", Scenario(split_bytes(chat_sse(list(text)), [5, 40])))
    upstream.add("whole", Scenario([chat_sse([text])]))
    async with proxied(upstream, tool_format=tool_format) as client:
        for model in ("chars", "whole"):
            choice = (await final_completion(client, model)).choices[0]
            assert (choice.message.content or "") == expected.content
            got = [(call.function.name, call.function.arguments) for call in choice.message.tool_calls or ()]
            assert got == [(call.name, call.arguments) for call in expected.calls]
            assert choice.finish_reason == "tool_calls"


def comparable(completion: Any) -> dict[str, Any]:
    """A completion without what the proxy does not keep: provider extensions (``x_groq``) and the role
    that some servers repeat on every chunk (which the SDK then concatenates)."""
    result: dict[str, Any] = completion.model_dump(exclude={"x_groq"})
    for choice in result["choices"]:
        choice["message"]["role"] = "assistant"
    return result


RECORDED = [
    "fantasy_groq_kimi-k2_text_then_2_parallel_tools.sse",
    "fantasy_huggingface_kimi-k2_text_then_2_parallel_tools.sse",
    "fantasy_xai_grok-4-fast_2_parallel_tools_no_text.sse",
    "fantasy_zai_glm-4.7-flash_reasoning_text_2_parallel_tools.sse",
    "pydantic-ai_deepseek_chat_reasoning_content_text.sse",
]


@pytest.mark.anyio
async def test_recorded_structured_streams_look_the_same_through_the_proxy() -> None:
    """Streams whose calls are already structured: the SDK folds the same completion with and without the
    proxy in between."""
    upstream = FakeUpstream()
    for name in RECORDED:
        upstream.add(
            name, Scenario(split_bytes((FIXTURES / "openai_compatible" / name).read_bytes(), [17, 300]))
        )
    async with proxied(upstream) as client, serving(upstream.app) as direct_url:
        direct = openai.AsyncOpenAI(base_url=direct_url + "/v1", api_key="test", max_retries=0)
        try:
            for name in RECORDED:
                through = comparable(await final_completion(client, name))
                straight = comparable(await final_completion(direct, name))
                assert through == straight, name
        finally:
            await direct.close()


# --- end to end: not streamed, pass-through routes, limits ------------------------------------------------


@pytest.mark.anyio
async def test_whole_completion_is_rewritten() -> None:
    text = kimi_text("vllm-test_kimi-k2_multiline_json_args.txt")
    content, calls = kimi_reference(text)
    upstream = FakeUpstream()
    upstream.add("whole", Scenario([chat_completion(text)], media_type="application/json"))
    upstream.add("plain", Scenario([chat_completion("no calls")], media_type="application/json"))
    async with proxied(upstream) as client:
        completion = await client.chat.completions.create(model="whole", messages=MESSAGES, tools=TOOLS)
        choice = completion.choices[0]
        assert (choice.message.content, sdk_calls(choice.message.tool_calls)) == (content, calls)
        assert choice.finish_reason == "tool_calls"
        assert_upstream_facts(completion)
        plain = await client.chat.completions.create(model="plain", messages=MESSAGES, tools=TOOLS)
        assert (plain.choices[0].message.content, plain.choices[0].finish_reason) == ("no calls", "stop")
    assert upstream.requests_for("whole")[0].body == {"model": "whole", "messages": MESSAGES, "tools": TOOLS}


@pytest.mark.anyio
async def test_headers_body_and_other_routes_pass_through() -> None:
    upstream = FakeUpstream()
    upstream.add("m", Scenario(sse_events(chat_sse(["hi"]))))
    async with proxied(upstream) as client:
        await final_completion(client.with_options(default_headers={"X-Trace": "t-1"}), "m")
        models = await client.models.list()
        raw = await client.models.with_raw_response.list()
    request = upstream.requests_for("m")[0]
    assert request.headers["authorization"] == "Bearer test"
    assert request.headers["x-trace"] == "t-1"
    assert request.body == {
        "model": "m",
        "messages": MESSAGES,
        "tools": TOOLS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert [model.id for model in models.data] == [MODELS["data"][0]["id"]]
    assert raw.headers["x-upstream"] == "fake"
    assert [r.path for r in upstream.received if r.path == "/v1/models"] == ["/v1/models", "/v1/models"]


@pytest.mark.anyio
async def test_upstream_base_url_with_v1_and_request_limits() -> None:
    upstream = FakeUpstream()
    upstream.add("m", Scenario(sse_events(chat_sse(["ok"]))))
    async with serving(upstream.app) as upstream_url:
        app = create_app(upstream_url + "/v1/", tool_format="kimi_k2", max_request_bytes=300)
        async with serving(app) as proxy_url, httpx.AsyncClient(base_url=proxy_url) as http:
            response = await http.post("/v1/chat/completions", json={"model": "m", "messages": MESSAGES})
            assert response.status_code == 200, "the base URL's /v1 is not doubled"
            big = {"model": "m", "messages": [{"role": "user", "content": "x" * 400}]}
            response = await http.post("/v1/chat/completions", json=big)
            assert response.status_code == 413
            assert response.json()["error"]["code"] == "request_too_large"
            response = await http.post("/v1/chat/completions", content=b"{not json")
            assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_json")
            response = await http.post("/v1/chat/completions", json={"model": "m", "stream": True, "n": 2})
            assert (response.status_code, response.json()["error"]["code"]) == (400, "unsupported_parameter")
    assert len(upstream.requests_for("m")) == 1, "refused requests never reach the upstream"


def test_unknown_tool_format_is_refused_at_creation() -> None:
    with pytest.raises(ConfigurationError, match="no_such_format"):
        create_app("http://127.0.0.1:1", tool_format="no_such_format")


# --- end to end: failures ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_connection_refused_is_a_502() -> None:
    async with proxied(FakeUpstream(), upstream_url=f"http://127.0.0.1:{closed_port()}") as client:
        for stream in (True, False):
            with pytest.raises(openai.APIStatusError) as caught:
                await client.chat.completions.create(model="m", messages=MESSAGES, stream=stream)
            assert caught.value.status_code == 502
            assert caught.value.code == "upstream_unreachable"
            assert caught.value.type == "upstream_error"


@pytest.mark.anyio
async def test_upstream_timeouts_before_and_during_the_stream() -> None:
    upstream = FakeUpstream()
    silent = upstream.add("silent", Scenario(sse_events(chat_sse(["x"])), hold=True))
    stalled = upstream.add("stalled", Scenario(sse_events(chat_sse(["first", "second"])), pause_after=2))
    # 1 s: the upstream's first piece must come within it on a busy machine, its silence must not.
    async with proxied(upstream, timeout=httpx.Timeout(1.0)) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model="silent", messages=MESSAGES, stream=True)
        assert (caught.value.status_code, caught.value.code) == (504, "upstream_timeout")
        received: list[str] = []
        with pytest.raises(openai.APIError) as stream_error:
            await stream_content(client, "stalled", received)
        assert "".join(received) == "first"
        assert stream_error.value.code == "upstream_timeout"
        assert "stalled" in stream_error.value.message
        silent.release.set()
        stalled.release.set()


@pytest.mark.anyio
async def test_non_200_answers_pass_through_with_status_and_body() -> None:
    body = {
        "error": {"message": "Rate limit reached", "type": "rate_limit_error", "param": None, "code": "rl"}
    }
    upstream = FakeUpstream()
    upstream.add("limited", Scenario([json.dumps(body).encode()], status=429, media_type="application/json"))
    async with proxied(upstream) as client:
        for stream in (True, False):
            with pytest.raises(openai.RateLimitError) as caught:
                await client.chat.completions.create(model="limited", messages=MESSAGES, stream=stream)
            assert caught.value.status_code == 429
            assert caught.value.body == body["error"]


@pytest.mark.anyio
async def test_mid_stream_failures_end_the_stream_with_an_error_event() -> None:
    before = sse_events(chat_sse(["partial ", "text"], finish_reason=None, usage=None, done=False))
    in_band = b'event: error\ndata: {"error": {"message": "model overloaded", "type": "server_error"}}\n\n'
    upstream = FakeUpstream()
    upstream.add("in-band", Scenario([*before, in_band, *sse_events(chat_sse(["never"]))]))
    upstream.add("cut", Scenario([*before, *sse_events(chat_sse(["never"]))], cut_after=len(before)))
    upstream.add("truncated", Scenario(before))
    upstream.add("garbage", Scenario([*before, b"data: {oops\n\n"]))
    expected = {
        "in-band": ("server_error", None, "model overloaded"),
        "cut": ("upstream_error", "upstream_disconnected", "cut off"),
        "truncated": ("upstream_error", "upstream_truncated", "without a finish_reason"),
        "garbage": ("upstream_error", "invalid_upstream_response", "not valid JSON"),
    }
    async with proxied(upstream) as client:
        for model, (kind, code, words) in expected.items():
            received: list[str] = []
            with pytest.raises(openai.APIError) as caught:
                await stream_content(client, model, received)
            assert "".join(received) == "partial text", model
            assert (caught.value.type, caught.value.code) == (kind, code), model
            assert words in caught.value.message, model
    assert upstream.requests_for("cut")[0].outcome == "cut"


@pytest.mark.anyio
async def test_client_disconnect_closes_the_upstream_at_once() -> None:
    upstream = FakeUpstream()
    pieces = sse_events(chat_sse(["one ", "two ", "three"]))
    scenario = upstream.add("slow", Scenario(pieces, pause_after=3))  # waits forever after "two "
    whole = upstream.add(
        "whole-slow", Scenario([chat_completion("x")], media_type="application/json", hold=True)
    )
    async with proxied(upstream) as client:
        received: list[str] = []
        async with client.chat.completions.stream(model="slow", messages=MESSAGES) as events:
            async for event in events:
                if event.type == "content.delta":
                    received.append(event.delta)
                    if event.delta == "two ":
                        break
        record = upstream.requests_for("slow")[0]
        with anyio.fail_after(GUARD):
            await record.ended.wait()
        assert (record.outcome, record.sent, received) == ("cancelled", 3, ["one ", "two "])

        async def ask_whole() -> None:
            await client.chat.completions.create(model="whole-slow", messages=MESSAGES)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(ask_whole)
            with anyio.fail_after(GUARD):
                await whole.arrived.wait()
            tasks.cancel_scope.cancel()  # the client gives up: its connection to the proxy closes
        record = upstream.requests_for("whole-slow")[0]
        with anyio.fail_after(GUARD):
            await record.ended.wait()
        assert record.outcome == "cancelled"
    assert not scenario.release.is_set()
    assert not whole.release.is_set()


# --- the sans-IO core -------------------------------------------------------------------------------------


def read_back(body: bytes) -> tuple[list[ChunkResponse], list[dict[str, Any]], bool]:
    """The proxy's SSE output read by the OpenAI converter: chunks, error objects, and whether [DONE] came."""
    decoder, converter = SSEDecoder(), OpenAIChatConverter()
    chunks: list[ChunkResponse] = []
    errors: list[dict[str, Any]] = []
    done = False
    for event in decoder.feed(body) + decoder.finish():
        assert not done, "nothing follows [DONE]"
        if event.data == "[DONE]":
            done = True
            continue
        payload = msgspec.json.decode(event.data)
        if "error" in payload:
            errors.append(payload["error"])
            continue
        assert not errors, "nothing follows an error"
        chunks.extend(converter.feed(payload))
    return chunks, errors, done


def rewrite(body_pieces: Sequence[bytes], **options: Any) -> bytes:
    core = ChatStreamRewriter("kimi_k2", **options)
    out = [core.feed(piece) for piece in body_pieces]
    out.append(core.finish())
    return b"".join(out)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(1, 64), min_size=1, max_size=4))
def test_core_gives_the_same_calls_at_any_split(seed: int, sizes: list[int]) -> None:
    rng = random.Random(seed)
    case = generated_case(rng, 0)
    output = rewrite(split_bytes(chat_sse(case.deltas(rng)), sizes))
    chunks, errors, done = read_back(output)
    result = collect(chunks)
    assert (errors, done) == ([], True)
    assert result.content == case.content
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in result.calls] == case.calls
    assert result.finish_reasons[-1] == ("tool_calls" if case.calls else "stop")


def test_core_error_comes_after_everything_before_it() -> None:
    body = chat_sse(["a", "b<|tool_calls_sec"], finish_reason=None, usage=None, done=False)
    body += b'data: {"error": {"message": "boom", "code": "E1"}}\n\ndata: {"choices": []}\n\n'
    core = ChatStreamRewriter("kimi_k2")
    output = core.feed(body)
    assert core.ended
    assert core.error == {"message": "boom", "code": "E1", "type": "upstream_error"}, "the upstream's error"
    assert core.feed(b"data: more\n\n") == b""
    assert core.finish() == b""
    chunks, errors, done = read_back(output)
    assert collect(chunks).content == "ab<|tool_calls_sec", "the held partial marker is released"
    assert (errors, done) == ([core.error], False)


def test_core_caps_one_event_and_reports_transport_failures() -> None:
    core = ChatStreamRewriter("kimi_k2", max_event_size=400)
    output = core.feed(chat_sse(["ok"], finish_reason=None, usage=None, done=False) + b"data: " + b"x" * 500)
    chunks, errors, _ = read_back(output)
    assert collect(chunks).content == "ok"
    assert errors[0]["code"] == "invalid_upstream_response"
    assert "max_event_size=400" in errors[0]["message"]

    core = ChatStreamRewriter(None)
    output = core.feed(chat_sse(["kept <|tool_call_begin|>"], finish_reason=None, done=False))
    output += core.fail(
        {"error": {"message": "gone", "type": "upstream_error", "code": "upstream_disconnected"}}
    )
    chunks, errors, done = read_back(output)
    assert collect(chunks).content == "kept <|tool_call_begin|>", "no rewriting without a tool format"
    assert (errors[0]["code"], done) == ("upstream_disconnected", False)


@pytest.mark.anyio
async def test_a_defect_while_rewriting_still_ends_the_stream_properly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    feed = ChatStreamRewriter.feed

    def failing_feed(self: ChatStreamRewriter, data: bytes) -> bytes:
        if b"two" in data:
            raise RuntimeError("a bug")
        return feed(self, data)

    monkeypatch.setattr(ChatStreamRewriter, "feed", failing_feed)
    upstream = FakeUpstream()
    upstream.add("m", Scenario(sse_events(chat_sse(["one ", "two ", "three"]))))
    async with proxied(upstream) as client:
        received: list[str] = []
        with pytest.raises(openai.APIError) as caught:
            await stream_content(client, "m", received)
    assert received in ([], ["one "]), "what came before the failure (if read apart from it)"
    assert (caught.value.type, caught.value.code) == ("server_error", "proxy_error")


@pytest.mark.anyio
async def test_the_cli_serves_the_proxy_until_interrupted() -> None:
    upstream = FakeUpstream()
    upstream.add("m", Scenario([chat_completion("hello")], media_type="application/json"))
    port = closed_port()
    async with serving(upstream.app) as upstream_url:
        command = [
            sys.executable,
            "-m",
            "pipeline.cli.main",
            "proxy",
            "--upstream",
            upstream_url,
            "--port",
            str(port),
        ]
        async with await anyio.open_process(command, stderr=subprocess.PIPE) as process:
            assert process.stderr is not None
            with anyio.fail_after(GUARD):
                log = b""
                while b"Uvicorn running on" not in log:
                    log += await process.stderr.receive()
                assert b"rewriting kimi_k2 tool calls (--tool-format)" in log, "the default is said"
                async with httpx.AsyncClient() as http:
                    response = await http.post(
                        f"http://127.0.0.1:{port}/v1/chat/completions",
                        json={"model": "m", "messages": MESSAGES},
                    )
                assert response.json()["choices"][0]["message"]["content"] == "hello"
                process.send_signal(signal.SIGINT)
                assert await process.wait() == 0


# --- hardening: what a model server does with the request, answers that are not what was asked ----------


@pytest.mark.anyio
async def test_a_streamed_request_answered_with_a_whole_completion_keeps_the_answer() -> None:
    """The upstream ignores ``stream: true`` and answers one JSON completion (labelled as JSON, or not):
    the client gets it as a stream, calls rewritten, instead of an ``upstream_truncated`` error."""
    text = kimi_text("vllm-test_kimi-k2_multiline_json_args.txt")
    content, calls = kimi_reference(text)
    whole = chat_completion(text)
    upstream = FakeUpstream()
    upstream.add("json", Scenario([whole], media_type="application/json"))
    upstream.add("mislabelled", Scenario(split_bytes(b"\n " + whole, [5, 300])))
    error = {"error": {"message": "context too long", "type": "invalid_request_error", "code": "ctx"}}
    upstream.add("error", Scenario([json.dumps(error).encode()], media_type="application/json"))
    async with proxied(upstream) as client:
        for model in ("json", "mislabelled"):
            completion = await final_completion(client, model)
            choice = completion.choices[0]
            assert (choice.message.content, sdk_calls(choice.message.tool_calls)) == (content, calls), model
            assert choice.finish_reason == "tool_calls"
            assert_upstream_facts(completion)
        received: list[str] = []
        with pytest.raises(openai.APIError) as caught:
            await stream_content(client, "error", received)
        assert (caught.value.message, caught.value.code) == ("context too long", "ctx")
        assert received == []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 64), min_size=1, max_size=4), st.sampled_from(["", "\n", " \r\n "]))
def test_core_reads_a_whole_completion_at_any_split(sizes: list[int], blank: str) -> None:
    text = kimi_text("vllm-test_kimi-k2_multiline_json_args.txt")
    content, calls = kimi_reference(text)
    output = rewrite(split_bytes(blank.encode() + chat_completion(text, reasoning="hmm"), sizes))
    chunks, errors, done = read_back(output)
    result = collect(chunks)
    assert (errors, done) == ([], True)
    assert (result.content, result.reasoning) == (content, "hmm")
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in result.calls] == calls
    assert result.finish_reasons[-1] == "tool_calls"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == USAGE["total_tokens"]


def test_core_whole_completion_keeps_server_parsed_calls_and_caps_the_body() -> None:
    completion = json.loads(chat_completion("Let me look.", finish_reason="tool_calls"))
    completion["choices"][0]["message"]["tool_calls"] = [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"dir": "/"}'}}
    ]
    core = ChatStreamRewriter(None)
    output = core.feed(json.dumps(completion).encode()) + core.finish()
    chunks, errors, done = read_back(output)
    result = collect(chunks)
    assert (errors, done, result.content) == ([], True, "Let me look.")
    assert [(c.call_id, c.name, c.arguments) for c in result.calls] == [("call_1", "ls", '{"dir": "/"}')]

    core = ChatStreamRewriter("kimi_k2", max_response_bytes=100)
    output = core.feed(chat_completion("x" * 50)[:80]) + core.feed(b" " * 30)
    assert core.ended
    assert core.finish() == b""
    _, errors, done = read_back(output)
    assert errors[0]["code"] == "upstream_response_too_large"
    assert "max_response_bytes=100" in errors[0]["message"]

    for body, words in ((b"{not json", "does not decode"), (b'{"object": "list"}', "not a chat completion")):
        core = ChatStreamRewriter("kimi_k2")
        _, errors, done = read_back(core.feed(body) + core.finish())
        assert errors[0]["code"] == "invalid_upstream_response", body
        assert words in errors[0]["message"], body


@pytest.mark.anyio
@pytest.mark.parametrize("n", ["2", 2.0, " 3 ", "two", True, [2], {"n": 2}])
async def test_n_other_than_one_is_refused_with_stream_however_it_is_spelled(n: Any) -> None:
    upstream = FakeUpstream()
    upstream.add("m", Scenario(sse_events(chat_sse(["ok"]))))
    async with serving(upstream.app) as upstream_url:
        app = create_app(upstream_url, tool_format="kimi_k2")
        async with serving(app) as proxy_url, httpx.AsyncClient(base_url=proxy_url) as http:
            for stream in (True, "true"):
                body = {"model": "m", "messages": MESSAGES, "stream": stream, "n": n}
                response = await http.post("/v1/chat/completions", json=body)
                assert response.status_code == 400, (n, stream)
                assert response.json()["error"]["code"] == "unsupported_parameter"
                assert json.dumps(n, separators=(",", ":")) in response.json()["error"]["message"]
    assert upstream.requests_for("m") == [], "refused requests never reach the upstream"


@pytest.mark.anyio
async def test_n_equal_to_one_passes_with_stream() -> None:
    upstream = FakeUpstream()
    upstream.add("m", Scenario(sse_events(chat_sse(["ok"]))))
    async with serving(upstream.app) as upstream_url:
        app = create_app(upstream_url, tool_format="kimi_k2")
        async with serving(app) as proxy_url, httpx.AsyncClient(base_url=proxy_url) as http:
            for n in (1, 1.0, "1", None):
                body = {"model": "m", "messages": MESSAGES, "stream": True, "n": n}
                response = await http.post("/v1/chat/completions", json=body)
                assert response.status_code == 200, n
                assert response.content.endswith(b"data: [DONE]\n\n"), n
    assert [request.body["n"] for request in upstream.requests_for("m")] == [1, 1.0, "1", None]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool_request", "rewritten"),
    [
        ({}, False),
        ({"tools": []}, False),
        ({"tools": TOOLS, "tool_choice": "none"}, False),
        ({"tools": TOOLS}, True),
        ({"tools": TOOLS, "tool_choice": "auto"}, True),
        ({"tools": TOOLS, "tool_choice": "required"}, True),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "process_data"}}}, True),
    ],
)
async def test_text_is_rewritten_only_when_the_request_lets_the_model_call_tools(
    tool_request: dict[str, Any], rewritten: bool
) -> None:
    """No tools or ``tool_choice: "none"``: a model server does not parse calls, so neither does the proxy."""
    text = kimi_text("vllm-test_kimi-k2_multiline_json_args.txt")
    content, calls = kimi_reference(text)
    upstream = FakeUpstream()
    upstream.add("stream", Scenario(split_bytes(chat_sse(list(text)), [7, 50])))
    upstream.add("whole", Scenario([chat_completion(text)], media_type="application/json"))
    async with proxied(upstream) as client:
        chunks = [
            chunk
            async for chunk in await client.chat.completions.create(
                model="stream", messages=MESSAGES, stream=True, **tool_request
            )
        ]
        deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
        streamed_text = "".join(delta.content or "" for delta in deltas)
        streamed_calls = [call for delta in deltas for call in delta.tool_calls or ()]
        finish = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1]
        whole = (
            await client.chat.completions.create(model="whole", messages=MESSAGES, **tool_request)
        ).choices[0]
    if rewritten:
        assert (streamed_text, finish) == (content, "tool_calls")
        assert [call.id for call in streamed_calls if call.id] == [call[0] for call in calls]
        assert (whole.message.content, sdk_calls(whole.message.tool_calls)) == (content, calls)
        assert whole.finish_reason == "tool_calls"
    else:
        assert (streamed_text, streamed_calls, finish) == (text, [], "stop")
        assert (whole.message.content, whole.message.tool_calls, whole.finish_reason) == (text, None, "stop")


@pytest.mark.anyio
async def test_an_sse_answer_to_a_request_not_read_as_streamed_is_still_rewritten() -> None:
    """``"stream": "true"`` (a string): a lax server streams, and the proxy rewrites the stream it gets."""
    text = kimi_text("vllm-test_kimi-k2_multiline_json_args.txt")
    content, calls = kimi_reference(text)
    upstream = FakeUpstream()
    upstream.add("m", Scenario(sse_events(chat_sse([text]))))
    async with serving(upstream.app) as upstream_url:
        app = create_app(upstream_url, tool_format="kimi_k2", unknown_tools="allow")
        async with serving(app) as proxy_url, httpx.AsyncClient(base_url=proxy_url) as http:
            body = {"model": "m", "messages": MESSAGES, "tools": TOOLS, "stream": "true"}
            response = await http.post("/v1/chat/completions", json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks, errors, done = read_back(response.content)
    result = collect(chunks)
    assert (errors, done, result.content) == ([], True, content)
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in result.calls] == calls


@pytest.mark.anyio
async def test_headers_named_in_connection_are_not_forwarded() -> None:
    """RFC 9110 section 7.6.1: a header that ``Connection`` names belongs to that one hop, both ways."""
    upstream = FakeUpstream()
    hop = {"connection": "x-upstream-hop", "x-upstream-hop": "private", "x-upstream-kept": "1"}
    upstream.add("stream", Scenario(sse_events(chat_sse(["ok"])), headers=hop))
    upstream.add("whole", Scenario([chat_completion("ok")], media_type="application/json", headers=hop))
    async with serving(upstream.app) as upstream_url:
        app = create_app(upstream_url, tool_format="kimi_k2")
        async with serving(app) as proxy_url, httpx.AsyncClient(base_url=proxy_url) as http:
            headers = {"Connection": "keep-alive, X-Client-Hop", "X-Client-Hop": "secret", "X-Kept": "1"}
            responses = [
                await http.post(
                    "/v1/chat/completions",
                    json={"model": model, "messages": MESSAGES, "stream": model == "stream"},
                    headers=headers,
                )
                for model in ("stream", "whole")
            ]
            models = await http.get("/v1/models", headers=headers)
    for request in [*upstream.requests_for("stream"), *upstream.requests_for("whole"), upstream.received[-1]]:
        assert request.headers["x-kept"] == "1"
        assert "x-client-hop" not in request.headers
    for response in responses:
        assert response.status_code == 200
        assert response.headers["x-upstream-kept"] == "1"
        assert "x-upstream-hop" not in response.headers
    assert models.status_code == 200


def test_forwarded_headers_drop_what_connection_names() -> None:
    raw = [
        (b"Connection", b"close, X-A"),
        (b"connection", b" x-b ,,"),
        (b"X-A", b"1"),
        (b"x-b", b"2"),
        (b"X-C", b"3"),
        (b"Keep-Alive", b"timeout=5"),
    ]
    assert forwarded_headers(raw, frozenset({"connection", "keep-alive"})) == [("X-C", "3")]


# --- keep-alive: connections closed with no response ----------------------------------------------------


@pytest.mark.anyio
async def test_an_upstream_connection_closed_before_any_answer_is_retried_once() -> None:
    """The keep-alive race: the upstream closes an idle pooled connection as the proxy's request goes out
    (here: it closes the first connection without answering). The request is sent again, once."""
    heads: list[bytes] = []
    answer = chat_completion("hello")

    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                data += await stream.receive()
            head, _, body = data.partition(b"\r\n\r\n")
            heads.append(head)
            if len(heads) == 1 or b"model-closing" in head:
                return  # closed with no response
            length = int(re.search(rb"content-length: (\d+)", head.lower())[1])  # type: ignore[index]
            while len(body) < length:
                body += await stream.receive()
            await stream.send(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(answer), answer)
            )

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tasks:
        tasks.start_soon(listener.serve, handle)
        async with (
            serving(create_app(f"http://127.0.0.1:{port}")) as proxy_url,
            httpx.AsyncClient(base_url=proxy_url) as http,
        ):
            response = await http.post("/v1/chat/completions", json={"model": "m", "messages": MESSAGES})
            assert response.status_code == 200
            assert response.json()["choices"][0]["message"]["content"] == "hello"
            assert len(heads) == 2, "sent again once"
            response = await http.post(
                "/v1/chat/completions",
                headers={"x-model": "model-closing"},
                json={"model": "m", "messages": MESSAGES},
            )
            assert (response.status_code, response.json()["error"]["code"]) == (502, "upstream_error")
            assert len(heads) == 4, "only once"
        tasks.cancel_scope.cancel()


def test_serve_keeps_idle_client_connections_longer_than_clients_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's 5 s idle timeout equals httpx's (and the openai SDK's) keep-alive expiry: a pooled client
    then sometimes sends on a connection the server is closing and gets no response (found by the storm
    test at about 1 request in 600 with both at 5 s, none at 75 s)."""
    import gc

    import uvicorn

    from pipeline.proxy.app import serve

    seen: list[uvicorn.Config] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: seen.append(self.config))
    monkeypatch.setattr(gc, "freeze", lambda: None)  # serve() freezes its own process, not the tests'

    serve(upstream="http://127.0.0.1:1", port=closed_port())
    assert seen[0].timeout_keep_alive == 75 > httpx.Limits().keepalive_expiry  # type: ignore[operator]


@pytest.mark.anyio
async def test_storm_of_disconnects_beside_pooled_keep_alive_clients() -> None:
    """200 requests, 40 at a time, through a real uvicorn proxy: a third of the clients leave mid-stream,
    the rest share a keep-alive pool. Every pooled request gets its whole answer, every leaver's upstream
    request is closed, and the upstream sees nothing else."""
    words = [f"w{number} " for number in range(30)]
    upstream = FakeUpstream()
    upstream.add("pooled", Scenario(sse_events(chat_sse(words))))
    upstream.add("leaver", Scenario(sse_events(chat_sse(words)), pause_after=3))  # never released
    expected = "".join(words)
    answers: list[str] = []
    failures: list[str] = []
    plan = ["leaver" if number % 3 == 0 else "pooled" for number in range(200)]
    async with serving(upstream.app) as upstream_url:
        app = create_app(upstream_url, tool_format="kimi_k2")
        async with (
            serving(app, timeout_keep_alive=75) as proxy_url,
            httpx.AsyncClient(base_url=proxy_url, timeout=60) as pooled,
        ):
            limit = anyio.Semaphore(40)

            async def ask(client: httpx.AsyncClient, model: str) -> None:
                body = {"model": model, "messages": MESSAGES, "tools": TOOLS, "stream": True}
                async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                    if response.status_code != 200:
                        failures.append(f"{model}: {response.status_code} {(await response.aread())[:200]!r}")
                        return
                    if model == "leaver":
                        async for line in response.aiter_lines():
                            if "w1 " in line:
                                return  # leaves mid-stream: the connection is closed
                        failures.append("leaver: the stream ended before it left")
                        return
                    chunks, errors, done = read_back(await response.aread())
                    if errors or not done:
                        failures.append(f"pooled: {errors} done={done}")
                    answers.append(collect(chunks).content)

            async def one(model: str) -> None:
                async with limit:
                    try:
                        if model == "pooled":
                            await ask(pooled, model)
                        else:
                            async with httpx.AsyncClient(base_url=proxy_url, timeout=60) as own:
                                await ask(own, model)
                    except httpx.HTTPError as exc:
                        failures.append(f"{model}: {exc!r}")

            with anyio.fail_after(120):
                async with anyio.create_task_group() as tasks:
                    for model in plan:
                        tasks.start_soon(one, model)
                for record in upstream.received:
                    await record.ended.wait()
    assert failures == []
    assert answers == [expected] * plan.count("pooled")
    assert sorted(record.outcome for record in upstream.requests_for("leaver")) == ["cancelled"] * plan.count(
        "leaver"
    )
    assert [record.outcome for record in upstream.requests_for("pooled")] == ["complete"] * plan.count(
        "pooled"
    )

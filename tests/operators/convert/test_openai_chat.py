"""The OpenAI Chat Completions converter: exact chunks for small streams, and every recorded stream."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter.sources import from_bytes, from_dicts, provider_events
from operators.adapter.sse import EventParser, SSEDecoder
from operators.convert.openai_chat import OpenAIChatConverter, convert_openai_chat
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta
from tests.conftest import FIXTURES
from tests.converter_cases import collect, fold_calls, run_converter, sequential_ids

FIXTURE_FILES = sorted(
    path for folder in ("openai_chat", "openai_compatible") for path in (FIXTURES / folder).iterdir()
)
ERROR_FIXTURES = {path.name for path in FIXTURE_FILES if "error_event" in path.name}


def convert(*events: Mapping[str, Any], choice: int = 0) -> list[ChunkResponse]:
    return run_converter(OpenAIChatConverter(id_factory=sequential_ids, choice=choice), events)


def chunk(delta: Mapping[str, Any], finish_reason: str | None = None, index: int = 0) -> dict[str, Any]:
    return {"choices": [{"index": index, "delta": dict(delta), "finish_reason": finish_reason}]}


def tool(index: int | None = None, id: str | None = None, name: str | None = None, args: Any = None) -> Any:
    call: dict[str, Any] = {}
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"] = id
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    call["function"] = function
    return call


def tools(*calls: Any, finish_reason: str | None = None) -> dict[str, Any]:
    return chunk({"tool_calls": list(calls)}, finish_reason)


STOP = {"stop_reason": "stop"}
TOOL_CALLS = {"stop_reason": "tool_calls"}


class TestText:
    def test_text_usage_metadata_and_completion(self) -> None:
        head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "gpt-4o"}
        events = [
            {**head, "system_fingerprint": "fp_1", **chunk({"role": "assistant", "content": ""})},
            {**head, "system_fingerprint": "fp_1", **chunk({"content": "Hel"})},
            {**head, "system_fingerprint": "fp_1", **chunk({"content": "lo"})},
            {**head, "system_fingerprint": "fp_1", **chunk({}, "stop")},
            {**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
        ]
        metadata = {"id": "chatcmpl-1", "created": 7, "model": "gpt-4o", "system_fingerprint": "fp_1"}
        assert convert(*events) == [
            ChunkResponse(metadata=metadata),
            ChunkResponse(content="Hel"),
            ChunkResponse(content="lo"),
            ChunkResponse(finish_reason="stop", metadata=STOP),
            ChunkResponse(usage=TokenUsage(prompt_tokens=3, completion_tokens=2, total_tokens=5)),
            ChunkResponse(is_complete=True, finish_reason="stop"),
        ]

    def test_metadata_when_it_changes_and_not_when_empty(self) -> None:
        assert convert(
            {
                "id": "",
                "model": "",
                "created": 0,
                "choices": [],
                "prompt_filter_results": [{"prompt_index": 0}],
            },
            {"id": "a", "model": "m", **chunk({"content": "x"})},
            {"id": "a", "model": "m", "service_tier": "default", **chunk({"content": "y"})},
            {"id": "b", "model": "m", **chunk({"content": "z"})},
        ) == [
            ChunkResponse(content="x", metadata={"id": "a", "model": "m"}),
            ChunkResponse(content="y", metadata={"service_tier": "default"}),
            ChunkResponse(content="z", metadata={"id": "b"}),
            ChunkResponse(is_complete=True),
        ]

    def test_refusal_streams_like_content(self) -> None:
        assert convert(
            chunk({"role": "assistant", "content": None, "refusal": ""}),
            chunk({"refusal": "I can't"}, None),
            chunk({"refusal": " help."}),
            chunk({}, "stop"),
        ) == [
            ChunkResponse(refusal="I can't"),
            ChunkResponse(refusal=" help."),
            ChunkResponse(finish_reason="stop", metadata=STOP),
            ChunkResponse(is_complete=True, finish_reason="stop"),
        ]

    def test_choice_selects_one_of_n(self) -> None:
        events = [
            chunk({"content": "a0"}, index=0),
            chunk({"content": "b1"}, index=1),
            {"choices": [{"index": 0, "delta": {"content": "a1"}}, {"index": 1, "delta": {"content": "b2"}}]},
            chunk({}, "length", index=1),
            chunk({}, "stop", index=0),
        ]
        assert [c.content for c in convert(*events)] == ["a0", "a1", "", ""]
        second = convert(*events, choice=1)
        assert [c.content for c in second] == ["b1", "b2", "", ""]
        assert second[-1] == ChunkResponse(is_complete=True, finish_reason="length")

    def test_logprobs_and_content_filter_results_are_ignored(self) -> None:
        event = {
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": "x"},
                    "logprobs": {"content": [{"token": "x", "logprob": -0.1}]},
                    "content_filter_results": {"hate": {"filtered": False}},
                }
            ]
        }
        assert convert(event)[0] == ChunkResponse(content="x")

    def test_content_filter_finish(self) -> None:
        assert convert(chunk({"content": "x"}), chunk({}, "content_filter"))[1:] == [
            ChunkResponse(finish_reason="content_filter", metadata={"stop_reason": "content_filter"}),
            ChunkResponse(is_complete=True, finish_reason="content_filter"),
        ]

    def test_empty_stream_gives_nothing(self) -> None:
        assert convert() == []


class TestReasoning:
    def test_reasoning_content_and_reasoning_fields(self) -> None:
        assert convert(
            chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
            chunk({"reasoning_content": "think"}),
            chunk({"reasoning": " more", "channel": "analysis"}),
            chunk({"content": "answer", "reasoning_content": None}),
        )[:3] == [
            ChunkResponse(reasoning="think"),
            ChunkResponse(reasoning=" more"),
            ChunkResponse(content="answer"),
        ]

    def test_reasoning_details_are_not_doubled_and_carry_signature_and_encrypted(self) -> None:
        text = {"type": "reasoning.text", "text": "Hm", "format": "anthropic-claude-v1", "index": 0}
        assert convert(
            chunk({"reasoning": "Hm", "reasoning_details": [text]}),
            chunk({"reasoning_details": [{"type": "reasoning.text", "text": " ok"}]}),
            chunk({"reasoning_details": [{"type": "reasoning.summary", "summary": " sum"}]}),
            chunk({"reasoning_details": [{"type": "reasoning.text", "text": "", "signature": "sig"}]}),
            chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "blob1"}]}),
            chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "a"}, {"type": "x"}]}),
            chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "b"}] * 2}),
            chunk({"reasoning_details": []}),
        ) == [
            ChunkResponse(reasoning="Hm"),
            ChunkResponse(reasoning=" ok"),
            ChunkResponse(reasoning=" sum"),
            ChunkResponse(reasoning_signature="sig"),
            ChunkResponse(encrypted_reasoning="blob1"),
            ChunkResponse(encrypted_reasoning="a"),
            ChunkResponse(encrypted_reasoning="b"),
            ChunkResponse(encrypted_reasoning="b"),
            ChunkResponse(is_complete=True),
        ]

    def test_content_parts_with_thinking(self) -> None:
        thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "2+2"}]}
        assert convert(
            chunk({"content": [thinking]}),
            chunk({"content": [{"type": "thinking", "thinking": "=4"}, {"type": "text", "text": "4"}]}),
            chunk({"content": [{"type": "image_url", "image_url": {"url": "x"}}]}),
        ) == [
            ChunkResponse(reasoning="2+2"),
            ChunkResponse(content="4", reasoning="=4"),
            ChunkResponse(is_complete=True),
        ]

    def test_images(self) -> None:
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}
        assert convert(chunk({"images": [image]}))[0] == ChunkResponse(
            image_urls=["data:image/png;base64,AAA"]
        )


class TestToolCalls:
    def test_single_call_streamed_then_finished(self) -> None:
        assert convert(
            tools(
                {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
            ),
            tools(tool(0, args='{"a"')),
            tools(tool(0, args=": 1}")),
            tools(finish_reason="tool_calls"),
        ) == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, "call_1", "f")]),
            ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='{"a"')]),
            ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta=": 1}")]),
            ChunkResponse(
                tool_calls=[ToolCallDelta(0, finished=True)], finish_reason="tool_calls", metadata=TOOL_CALLS
            ),
            ChunkResponse(is_complete=True, finish_reason="tool_calls"),
        ]

    def test_interleaved_parallel_calls_finish_together(self) -> None:
        assert convert(
            tools(tool(0, "c0", "a", ""), tool(1, "c1", "b", "{}")),
            tools(tool(0, args="{")),
            tools(tool(0, args="}")),
            tools(finish_reason="tool_calls"),
        )[:4] == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, "c0", "a"), ToolCallDelta(1, "c1", "b", "{}")]),
            ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="{")]),
            ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="}")]),
            ChunkResponse(
                tool_calls=[ToolCallDelta(0, finished=True), ToolCallDelta(1, finished=True)],
                finish_reason="tool_calls",
                metadata=TOOL_CALLS,
            ),
        ]

    def test_whole_call_and_finish_in_one_chunk_without_index(self) -> None:
        """Mistral: no ``index``; a new id is a new call, no id and no index continues the last call."""
        assert convert(
            tools(tool(id="m1", name="f", args='{"x": ')),
            tools(tool(args="1}")),
            tools(tool(id="m2", name="g", args="{}"), finish_reason="tool_calls"),
        )[:3] == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, "m1", "f", '{"x": ')]),
            ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="1}")]),
            ChunkResponse(
                tool_calls=[
                    ToolCallDelta(1, "m2", "g", "{}", finished=True),
                    ToolCallDelta(0, finished=True),
                ],
                finish_reason="tool_calls",
                metadata=TOOL_CALLS,
            ),
        ]

    def test_index_starting_at_one_and_gaps(self) -> None:
        chunks = convert(
            tools(tool(1, "a", "f", "{}")), tools(tool(5, "b", "g", "{}")), tools(tool(1, args=" "))
        )
        assert [c.tool_calls for c in chunks[:3]] == [
            [ToolCallDelta(0, "a", "f", "{}")],
            [ToolCallDelta(1, "b", "g", "{}")],
            [ToolCallDelta(0, arguments_delta=" ")],
        ]

    def test_ids_and_names_repeated_or_empty_on_later_deltas(self) -> None:
        chunks = convert(
            tools(tool(0, "call_x", "f", "")),
            tools({**tool(0, "call_x", "f", "{"), "type": "function"}),
            tools(tool(0, "", "", "}")),
            tools(tool(0, "", None, "")),
        )
        assert [c.tool_calls for c in chunks[:3]] == [
            [ToolCallDelta(0, "call_x", "f")],
            [ToolCallDelta(0, arguments_delta="{")],
            [ToolCallDelta(0, arguments_delta="}")],
        ]
        assert chunks[3] == ChunkResponse(is_complete=True)

    def test_a_new_id_at_a_taken_index_is_a_new_call(self) -> None:
        chunks = convert(
            tools(tool(0, "a", "f", "{}")), tools(tool(0, "b", "g", "{}")), tools(tool(0, args=""))
        )
        assert [c.tool_calls for c in chunks[:2]] == [
            [ToolCallDelta(0, "a", "f", "{}")],
            [ToolCallDelta(1, "b", "g", "{}")],
        ]

    def test_missing_id_is_generated_and_a_late_name_is_waited_for(self) -> None:
        assert convert(tools(tool(0, args='{"a":')), tools(tool(0, name="f", args="1}")))[0] == ChunkResponse(
            tool_calls=[ToolCallDelta(0, "gen_0", "f", '{"a":1}')]
        )

    def test_arguments_sent_as_an_object(self) -> None:
        assert convert(tools(tool(0, "c", "f", {"city": "Paris"})))[0].tool_calls == [
            ToolCallDelta(0, "c", "f", '{"city":"Paris"}')
        ]

    def test_custom_tool_call(self) -> None:
        call = {"index": 0, "id": "c", "type": "custom", "custom": {"name": "patch", "input": "*** Begin"}}
        assert convert(tools(call), tools({"index": 0, "custom": {"input": " Patch"}}))[:2] == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, "c", "patch", "*** Begin", kind="custom")]),
            ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta=" Patch", kind="custom")]),
        ]

    def test_legacy_function_call(self) -> None:
        assert convert(
            chunk({"function_call": {"name": "f", "arguments": ""}}),
            chunk({"function_call": {"arguments": "{}"}}),
            chunk({}, "function_call"),
        ) == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, "gen_0", "f")]),
            ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="{}")]),
            ChunkResponse(
                tool_calls=[ToolCallDelta(0, finished=True)],
                finish_reason="tool_calls",
                metadata={"stop_reason": "function_call"},
            ),
            ChunkResponse(is_complete=True, finish_reason="tool_calls"),
        ]

    def test_trailing_empty_delta_and_repeated_finish_chunk_say_nothing(self) -> None:
        chunks = convert(
            tools(tool(0, "c", "f", "{}")),
            tools(tool(0, args=""), finish_reason="tool_calls"),
            {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "tool_calls"}]},
        )
        assert chunks[1:] == [
            ChunkResponse(
                tool_calls=[ToolCallDelta(0, finished=True)], finish_reason="tool_calls", metadata=TOOL_CALLS
            ),
            ChunkResponse(is_complete=True, finish_reason="tool_calls"),
        ]

    def test_native_finish_reason_is_the_stop_reason(self) -> None:
        event = {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "STOP", "native_finish_reason": "end"}]
        }
        assert convert(event)[0] == ChunkResponse(finish_reason="stop", metadata={"stop_reason": "end"})


class TestUsage:
    def test_xai_reasoning_tokens_outside_completion_tokens(self) -> None:
        usage = {
            "prompt_tokens": 432,
            "completion_tokens": 68,
            "total_tokens": 636,
            "prompt_tokens_details": {"cached_tokens": 153},
            "completion_tokens_details": {"reasoning_tokens": 136},
        }
        assert convert({"choices": [], "usage": usage})[0].usage == TokenUsage(
            prompt_tokens=432,
            completion_tokens=204,
            total_tokens=636,
            cached_tokens=153,
            reasoning_tokens=136,
        )

    def test_openai_reasoning_tokens_inside_completion_tokens(self) -> None:
        usage = {
            "prompt_tokens": 190,
            "completion_tokens": 379,
            "total_tokens": 569,
            "completion_tokens_details": {"reasoning_tokens": 320},
        }
        assert convert({"choices": [], "usage": usage})[0].usage == TokenUsage(
            prompt_tokens=190, completion_tokens=379, total_tokens=569, reasoning_tokens=320
        )

    def test_groq_deepseek_openrouter_variants_and_dedup(self) -> None:
        groq = {
            "x_groq": {"id": "req", "usage": {"prompt_tokens": 2, "completion_tokens": 1, "queue_time": 0.1}}
        }
        deepseek = {"prompt_tokens": 5, "completion_tokens": 1, "prompt_cache_hit_tokens": 4}
        openrouter = {
            "prompt_tokens": 5,
            "completion_tokens": 2,
            "total_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 1, "cache_write_tokens": 3},
        }
        chunks = convert(
            {"choices": [], **groq},
            {"choices": [], **groq},
            {"choices": [], "usage": deepseek},
            {"choices": [], "usage": openrouter},
        )
        assert [c.usage for c in chunks[:-1]] == [
            TokenUsage(prompt_tokens=2, completion_tokens=1, total_tokens=3),
            TokenUsage(prompt_tokens=5, completion_tokens=1, total_tokens=6, cached_tokens=4),
            TokenUsage(
                prompt_tokens=5, completion_tokens=2, total_tokens=7, cached_tokens=1, cache_creation_tokens=3
            ),
        ]


class TestErrors:
    def test_error_object_raises_after_what_came_before(self) -> None:
        converter = OpenAIChatConverter()
        assert converter.feed(chunk({"content": "a"})) == [ChunkResponse(content="a")]
        error = {"message": "upstream overloaded", "code": 502}
        with pytest.raises(ProviderError, match="event 1: provider error: upstream overloaded") as caught:
            converter.feed({"error": error, "choices": [{"index": 0, "delta": {}, "finish_reason": "error"}]})
        assert caught.value.status == 502

    @pytest.mark.parametrize(
        ("event", "message"),
        [
            ({"choices": {"index": 0}}, "event 1: field 'choices': Expected `array | null`, got `object`"),
            (chunk({"content": 5}), "event 1: field 'choices[0].delta.content': Expected `str | array"),
            (
                tools({"index": "0", "id": "c", "function": {"name": "f"}}),
                "event 1: field 'choices[0].delta.tool_calls[0].index': Expected `int | null`, got `str`",
            ),
            (tools(tool(0, "c", "f", 12)), "event 1: field 'choices[0].delta.tool_calls[0].function.argum"),
            ({"choices": [], "usage": {"prompt_tokens": "3"}}, "event 1: field 'usage.prompt_tokens'"),
            (["not", "a", "chunk"], "event 1: expected a chunk object, got list"),
        ],
    )
    def test_mistyped_fields_name_the_event_and_field(self, event: Any, message: str) -> None:
        converter = OpenAIChatConverter()
        converter.feed(chunk({"content": "ok"}))
        with pytest.raises(ConverterError, match=re.escape(message)) as caught:
            converter.feed(event)
        assert caught.value.event_number == 1

    def test_arguments_after_finish(self) -> None:
        with pytest.raises(ConverterError, match="tool call 0 received arguments after its finish_reason"):
            convert(tools(tool(0, "c", "f", "{}"), finish_reason="tool_calls"), tools(tool(0, args="x")))

    def test_call_that_never_got_a_name(self) -> None:
        with pytest.raises(ConverterError, match="event 1: tool call 0 ended without a function name"):
            convert(tools(tool(0, "c", args="{}")), tools(finish_reason="tool_calls"))


def fixture_events(path: Path) -> tuple[list[dict[str, Any]], ProviderError | None]:
    """The provider payloads of a recorded stream, and the in-band error that ended it, if any."""
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in data.decode().splitlines() if line.strip()], None
    parser = EventParser()
    payloads: list[dict[str, Any]] = []
    for event in SSEDecoder().feed(data):
        try:
            payloads.extend(parser.feed(event))
        except ProviderError as error:
            return payloads, error
    return payloads, None


def reference(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """What the stream says, read directly from the payloads of choice 0 (no converter logic shared)."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[Any, dict[str, Any]] = {}
    last_key: Any = None
    finish = None
    usage = None
    for payload in payloads:
        usage = payload.get("usage") or (payload.get("x_groq") or {}).get("usage") or usage
        for choice in payload.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            parts = delta.get("content")
            for part in parts if isinstance(parts, list) else []:
                if part["type"] == "text":
                    content.append(part["text"])
                else:
                    reasoning.extend(inner["text"] for inner in part["thinking"])
            text = delta.get("reasoning_content") or delta.get("reasoning")
            if not text:
                text = "".join(
                    d.get("text") or d.get("summary") or "" for d in delta.get("reasoning_details") or []
                )
            reasoning.append(text or "")
            for call in delta.get("tool_calls") or []:
                key = call.get("index", call.get("id") or last_key)
                last_key = key
                record = calls.setdefault(key, {"id": None, "name": None, "arguments": []})
                record["id"] = record["id"] or call.get("id") or None
                record["name"] = record["name"] or call["function"].get("name") or None
                record["arguments"].append(call["function"].get("arguments") or "")
            finish = choice.get("finish_reason") or finish
    return {
        "content": "".join(content),
        "reasoning": "".join(reasoning),
        "calls": [(c["id"], c["name"], json.loads("".join(c["arguments"]))) for c in calls.values()],
        "finish_reason": finish,
        "usage": usage,
    }


def summary(chunks: list[ChunkResponse]) -> dict[str, Any]:
    content = "".join(c.content for c in chunks)
    reasoning = "".join(c.reasoning or "" for c in chunks)
    calls = fold_calls(chunks)
    assert all(call.finished for call in calls)
    return {
        "content": content,
        "reasoning": reasoning,
        "calls": [(call.call_id, call.name, json.loads(call.arguments)) for call in calls],
    }


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_recorded_stream(path: Path) -> None:
    payloads, error = fixture_events(path)
    expected = reference(payloads)
    chunks = convert(*payloads)
    if error is not None:
        assert path.name in ERROR_FIXTURES
        assert error.kind == "tool_use_failed"
        assert chunks[-1] == ChunkResponse(is_complete=True)
        assert not expected["calls"]
        assert summary(chunks)["content"] == expected["content"]
        assert summary(chunks)["reasoning"] == expected["reasoning"]
        return
    got = summary(chunks)
    assert got["content"] == expected["content"]
    assert got["reasoning"] == expected["reasoning"]
    assert [(name, arguments) for _, name, arguments in got["calls"]] == [
        (name, arguments) for _, name, arguments in expected["calls"]
    ]
    assert [call_id for call_id, _, _ in got["calls"]] == [
        call_id or f"gen_{position}" for position, (call_id, _, _) in enumerate(expected["calls"])
    ]
    last = chunks[-1]
    assert last.is_complete
    assert sum(c.is_complete for c in chunks) == 1
    expected_finish = expected["finish_reason"]
    assert last.finish_reason == (expected_finish.lower() if expected_finish else None)
    if expected["calls"]:
        assert last.finish_reason == "tool_calls"
    usages = [c.usage for c in chunks if c.usage is not None]
    if expected["usage"] is None:
        assert usages == []
    else:
        assert usages[-1].prompt_tokens == expected["usage"]["prompt_tokens"]
        assert usages[-1].total_tokens == expected["usage"]["total_tokens"]
        assert usages[-1].completion_tokens >= expected["usage"]["completion_tokens"]
    metadata: dict[str, Any] = {}
    for c in chunks:
        metadata.update(c.metadata or {})
    with_id = [p for p in payloads if p.get("id")]
    if with_id:
        assert metadata["id"] == with_id[-1]["id"]
        assert metadata["model"] == with_id[-1]["model"]


def test_the_fixture_quirks_are_covered() -> None:
    """The quirks this converter handles each occur in at least one recorded stream."""
    by_name = {path.name: summary(convert(*fixture_events(path)[0])) for path in FIXTURE_FILES}
    assert by_name["vercel_anthropic-openai-compat_text_then_tool_call_index1.sse"]["calls"] == [
        ("toolu_sanitized", "read_file", {"path": "a.txt"})
    ]
    assert by_name["vercel_mistral-small_tool_call_no_index.jsonl"]["calls"] == [
        ("gSIMJiOkT", "weather", {"location": "San Francisco"})
    ]
    assert by_name["vercel_alibaba_qwen3-max_tool_call.jsonl"]["calls"] == [
        ("call_eee11723464a4b9eb8cee71d", "weather", {"location": "San Francisco"})
    ]
    assert by_name["vercel_mistral_magistral_thinking_content_list.jsonl"] == {
        "content": "2 + 2 = 4",
        "reasoning": "The user is asking for 2+2. This is basic arithmetic. 2+2=4.",
        "calls": [],
    }
    openrouter = "pydantic-ai_openrouter_reasoning_details_text.sse"
    chunks = convert(*fixture_events(FIXTURES / "openai_compatible" / openrouter)[0])
    assert "".join(c.reasoning or "" for c in chunks) == "This is a simple arithmetic question. 2+2 equals 4."
    assert [c.reasoning_signature for c in chunks if c.reasoning_signature] == [
        "Et0BCkgIChACGAIqQA2s7h7tA7IG35fbwVkou9PM2hANVJNUwcEM4q12fTRDK6y3v6YoEvJ+7bko8wnW/GLsQFXadaJPAEMCpLk"
        "hI9ISDLjFkeR1aVUIvdCtyBoMrUTovh0jwk+wpnZWIjANV3e6VVdgbGSsEyyTHO6KMmVtqqs79f9blnVdJmmMIwMyTi6bEtG59+"
        "jTU7v1zlsqQ2IKGZILOlr6adh0Aam7zYttvisys+wjyZZXU1y/Srz0nmp1cFgVOJe1BLKQI3SSRrjsqQC0uAEUZy0GX0Rq1AXjvIc"
        "YAQ=="
    ]
    gemini = FIXTURES / "openai_compatible" / "fantasy_openrouter_gemini_2_parallel_tools.sse"
    encrypted = [c.encrypted_reasoning for c in convert(*fixture_events(gemini)[0]) if c.encrypted_reasoning]
    assert encrypted == ["EjQKMgEMOdbHkJxR6ymAEgQGz1qCdA0vBnhty0KPBjiAVrJ/Hf5kChgp6eGY0f0J+HoLlFtA"]
    xai = FIXTURES / "openai_compatible" / "fantasy_xai_grok-4-fast_2_parallel_tools_no_text.sse"
    usage = next(c.usage for c in convert(*fixture_events(xai)[0]) if c.usage)
    assert (usage.completion_tokens, usage.reasoning_tokens, usage.total_tokens) == (204, 136, 636)


@settings(max_examples=30, deadline=None)
@given(
    path=st.sampled_from(
        [path for path in FIXTURE_FILES if path.suffix == ".sse" and path.name not in ERROR_FIXTURES]
    ),
    size=st.integers(min_value=1, max_value=300),
)
def test_any_chunking_of_the_bytes_gives_the_same_chunks(path: Path, size: int) -> None:
    data = path.read_bytes()
    decoder, parser, converter = SSEDecoder(), EventParser(), OpenAIChatConverter(id_factory=sequential_ids)
    chunks: list[ChunkResponse] = []
    for start in range(0, len(data), size):
        for event in decoder.feed(data[start : start + size]):
            for payload in parser.feed(event):
                chunks.extend(converter.feed(payload))
    for event in decoder.finish():
        for payload in parser.feed(event):
            chunks.extend(converter.feed(payload))
    chunks.extend(converter.finish())
    assert chunks == convert(*fixture_events(path)[0])


@pytest.mark.anyio
async def test_operator_over_bytes_and_over_dicts() -> None:
    path = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"
    payloads, _ = fixture_events(path)
    from_raw = await collect(
        from_bytes(path.read_bytes(), chunk_size=97)
        | provider_events.pipe()
        | convert_openai_chat.pipe(id_factory=sequential_ids)
    )
    from_memory = await collect(from_dicts(payloads) | convert_openai_chat.pipe(id_factory=sequential_ids))
    assert from_raw == from_memory == convert(*payloads)
    assert summary(from_raw)["calls"] == [
        (
            "call_JMW1whyEaYG438VE1OIflxA2",
            "GetWeatherArgs",
            {"city": "Edinburgh", "country": "GB", "units": "c"},
        ),
        ("call_DNYTawLBoN8fj3KN6qU9N1Ou", "get_stock_price", {"ticker": "AAPL", "exchange": "NASDAQ"}),
    ]

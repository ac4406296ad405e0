"""operators.encode.openai_chat: chunks back to OpenAI Chat Completions chunks, SSE text and whole
completions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiostream import streamcontext
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter.sse import EventParser, SSEDecoder
from operators.convert.openai_chat import OpenAIChatConverter
from operators.encode.openai_chat import (
    OpenAIChunkEncoder,
    _openai_usage,
    encode_openai_chat,
    sse_line,
)
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta
from pipeline.proxy.rewriter import fold_openai_completion
from tests.delimiter_cases import Call, collect, numbered_ids, run

META = {"id": "chatcmpl-1", "model": "m", "created": 7, "system_fingerprint": "fp_1"}
HEAD = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 7,
    "model": "m",
    "system_fingerprint": "fp_1",
}


def choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {**HEAD, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def encode_all(chunks: list[ChunkResponse], *, finish: bool = True) -> list[dict[str, Any]]:
    encoder = OpenAIChunkEncoder()
    out = [encoded for chunk in chunks for encoded in encoder.feed(chunk)]
    if finish:
        out.extend(encoder.finish())
    return out


def test_text_stream_role_first_finish_and_usage_last() -> None:
    usage = TokenUsage(
        prompt_tokens=3, completion_tokens=4, total_tokens=7, cached_tokens=1, reasoning_tokens=2
    )
    chunks = [
        ChunkResponse(metadata=META),
        ChunkResponse(content="Hel"),
        ChunkResponse(reasoning="hmm", content="lo"),
        ChunkResponse(finish_reason="stop", usage=usage),
        ChunkResponse(is_complete=True, finish_reason="stop"),
    ]
    assert encode_all(chunks) == [
        choice({"role": "assistant", "content": "Hel"}),
        choice({"content": "lo", "reasoning_content": "hmm"}),
        choice({}, "stop"),
        {
            **HEAD,
            "choices": [],
            "usage": {
                "prompt_tokens": 3,
                "completion_tokens": 4,
                "total_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 1},
                "completion_tokens_details": {"reasoning_tokens": 2},
            },
        },
    ]


def test_tool_call_first_delta_carries_id_type_and_name_later_ones_only_arguments() -> None:
    chunks = [
        ChunkResponse(content="Let me look.", metadata=META),
        ChunkResponse(tool_calls=[ToolCallDelta(0, "functions.get:0", "get", '{"a"')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta=": 1}", finished=True)]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, "c2", "put"), ToolCallDelta(1, arguments_delta="{}")]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, finished=True)], finish_reason="stop"),
        ChunkResponse(is_complete=True, finish_reason="stop"),
    ]
    assert encode_all(chunks, finish=False) == [
        choice({"role": "assistant", "content": "Let me look."}),
        choice(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "functions.get:0",
                        "type": "function",
                        "function": {"name": "get", "arguments": '{"a"'},
                    }
                ]
            }
        ),
        choice({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}),
        choice(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "put", "arguments": ""},
                    },
                    {"index": 1, "function": {"arguments": "{}"}},
                ]
            }
        ),
        choice({}, "tool_calls"),
    ]


def test_finish_reason_waits_for_text_released_after_it() -> None:
    encoder = OpenAIChunkEncoder()
    assert encoder.feed(ChunkResponse(content="a", metadata=META)) == [
        choice({"role": "assistant", "content": "a"})
    ]
    assert encoder.feed(ChunkResponse(finish_reason="length")) == []
    assert encoder.feed(ChunkResponse(content="<|held", is_complete=True)) == [
        choice({"content": "<|held"}),
        choice({}, "length"),
    ]
    assert encoder.finish_reason == "length"
    assert encoder.finish() == []


def test_no_finish_reason_is_invented() -> None:
    encoder = OpenAIChunkEncoder()
    assert encoder.feed(ChunkResponse(content="cut", metadata=META)) == [
        choice({"role": "assistant", "content": "cut"})
    ]
    assert encoder.finish() == []
    assert encoder.finish_reason is None


def test_finish_only_response_still_opens_with_the_role() -> None:
    out = encode_all([ChunkResponse(metadata=META), ChunkResponse(is_complete=True, finish_reason="stop")])
    assert out == [choice({"role": "assistant", "content": ""}), choice({}, "stop")]
    out = encode_all([ChunkResponse(is_complete=True, finish_reason="stop", metadata=META)])
    assert out == [choice({"role": "assistant", "content": ""}), choice({}, "stop")]


def test_encoder_serves_one_response_after_another() -> None:
    encoder = OpenAIChunkEncoder()
    first = encoder.feed(ChunkResponse(tool_calls=[ToolCallDelta(0, "a", "f", "{}")], metadata=META))
    first += encoder.feed(ChunkResponse(is_complete=True, finish_reason="stop"))
    second = encoder.feed(ChunkResponse(content="x", metadata={**META, "id": "chatcmpl-2"}))
    second += encoder.feed(ChunkResponse(is_complete=True, finish_reason="stop"))
    assert first[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert [chunk["id"] for chunk in second] == ["chatcmpl-2", "chatcmpl-2"]
    assert second[0]["choices"][0]["delta"] == {"role": "assistant", "content": "x"}
    assert second[-1]["choices"][0]["finish_reason"] == "stop"


def test_missing_metadata_is_supplied_once_refusal_custom_calls_and_images() -> None:
    encoder = OpenAIChunkEncoder(completion_id=lambda: "chatcmpl-made", clock=lambda: 99.7, choice_index=2)
    out = encoder.feed(
        ChunkResponse(
            refusal="no",
            image_urls=["data:image/png;base64,AA"],
            tool_calls=[ToolCallDelta(0, "ct", "grammar", "x = 1", kind="custom")],
        )
    )
    out += encoder.feed(ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="+2", kind="custom")]))
    head = {"id": "chatcmpl-made", "object": "chat.completion.chunk", "created": 99, "model": ""}
    assert out == [
        {
            **head,
            "choices": [
                {
                    "index": 2,
                    "delta": {
                        "role": "assistant",
                        "refusal": "no",
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "ct",
                                "type": "custom",
                                "custom": {"name": "grammar", "input": "x = 1"},
                            }
                        ],
                        "images": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}],
                    },
                    "finish_reason": None,
                }
            ],
        },
        {
            **head,
            "choices": [
                {
                    "index": 2,
                    "delta": {"tool_calls": [{"index": 0, "custom": {"input": "+2"}}]},
                    "finish_reason": None,
                }
            ],
        },
    ]


def test_usage_shapes() -> None:
    assert _openai_usage(TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3)) == {
        "prompt_tokens": 1,
        "completion_tokens": 2,
        "total_tokens": 3,
    }
    assert _openai_usage(TokenUsage(cache_creation_tokens=5))["prompt_tokens_details"] == {
        "cache_write_tokens": 5
    }


@pytest.mark.anyio
async def test_encode_openai_chat_yields_sse_text() -> None:
    chunks = [
        ChunkResponse(content="hi", metadata=META),
        ChunkResponse(is_complete=True, finish_reason="stop"),
    ]

    async def source() -> AsyncIterator[ChunkResponse]:
        for chunk in chunks:
            yield chunk

    async with streamcontext(encode_openai_chat(source())) as encoded:
        lines = [line async for line in encoded]
    assert lines == [
        "data: " + json.dumps(choice({"role": "assistant", "content": "hi"}), separators=(",", ":")) + "\n\n",
        "data: " + json.dumps(choice({}, "stop"), separators=(",", ":")) + "\n\n",
    ]
    assert sse_line({"a": "é"}) == 'data: {"a":"é"}\n\n'.encode()


# --- round trip: encoded chunks read back by the OpenAI converter fold to the same response

_text = st.text(alphabet=st.sampled_from(list('ab "\\{}é\n🙂<|')), min_size=1, max_size=6)


@st.composite
def _responses(draw: st.DrawFn) -> list[ChunkResponse]:
    chunks: list[ChunkResponse] = [ChunkResponse(metadata=META)]
    calls = 0
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["content", "reasoning", "call"]))
        if kind == "content":
            chunks.append(ChunkResponse(content=draw(_text)))
        elif kind == "reasoning":
            chunks.append(ChunkResponse(reasoning=draw(_text)))
        else:
            arguments = json.dumps({"k": draw(_text), "n": draw(st.integers())})
            cuts = sorted(draw(st.sets(st.integers(1, len(arguments) - 1), max_size=4)))
            pieces = [arguments[a:b] for a, b in zip([0, *cuts], [*cuts, len(arguments)], strict=True)]
            chunks.append(
                ChunkResponse(tool_calls=[ToolCallDelta(calls, f"call_{calls}", f"tool{calls}", pieces[0])])
            )
            chunks.extend(
                ChunkResponse(tool_calls=[ToolCallDelta(calls, arguments_delta=p)]) for p in pieces[1:]
            )
            calls += 1
    chunks.append(ChunkResponse(finish_reason=draw(st.sampled_from(["stop", "length"]))))
    chunks.append(ChunkResponse(is_complete=True))
    return chunks


@settings(max_examples=150, deadline=None)
@given(_responses(), st.lists(st.integers(1, 40), min_size=1, max_size=5))
def test_round_trip_through_the_openai_converter(chunks: list[ChunkResponse], sizes: list[int]) -> None:
    body = b"".join(sse_line(encoded) for encoded in encode_all(chunks)) + b"data: [DONE]\n\n"
    decoder, parser, converter = SSEDecoder(), EventParser(), OpenAIChatConverter(id_factory=numbered_ids)
    back: list[ChunkResponse] = []
    start, turn = 0, 0
    while start < len(body):
        piece = body[start : start + sizes[turn % len(sizes)]]
        start, turn = start + len(piece), turn + 1
        for event in decoder.feed(piece):
            for payload in parser.feed(event):
                back.extend(converter.feed(payload))
    back.extend(converter.finish())
    original, decoded = collect(chunks), collect(back)
    assert decoded.content == original.content
    assert decoded.reasoning == original.reasoning
    assert [(c.call_id, c.name, c.arguments) for c in decoded.calls] == [
        (c.call_id, c.name, c.arguments) for c in original.calls
    ]
    expected_finish = (
        "tool_calls" if original.calls and original.finish_reasons == ["stop"] else original.finish_reasons[0]
    )
    assert decoded.finish_reasons[-1] == expected_finish
    assert all(call.finished for call in decoded.calls)


# --- whole completions

KIMI = (
    "I'll check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Beijing"}<|tool_call_end|><|tool_call_begin|>functions.get_news:1'
    '<|tool_call_argument_begin|>{"topic": "tech"}<|tool_call_end|><|tool_calls_section_end|>'
)


def completion(message: dict[str, Any], finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-9",
        "object": "chat.completion",
        "created": 5,
        "model": "kimi",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }


def test_fold_moves_calls_out_of_the_content() -> None:
    original = completion({"role": "assistant", "content": KIMI})
    folded = fold_openai_completion(original, "kimi_k2")
    expected = completion(
        {
            "role": "assistant",
            "content": "I'll check.",
            "tool_calls": [
                {
                    "id": "functions.get_weather:0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Beijing"}'},
                },
                {
                    "id": "functions.get_news:1",
                    "type": "function",
                    "function": {"name": "get_news", "arguments": '{"topic": "tech"}'},
                },
            ],
        },
        "tool_calls",
    )
    assert folded == expected
    assert original["choices"][0]["message"]["content"] == KIMI, "the input is not modified"


def test_fold_reasoning_calls_existing_calls_and_empty_content() -> None:
    server_call = {"id": "s1", "type": "function", "function": {"name": "srv", "arguments": "{}"}}
    message = {
        "role": "assistant",
        "content": None,
        "reasoning_content": "think " + KIMI[len("I'll check.") :],
        "tool_calls": [server_call],
    }
    folded = fold_openai_completion(completion(message, "length"), "kimi_k2")
    choice = folded["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] is None
    assert choice["message"]["reasoning_content"] == "think "
    assert [call["id"] for call in choice["message"]["tool_calls"]] == [
        "s1",
        "functions.get_weather:0",
        "functions.get_news:1",
    ]


def test_fold_leaves_completions_without_calls_as_they_are() -> None:
    plain = completion({"role": "assistant", "content": "just text"})
    assert fold_openai_completion(plain, "kimi_k2") == plain
    parts = completion({"role": "assistant", "content": [{"type": "text", "text": KIMI}]})
    assert fold_openai_completion(parts, "kimi_k2") == parts
    assert fold_openai_completion({"error": {"message": "x"}}, "kimi_k2") == {"error": {"message": "x"}}


def test_fold_agrees_with_the_streamed_rewrite() -> None:
    folded = fold_openai_completion(completion({"role": "assistant", "content": KIMI}), "kimi_k2")
    calls = [
        Call(i, c["id"], c["function"]["name"], c["function"]["arguments"])
        for i, c in enumerate(folded["choices"][0]["message"]["tool_calls"])
    ]
    streamed = run("kimi_k2", list(KIMI))
    assert streamed.calls == calls
    assert streamed.content == folded["choices"][0]["message"]["content"]
    assert msgspec.json.decode(msgspec.json.encode(folded)) == folded


def test_calls_only_response_has_no_content_and_upstream_usage_is_kept_as_sent() -> None:
    encoder = OpenAIChunkEncoder()
    encoder.upstream_usage = {
        "prompt_tokens": 1,
        "completion_tokens": 2,
        "total_tokens": 3,
        "queue_time": 0.5,
    }
    out = encoder.feed(ChunkResponse(metadata=META))
    out += encoder.feed(ChunkResponse(tool_calls=[ToolCallDelta(0, "c", "f", "{}")]))
    out += encoder.feed(ChunkResponse(usage=TokenUsage(prompt_tokens=1, completion_tokens=9, total_tokens=3)))
    out += encoder.feed(ChunkResponse(is_complete=True, finish_reason="tool_calls"))
    call = {"index": 0, "id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assert out == [
        choice({"role": "assistant", "tool_calls": [call]}),
        choice({}, "tool_calls"),
        {
            **HEAD,
            "choices": [],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3, "queue_time": 0.5},
        },
    ]
    assert encoder.upstream_usage is None, "it belongs to the response that ended"


def test_lone_surrogates_are_escaped_not_fatal() -> None:
    """A dict source can hand over a string holding a lone surrogate: the SSE line escapes it."""
    encoder = OpenAIChunkEncoder()
    chunks = encoder.feed(ChunkResponse(metadata=META, content="a\ud800b"))
    line = sse_line(chunks[0])
    assert line.startswith(b"data: {")
    assert line.endswith(b"}\n\n")
    assert b"\\ud800" in line
    assert json.loads(line[len(b"data: ") :])["choices"][0]["delta"] == {
        "role": "assistant",
        "content": "a\ud800b",
    }


@pytest.mark.anyio
async def test_encode_openai_chat_survives_a_lone_surrogate_in_a_call() -> None:
    chunks = [
        ChunkResponse(metadata=META, tool_calls=[ToolCallDelta(0, "c1", "f", '{"a": "\udfff"}')]),
        ChunkResponse(is_complete=True, finish_reason="stop"),
    ]

    async def source() -> AsyncIterator[ChunkResponse]:
        for chunk in chunks:
            yield chunk

    async with streamcontext(encode_openai_chat(source())) as lines:
        texts = [line async for line in lines]
    first = json.loads(texts[0][len("data: ") :])
    assert first["choices"][0]["delta"]["tool_calls"][0]["function"] == {
        "name": "f",
        "arguments": '{"a": "\udfff"}',
    }
    assert json.loads(texts[-1][len("data: ") :])["choices"][0]["finish_reason"] == "tool_calls"

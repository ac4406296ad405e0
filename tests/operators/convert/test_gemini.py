"""The Gemini converter: hand-written chunks, streamed partialArgs, every recorded stream, the operator."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from aiostream import stream
from hypothesis import given
from hypothesis import strategies as st

from operators.convert.gemini import GeminiConverter, convert_gemini, normalize_gemini_finish_reason
from operators.convert.gemini._partial_args import PartialArgsWriter, parse_json_path
from pipeline import process
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, ResponseEnd, TokenUsage, ToolCallDelta, ToolInvocation
from pipeline.testing import collect, sequential_call_ids
from tests.conftest import TESTS
from tests.converter_cases import fold_calls, load_events, run_converter, sequential_ids
from tests.reference import read_payloads

FIXTURES = TESTS / "fixtures" / "gemini"
RECORDINGS = sorted(path for path in FIXTURES.iterdir() if path.suffix in {".sse", ".jsonl"})


def convert(events: Iterable[Any]) -> list[ChunkResponse]:
    return run_converter(GeminiConverter(id_factory=sequential_ids), events)


def chunk(*parts: dict[str, Any], finish: str | None = None, **fields: Any) -> dict[str, Any]:
    """A ``GenerateContentResponse`` with ``parts`` in candidate 0."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **fields}


def call(**function_call: Any) -> dict[str, Any]:
    return {"functionCall": function_call}


def partial(path: str, value: Any = None, *, kind: str = "stringValue", more: bool = False) -> dict[str, Any]:
    arg: dict[str, Any] = {"jsonPath": path, kind: value if kind != "nullValue" else "NULL_VALUE"}
    if more:
        arg["willContinue"] = True
    return arg


def arguments_of(chunks: list[ChunkResponse], index: int = 0) -> str:
    return "".join(
        delta.arguments_delta or ""
        for chunk in chunks
        for delta in chunk.tool_calls or []
        if delta.index == index
    )


# --------------------------------------------------------------------------------------------------
# Text, reasoning, signatures


def test_text_and_thought_parts() -> None:
    chunks = convert(
        [
            chunk({"text": "Thinking...", "thought": True}),
            chunk({"text": "Hello", "thoughtSignature": "sig1"}, {"text": " world"}),
            chunk({"text": ""}, finish="STOP"),
        ]
    )
    assert chunks == [
        ChunkResponse(reasoning="Thinking..."),
        ChunkResponse(content="Hello world", content_signature="sig1"),
        ChunkResponse(finish_reason="stop", is_complete=True, metadata={"stop_reason": "STOP"}),
    ]


def test_a_signature_on_a_thought_part_follows_its_text() -> None:
    assert convert([chunk({"text": "hmm", "thought": True, "thoughtSignature": "s"}, {"text": "ok"})]) == [
        ChunkResponse(reasoning="hmm", reasoning_signature="s", content="ok")
    ]


def test_parts_out_of_reading_order_are_split_into_several_chunks() -> None:
    chunks = convert(
        [
            chunk(
                {"text": "a"},
                {"text": "b", "thought": True},
                {"text": "", "thoughtSignature": "s1"},
                {"text": "", "thoughtSignature": "s2"},
                call(name="f", args={}),
                {"text": "c"},
            )
        ]
    )
    assert chunks == [
        ChunkResponse(content="a"),
        ChunkResponse(reasoning="b", content_signature="s1"),
        ChunkResponse(
            content_signature="s2", tool_calls=[ToolCallDelta(0, "gen_0", "f", "{}", finished=True)]
        ),
        ChunkResponse(content="c"),
    ]


def test_media_parts_become_urls() -> None:
    chunks = convert(
        [
            chunk(
                {"inlineData": {"mimeType": "image/png", "data": "iVBOR"}},
                {"fileData": {"mimeType": "video/mp4", "fileUri": "gs://b/v.mp4"}},
                {"inlineData": {"mimeType": "audio/wav", "data": "UklG"}},
            )
        ]
    )
    assert chunks == [
        ChunkResponse(
            image_urls=["data:image/png;base64,iVBOR"],
            video_urls=["gs://b/v.mp4"],
            audio_urls=["data:audio/wav;base64,UklG"],
        )
    ]


def test_usage_comes_with_the_end_and_metadata_when_it_changes() -> None:
    """Gemini repeats the usage, its running counts growing, on every chunk: like OpenAI's, it is given
    once, with the chunk that ends the response (the latest usage that has counts)."""
    usage_metadata = {
        "promptTokenCount": 100,
        "candidatesTokenCount": 20,
        "thoughtsTokenCount": 30,
        "cachedContentTokenCount": 40,
        "totalTokenCount": 150,
    }
    fields: dict[str, Any] = {
        "usageMetadata": usage_metadata,
        "modelVersion": "gemini-3-pro",
        "responseId": "r1",
    }
    chunks = convert(
        [
            chunk({"text": "a"}, **fields),
            chunk({"text": "b"}, **fields),
            chunk(
                {"text": "c"},
                usageMetadata={**usage_metadata, "candidatesTokenCount": 25, "totalTokenCount": 155},
            ),
            chunk(finish="STOP", usageMetadata={"trafficType": "ON_DEMAND"}),
        ]
    )
    assert chunks == [
        ChunkResponse(content="a", metadata={"id": "r1", "model": "gemini-3-pro"}),
        ChunkResponse(content="b"),
        ChunkResponse(content="c"),
        ChunkResponse(
            usage=TokenUsage(
                prompt_tokens=100,
                completion_tokens=55,
                total_tokens=155,
                cached_tokens=40,
                reasoning_tokens=30,
            ),
            finish_reason="stop",
            is_complete=True,
            metadata={"stop_reason": "STOP"},
        ),
    ]


def test_usage_of_a_response_without_an_end_comes_when_the_input_ends() -> None:
    usage = {"promptTokenCount": 7, "candidatesTokenCount": 3, "totalTokenCount": 10}
    converter = GeminiConverter()
    assert converter.feed(chunk({"text": "a"}, usageMetadata=usage)) == [ChunkResponse(content="a")]
    assert converter.finish() == [
        ChunkResponse(usage=TokenUsage(prompt_tokens=7, completion_tokens=3, total_tokens=10))
    ]


def test_usage_that_changes_after_the_end_is_given_once_more() -> None:
    usage = {"promptTokenCount": 7, "candidatesTokenCount": 3, "totalTokenCount": 10}
    later = {**usage, "candidatesTokenCount": 4, "totalTokenCount": 11}
    chunks = convert(
        [
            chunk({"text": "a"}, finish="STOP", usageMetadata=usage),
            {"usageMetadata": usage},
            {"usageMetadata": later},
        ]
    )
    assert chunks == [
        ChunkResponse(
            content="a",
            usage=TokenUsage(prompt_tokens=7, completion_tokens=3, total_tokens=10),
            finish_reason="stop",
            is_complete=True,
            metadata={"stop_reason": "STOP"},
        ),
        ChunkResponse(usage=TokenUsage(prompt_tokens=7, completion_tokens=4, total_tokens=11)),
    ]


@pytest.mark.anyio
async def test_response_end_has_the_usage_of_a_stream_cut_short() -> None:
    usage = {"promptTokenCount": 7, "candidatesTokenCount": 3, "totalTokenCount": 10}
    body = b"data: " + json.dumps(chunk({"text": "a"}, usageMetadata=usage)).encode() + b"\r\n\r\n"
    events = await collect(process(body, provider="gemini"))
    end = events[-1]
    assert isinstance(end, ResponseEnd)
    assert end.finish_reason is None
    assert end.usage == TokenUsage(prompt_tokens=7, completion_tokens=3, total_tokens=10)


def test_total_is_the_sum_when_the_provider_gives_none() -> None:
    usage = {"promptTokenCount": 7, "candidatesTokenCount": 3}
    assert convert([{"usageMetadata": usage}]) == [
        ChunkResponse(usage=TokenUsage(prompt_tokens=7, completion_tokens=3, total_tokens=10))
    ]


@pytest.mark.parametrize(
    ("finish", "made_call", "normalised"),
    [
        ("STOP", False, "stop"),
        ("STOP", True, "tool_calls"),
        ("MAX_TOKENS", True, "length"),
        ("SAFETY", False, "content_filter"),
        ("RECITATION", False, "content_filter"),
        ("BLOCKLIST", False, "content_filter"),
        ("PROHIBITED_CONTENT", False, "content_filter"),
        ("SPII", False, "content_filter"),
        ("IMAGE_SAFETY", False, "content_filter"),
        ("MALFORMED_FUNCTION_CALL", False, "malformed_function_call"),
        ("OTHER", False, "other"),
    ],
)
def test_finish_reasons_are_normalised(finish: str, made_call: bool, normalised: str) -> None:
    assert normalize_gemini_finish_reason(finish, made_function_call=made_call) == normalised
    parts = [call(name="f", args={})] if made_call else []
    chunks = convert([chunk(*parts), chunk(finish=finish)])
    assert chunks[-1] == ChunkResponse(
        finish_reason=normalised, is_complete=True, metadata={"stop_reason": finish}
    )


def test_finish_message_goes_to_metadata() -> None:
    event = {"candidates": [{"finishReason": "STOP", "finishMessage": "Model generated function call(s)."}]}
    assert convert([event]) == [
        ChunkResponse(
            finish_reason="stop",
            is_complete=True,
            metadata={"stop_reason": "STOP", "finish_message": "Model generated function call(s)."},
        )
    ]


def test_a_blocked_prompt_ends_the_response_as_content_filter() -> None:
    event = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "responseId": "r9"}
    assert convert([event]) == [
        ChunkResponse(
            finish_reason="content_filter",
            is_complete=True,
            metadata={"id": "r9", "stop_reason": "PROHIBITED_CONTENT"},
        )
    ]


def test_only_candidate_zero_is_converted() -> None:
    event = {
        "candidates": [
            {"index": 1, "content": {"parts": [{"text": "other"}]}},
            {"index": 0, "content": {"parts": [{"text": "mine"}]}},
        ]
    }
    assert convert([event]) == [ChunkResponse(content="mine")]


def test_an_error_object_raises_a_provider_error() -> None:
    converter = GeminiConverter()
    assert converter.feed(chunk({"text": "a"})) == [ChunkResponse(content="a")]
    error = {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}
    with pytest.raises(ProviderError) as caught:
        converter.feed(error)
    assert str(caught.value) == "event 1: provider error (RESOURCE_EXHAUSTED): Resource exhausted"
    assert (caught.value.kind, caught.value.status, caught.value.payload) == (
        "RESOURCE_EXHAUSTED",
        429,
        error,
    )


# --------------------------------------------------------------------------------------------------
# Whole function calls


def test_whole_function_calls_in_one_chunk_and_across_chunks() -> None:
    chunks = convert(
        [
            chunk(
                call(name="add", args={"a": 2, "b": 3}),
                {"thoughtSignature": "sig", **call(name="mul", args={"a": 2}, id="fc_1")},
            ),
            chunk(call(name="noop"), finish="STOP"),
        ]
    )
    assert chunks == [
        ChunkResponse(
            tool_calls=[
                ToolCallDelta(0, "gen_0", "add", '{"a":2,"b":3}', finished=True),
                ToolCallDelta(1, "fc_1", "mul", '{"a":2}', finished=True, signature="sig"),
            ]
        ),
        ChunkResponse(
            tool_calls=[ToolCallDelta(2, "gen_2", "noop", "{}", finished=True)],
            finish_reason="tool_calls",
            is_complete=True,
            metadata={"stop_reason": "STOP"},
        ),
    ]


def test_whole_arguments_keep_unicode_and_escapes() -> None:
    args = {"text": 'say "hi"\n\\ é 🎉', "nested": {"list": [1, 2.5, None, True]}}
    (response,) = convert([chunk(call(name="f", args=args))])
    assert response.tool_calls is not None
    assert json.loads(response.tool_calls[0].arguments_delta or "") == args


# --------------------------------------------------------------------------------------------------
# Streamed arguments (partialArgs)


def test_streamed_call_as_recorded() -> None:
    chunks = convert(
        [
            chunk({"thoughtSignature": "s", **call(name="getWeather", willContinue=True)}),
            chunk(call(partialArgs=[partial("$.location", "Bos", more=True)], willContinue=True)),
            chunk(call(partialArgs=[partial("$.location", "ton", more=True)], willContinue=True)),
            chunk(call(partialArgs=[partial("$.location", "")], willContinue=True)),
            chunk(call(willContinue=True)),
            chunk(call()),
            chunk(call(name="getWeather", willContinue=True)),
            chunk(call(partialArgs=[partial("$.days", 3, kind="numberValue")], willContinue=True)),
            chunk(call(), finish="STOP"),
        ]
    )
    assert chunks == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "gen_0", "getWeather", "{", signature="s")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='"location":"Bos')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="ton")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='"')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="}", finished=True)]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, "gen_1", "getWeather", "{")]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, arguments_delta='"days":3')]),
        ChunkResponse(
            tool_calls=[ToolCallDelta(1, arguments_delta="}", finished=True)],
            finish_reason="tool_calls",
            is_complete=True,
            metadata={"stop_reason": "STOP"},
        ),
    ]


def test_nested_paths_open_and_close_containers_in_order() -> None:
    partial_args = [
        partial("$.recipe.ingredients[0].amount", "16 oz"),
        partial("$.recipe.ingredients[0].name", "Noodles"),
        partial("$.recipe.ingredients[1].amount", "1 lb"),
        partial("$.recipe.name", "Lasagna"),
        partial("$.recipe.steps[0]", "Preheat"),
        partial("$.recipe.steps[1]", "Bake"),
        partial("$.vegan", False, kind="boolValue"),
        partial("$.notes", kind="nullValue"),
        partial("$.matrix[0][0]", 1, kind="numberValue"),
        partial("$.matrix[0][1]", -2.5, kind="numberValue"),
        partial("$.matrix[1][0]", 0, kind="numberValue"),
        partial("$['odd key.[x]']['it\\'s']", "q"),
    ]
    chunks = convert(
        [
            chunk(call(name="cook", willContinue=True)),
            chunk(call(partialArgs=partial_args, willContinue=True)),
            chunk(call()),
        ]
    )
    assert arguments_of(chunks) == (
        '{"recipe":{"ingredients":[{"amount":"16 oz","name":"Noodles"},{"amount":"1 lb"}],"name":"Lasagna",'
        '"steps":["Preheat","Bake"]},"vegan":false,"notes":null,"matrix":[[1,-2.5],[0]],'
        '"odd key.[x]":{"it\'s":"q"}}'
    )
    assert chunks[-1].tool_calls == [ToolCallDelta(0, arguments_delta="}}", finished=True)]


def test_a_last_partial_args_part_without_will_continue_ends_the_call() -> None:
    chunks = convert(
        [
            chunk(call(name="writeItems", willContinue=True)),
            chunk(call(partialArgs=[partial("$.ops[0].price", 0.5, kind="numberValue")], willContinue=True)),
            chunk(call(partialArgs=[partial("$.ops[1].price", 0.3, kind="numberValue")])),
            chunk({"text": ""}, finish="STOP"),
        ]
    )
    assert chunks[2] == ChunkResponse(
        tool_calls=[ToolCallDelta(0, arguments_delta='},{"price":0.3}]}', finished=True)]
    )
    assert json.loads(arguments_of(chunks)) == {"ops": [{"price": 0.5}, {"price": 0.3}]}
    assert chunks[-1].finish_reason == "tool_calls"


def test_a_new_call_ends_the_open_one() -> None:
    chunks = convert(
        [
            chunk(call(name="a", willContinue=True, partialArgs=[partial("$.x", "1", more=True)])),
            chunk(call(name="b", args={"y": 2})),
        ]
    )
    assert chunks == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "gen_0", "a", '{"x":"1')]),
        ChunkResponse(
            tool_calls=[
                ToolCallDelta(0, arguments_delta='"}', finished=True),
                ToolCallDelta(1, "gen_1", "b", '{"y":2}', finished=True),
            ]
        ),
    ]


def test_a_streamed_call_still_open_at_the_end_is_left_unfinished() -> None:
    chunks = convert(
        [
            chunk(call(name="f", willContinue=True)),
            chunk(call(partialArgs=[partial("$.a", "text", more=True)], willContinue=True)),
            chunk(finish="MAX_TOKENS"),
        ]
    )
    assert arguments_of(chunks) == '{"a":"text'
    assert not any(delta.finished for chunk in chunks for delta in chunk.tool_calls or [])
    assert chunks[-1].finish_reason == "length"


def test_a_stray_closing_part_gives_nothing() -> None:
    assert convert([chunk(call()), chunk(call(willContinue=True))]) == []


def test_string_pieces_are_json_escaped_and_split_surrogates_recombine() -> None:
    pieces = ['say "', "hi\\", "\n\t\x00", "é", "\ud83c", "\udf89", ""]
    partial_args = [partial("$.s", piece, more=True) for piece in pieces[:-1]] + [partial("$.s", "")]
    chunks = convert([chunk(call(name="f", partialArgs=partial_args))])
    assert json.loads(arguments_of(chunks)) == {"s": 'say "hi\\\n\t\x00é🎉'}


def test_args_and_partial_args_together() -> None:
    chunks = convert(
        [
            chunk(call(name="f", args={"a": 1}, willContinue=True)),
            chunk(call(partialArgs=[partial("$.b", "x")])),
        ]
    )
    assert arguments_of(chunks) == '{"a":1,"b":"x"}'


@pytest.mark.parametrize(
    ("paths", "problem"),
    [
        (["$.a.x", "$.b", "$.a.y"], "goes back to key 'a'"),
        (["$.a", "$.a"], "goes back to key 'a'"),
        (["$.list[1]"], "index 1 where index 0 comes next"),
        (["$.list[0]", "$.list.key"], "names key 'key' inside an array"),
        (["$.obj.k", "$.obj[0]"], "index 0 inside an object"),
        (["$"], "root"),
    ],
)
def test_paths_that_cannot_be_written_in_order_raise(paths: list[str], problem: str) -> None:
    converter = GeminiConverter()
    converter.feed(chunk(call(name="f", willContinue=True)))
    partial_args = [partial(path, "v") for path in paths]
    with pytest.raises(ConverterError, match=problem) as caught:
        converter.feed(chunk(call(partialArgs=partial_args, willContinue=True)))
    assert caught.value.event_number == 1
    assert "candidates[0].content.parts[0].functionCall" in str(caught.value)


PART = "candidates[0].content.parts[0]"


@pytest.mark.parametrize(
    ("event", "message"),
    [
        # what the schema refuses, in the wording of every converter's decode
        ([1, 2], "event 1: the event should be an object, got list"),
        ({"candidates": {"a": 1}}, "event 1: field 'candidates': Expected `array | null`, got `object`"),
        (chunk({"text": 5}), f"event 1: field '{PART}.text': Expected `str | null`, got `int`"),
        (
            chunk(call(name="f", args=[1])),
            f"event 1: field '{PART}.functionCall.args': Expected `object | null`, got `array`",
        ),
        (
            {"usageMetadata": {"promptTokenCount": "9"}},
            "event 1: field 'usageMetadata.promptTokenCount': Expected `int | null`, got `str`",
        ),
        # what the converter refuses
        (
            chunk(call(name="f", partialArgs=[{"jsonPath": "$.a"}])),
            f"Gemini chunk 1: {PART}.functionCall.partialArgs[0] has no stringValue",
        ),
        (
            chunk(call(name="f", partialArgs=[{"stringValue": "x"}])),
            f"Gemini chunk 1: {PART}.functionCall.partialArgs[0].jsonPath is missing",
        ),
        (
            chunk(call(name="f", partialArgs=[partial("a.b", "x")])),
            f"Gemini chunk 1: {PART}.functionCall.partialArgs[0].jsonPath JSON path 'a.b' does not start",
        ),
        (
            chunk(call(name="f", partialArgs=[partial("$.n", "1", kind="numberValue")])),
            f"Gemini chunk 1: {PART}.functionCall.partialArgs[0] has a value of the wrong type: '1'",
        ),
        (
            chunk(call(partialArgs=[partial("$.a", "x")])),
            f"Gemini chunk 1: {PART}.functionCall has arguments but no name, and no streamed call is open",
        ),
    ],
)
def test_malformed_chunks_raise_converter_errors_naming_event_and_field(event: Any, message: str) -> None:
    converter = GeminiConverter()
    converter.feed(chunk({"text": "a"}))
    with pytest.raises(ConverterError) as caught:
        converter.feed(event)
    assert caught.value.event_number == 1
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("$.a", ("a",)),
        ("$.recipe.ingredients[10].name", ("recipe", "ingredients", 10, "name")),
        ("$['a.b']", ("a.b",)),
        ('$["x\\"y"][0]', ('x"y', 0)),
        ("$['it\\'s']", ("it's",)),
        ("$.été", ("été",)),
    ],
)
def test_json_paths(text: str, path: tuple[str | int, ...]) -> None:
    assert parse_json_path(text) == path


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a", "does not start"),
        ("$.", "empty name"),
        ("$[x]", "bad selector"),
        ("$[0", "unclosed"),
        ("$a", "unexpected"),
    ],
)
def test_bad_json_paths(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_json_path(text)


def test_writer_close_is_idempotent_and_nothing_can_be_written_after() -> None:
    writer = PartialArgsWriter()
    text = writer.start() + writer.write(("a", 0), "x", will_continue=True) + writer.close()
    assert text == '{"a":["x"]}'
    assert writer.close() == ""
    with pytest.raises(ValueError, match="already closed"):
        writer.write(("b",), 1)


# --------------------------------------------------------------------------------------------------
# Property: any document-order stream of partialArgs is written as JSON text of the same object

KEYS = st.text(min_size=1, max_size=6)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**9), max_value=10**9)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, min_size=1, max_size=3) | st.dictionaries(KEYS, children, min_size=1, max_size=3)
    ),
    max_leaves=12,
)
OBJECTS = st.dictionaries(KEYS, VALUES, max_size=4)


def path_text(path: tuple[str | int, ...]) -> str:
    steps = ["$"]
    for key in path:
        if isinstance(key, int):
            steps.append(f"[{key}]")
        elif key.isidentifier():
            steps.append(f".{key}")
        else:
            steps.append("['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']")
    return "".join(steps)


def leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterable[tuple[tuple[str | int, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield from leaves(item, (*path, number))
    else:
        yield path, value


def partial_args_of(value: dict[str, Any], data: st.DataObject) -> list[dict[str, Any]]:
    """The partialArgs a server could send for ``value``: document order, strings in random pieces."""
    partial_args: list[dict[str, Any]] = []
    for path, leaf in leaves(value):
        json_path = path_text(path)
        if isinstance(leaf, str):
            cuts = sorted(data.draw(st.lists(st.integers(0, len(leaf)), max_size=3)))
            pieces = [leaf[start:end] for start, end in zip([0, *cuts], [*cuts, len(leaf)], strict=True)]
            if data.draw(st.booleans()):
                pieces.append("")
            partial_args.extend(partial(json_path, piece, more=True) for piece in pieces[:-1])
            partial_args.append(partial(json_path, pieces[-1]))
        elif leaf is None:
            partial_args.append(partial(json_path, kind="nullValue"))
        elif isinstance(leaf, bool):
            partial_args.append(partial(json_path, leaf, kind="boolValue"))
        else:
            partial_args.append(partial(json_path, leaf, kind="numberValue"))
    return partial_args


@given(value=OBJECTS, data=st.data())
def test_streamed_partial_args_always_give_json_of_the_described_object(
    value: dict[str, Any], data: st.DataObject
) -> None:
    partial_args = partial_args_of(value, data)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(partial_args)), max_size=4)))
    groups = [
        partial_args[start:end] for start, end in zip([0, *cuts], [*cuts, len(partial_args)], strict=True)
    ]
    explicit_end = data.draw(st.booleans())
    events = [chunk(call(name="f", willContinue=True))]
    for number, group in enumerate(groups):
        last = number == len(groups) - 1 and not explicit_end
        events.append(chunk(call(partialArgs=group) if last else call(partialArgs=group, willContinue=True)))
    if explicit_end:
        events.append(chunk(call()))
    chunks = convert(events)
    assert json.loads(arguments_of(chunks)) == value
    deltas = [delta for chunk in chunks for delta in chunk.tool_calls or []]
    assert [delta.finished for delta in deltas] == [False] * (len(deltas) - 1) + [True]


# --------------------------------------------------------------------------------------------------
# The Interactions API


def test_interactions_api_events() -> None:
    events = [
        {"event_type": "interaction.created", "interaction": {"id": "i1", "model": "gemini-2.5-flash"}},
        {"event_type": "interaction.status_update", "status": "in_progress"},
        {"event_type": "step.start", "index": 0, "step": {"type": "thought"}},
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "thought_summary", "content": {"text": "Hm"}},
        },
        {"event_type": "step.delta", "index": 0, "delta": {"type": "thought_signature", "signature": "sig"}},
        {"event_type": "step.stop", "index": 0},
        {"event_type": "step.start", "index": 1, "step": {"type": "text", "text": ""}},
        {"event_type": "step.delta", "index": 1, "delta": {"type": "text", "text": "Checking."}},
        {"event_type": "step.stop", "index": 1},
        {
            "event_type": "step.start",
            "index": 2,
            "step": {"type": "function_call", "name": "f", "arguments": {}},
        },
        {"event_type": "step.delta", "index": 2, "delta": {"type": "arguments_delta", "arguments": '{"a":'}},
        {"event_type": "step.delta", "index": 2, "delta": {"type": "arguments_delta", "arguments": "1}"}},
        {"event_type": "step.stop", "index": 2},
        {
            "event_type": "step.start",
            "index": 3,
            "step": {
                "type": "function_call",
                "id": "c9",
                "name": "g",
                "arguments": {"b": [2]},
                "signature": "s2",
            },
        },
        {"event_type": "step.stop", "index": 3},
        {"event_type": "brand.new", "index": 4},
        {
            "event_type": "interaction.completed",
            "interaction": {
                "id": "i1",
                "status": "requires_action",
                "usage": {
                    "total_input_tokens": 53,
                    "total_output_tokens": 15,
                    "total_thought_tokens": 65,
                    "total_cached_tokens": 0,
                    "total_tokens": 133,
                },
            },
        },
    ]
    assert convert(events) == [
        ChunkResponse(metadata={"id": "i1", "model": "gemini-2.5-flash"}),
        ChunkResponse(reasoning="Hm"),
        ChunkResponse(reasoning_signature="sig"),
        ChunkResponse(content="Checking."),
        ChunkResponse(tool_calls=[ToolCallDelta(0, "gen_0", "f")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='{"a":')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="1}")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, finished=True)]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, "c9", "g", signature="s2")]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, arguments_delta='{"b":[2]}', finished=True)]),
        ChunkResponse(
            usage=TokenUsage(
                prompt_tokens=53, completion_tokens=80, total_tokens=133, cached_tokens=0, reasoning_tokens=65
            ),
            finish_reason="tool_calls",
            is_complete=True,
            metadata={"stop_reason": "requires_action"},
        ),
    ]


def test_interactions_api_error_and_status() -> None:
    converter = GeminiConverter()
    done = {"event_type": "interaction.completed", "interaction": {"status": "completed"}}
    assert converter.feed(done) == [
        ChunkResponse(finish_reason="stop", is_complete=True, metadata={"stop_reason": "completed"})
    ]
    with pytest.raises(ProviderError, match="quota"):
        converter.feed({"event_type": "error", "error": {"message": "quota", "code": 429}})


# --------------------------------------------------------------------------------------------------
# Every recording against a deliberately naive reference


def place(root: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    """Set ``value`` at ``path``, making containers on the way; a string at a string is extended."""
    container: Any = root
    for key, following in itertools.pairwise(path):
        if isinstance(key, int):
            if key == len(container):
                container.append([] if isinstance(following, int) else {})
        elif key not in container:
            container[key] = [] if isinstance(following, int) else {}
        container = container[key]
    last = path[-1]
    if isinstance(last, int) and last == len(container):
        container.append(value)
    elif isinstance(value, str) and isinstance(
        container[last] if isinstance(last, int) else container.get(last), str
    ):
        container[last] += value
    else:
        container[last] = value


def generate_content_reference(events: list[dict[str, Any]]) -> dict[str, Any]:
    text: list[str] = []
    reasoning: list[str] = []
    signatures: list[str] = []
    text_signatures: list[str] = []
    calls: list[dict[str, Any]] = []
    open_call: dict[str, Any] | None = None
    usage = finish = response_id = None
    for event in events:
        response_id = response_id or event.get("responseId")
        raw = event.get("usageMetadata", {})
        if "promptTokenCount" in raw:
            thoughts = raw.get("thoughtsTokenCount")
            usage = {
                "prompt_tokens": raw["promptTokenCount"],
                "completion_tokens": raw.get("candidatesTokenCount", 0) + (thoughts or 0),
                "total_tokens": raw["totalTokenCount"],
            }
            if thoughts is not None:
                usage["reasoning_tokens"] = thoughts
        candidate = event["candidates"][0]
        for part in candidate.get("content", {}).get("parts", []):
            function_call = part.get("functionCall")
            if function_call is None:
                (reasoning if part.get("thought") else text).append(part["text"])
                if "thoughtSignature" in part:
                    (signatures if part.get("thought") else text_signatures).append(part["thoughtSignature"])
                continue
            if "name" in function_call:
                open_call = {
                    "index": len(calls),
                    "id": function_call.get("id", f"gen_{len(calls)}"),
                    "name": function_call["name"],
                    "arguments": dict(function_call.get("args", {})),
                    "signature": part.get("thoughtSignature"),
                    "finished": False,
                }
                calls.append(open_call)
            assert open_call is not None
            for arg in function_call.get("partialArgs", []):
                value = next(arg[key] for key in ("stringValue", "numberValue", "boolValue") if key in arg)
                place(open_call["arguments"], parse_json_path(arg["jsonPath"]), value)
            if not function_call.get("willContinue"):
                open_call["finished"] = True
        finish = candidate.get("finishReason", finish)
    finish_words = {"STOP": "tool_calls" if calls else "stop"}
    return {
        "text": "".join(text),
        "reasoning": "".join(reasoning),
        "signatures": signatures,
        "text_signatures": text_signatures,
        "calls": calls,
        "finish_reason": finish_words[finish] if finish else None,
        "usage": usage,
        "id": response_id,
    }


def interactions_reference(events: list[dict[str, Any]]) -> dict[str, Any]:
    text: list[str] = []
    reasoning: list[str] = []
    signatures: list[str] = []
    calls: list[dict[str, Any]] = []
    by_step: dict[int, dict[str, Any]] = {}
    usage = finish = interaction_id = None
    for event in events:
        kind = event["event_type"]
        if kind == "interaction.created":
            interaction_id = event["interaction"]["id"]
        elif kind == "step.start" and event["step"]["type"] == "function_call":
            step = event["step"]
            by_step[event["index"]] = {
                "index": len(calls),
                "id": step["id"],
                "name": step["name"],
                "arguments": "",
                "signature": step.get("signature") or None,
                "finished": False,
            }
            calls.append(by_step[event["index"]])
        elif kind == "step.delta":
            delta = event["delta"]
            if delta["type"] == "text":
                text.append(delta["text"])
            elif delta["type"] == "thought_signature":
                signatures.append(delta["signature"])
            elif delta["type"] == "arguments_delta":
                by_step[event["index"]]["arguments"] += delta["arguments"]
        elif kind == "step.stop" and event["index"] in by_step:
            by_step[event["index"]]["finished"] = True
        elif kind == "interaction.completed":
            raw = event["interaction"]["usage"]
            usage = {
                "prompt_tokens": raw["total_input_tokens"],
                "completion_tokens": raw["total_output_tokens"] + raw["total_thought_tokens"],
                "total_tokens": raw["total_tokens"],
                "cached_tokens": raw["total_cached_tokens"],
                "reasoning_tokens": raw["total_thought_tokens"],
            }
            finish = "tool_calls" if calls else "stop"
    for found in calls:
        found["arguments"] = json.loads(found["arguments"])
    return {
        "text": "".join(text),
        "reasoning": "".join(reasoning),
        "signatures": signatures,
        "text_signatures": [],
        "calls": calls,
        "finish_reason": finish,
        "usage": usage,
        "id": interaction_id,
    }


def summary(chunks: list[ChunkResponse]) -> dict[str, Any]:
    folded = fold_calls(chunks)
    assert all(call.kind == "function" for call in folded)
    calls = [
        {
            "index": call.index,
            "id": call.call_id,
            "name": call.name,
            "arguments": json.loads(call.arguments),
            "signature": call.signature,
            "finished": call.finished,
        }
        for call in folded
    ]
    usages = [response.usage.to_dict() for response in chunks if response.usage is not None]
    ids = [response.metadata["id"] for response in chunks if response.metadata and "id" in response.metadata]
    return {
        "text": "".join(response.content for response in chunks),
        "reasoning": "".join(response.reasoning or "" for response in chunks),
        "signatures": [response.reasoning_signature for response in chunks if response.reasoning_signature],
        "text_signatures": [response.content_signature for response in chunks if response.content_signature],
        "calls": calls,
        "finish_reason": chunks[-1].finish_reason,
        "usage": usages[-1] if usages else None,
        "id": ids[0] if ids else None,
    }


@pytest.mark.parametrize("path", RECORDINGS, ids=[path.name for path in RECORDINGS])
def test_recording_matches_the_naive_reference(path: Path) -> None:
    events = load_events(path)
    chunks = convert(events)
    if "event_type" in events[0]:
        expected = interactions_reference(events)
    else:
        expected = generate_content_reference(events)
    assert summary(chunks) == expected
    assert [response.is_complete for response in chunks] == [False] * (len(chunks) - 1) + [True]


def test_the_recording_without_a_terminal_call_finishes_its_call_from_the_last_partial_args() -> None:
    chunks = convert(
        load_events(FIXTURES / "vercel_gemini-3-flash_streamed_array_args_no_terminal_call.jsonl")
    )
    deltas = [delta for response in chunks for delta in response.tool_calls or []]
    assert deltas[-1] == ToolCallDelta(0, arguments_delta=',"price":0.3}]}', finished=True)


# --------------------------------------------------------------------------------------------------
# The operator


@pytest.mark.anyio
async def test_operator_gives_what_the_core_gives() -> None:
    events = load_events(FIXTURES / "vercel_gemini-3.1-pro_vertex_streamed_nested_args.jsonl")
    async with (stream.iterate(events) | convert_gemini.pipe(id_factory=sequential_ids)).stream() as chunks:
        received = [response async for response in chunks]
    assert received == convert(events)


SIGNED_CALLS = [
    "fantasy_gemini-3.1-pro_function_call_id_signature_thinking.sse",
    "fantasy_gemini-3.1-pro_parallel_function_calls_with_ids.sse",
    "fantasy_gemini-2.5-pro_2_parallel_function_calls_two_chunks.sse",
]


@pytest.mark.anyio
@pytest.mark.parametrize("recording", SIGNED_CALLS)
async def test_a_signed_call_gives_its_invocation_the_signature(recording: str) -> None:
    """``ToolInvocation.signature`` is the ``thoughtSignature`` of the call's own part (the first of
    parallel calls carries it, the others none), read on the invocation itself, for the next turn."""
    path = FIXTURES / recording
    parts = [
        part
        for _, payload in read_payloads(path)
        for candidate in payload.get("candidates", [])
        for part in candidate.get("content", {}).get("parts", [])
        if "functionCall" in part
    ]
    expected = [
        (call.get("id", f"call_{index}"), call["name"], part.get("thoughtSignature"))
        for index, (part, call) in enumerate((part, part["functionCall"]) for part in parts)
    ]
    assert expected[0][2] is not None
    events = await collect(process(path.read_bytes(), id_factory=sequential_call_ids))
    invocations = [event for event in events if isinstance(event, ToolInvocation)]
    assert [(call.id, call.name, call.signature) for call in invocations] == expected

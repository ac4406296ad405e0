"""Structured output streamed: content JSON through the argument parser, partial pydantic snapshots."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, field_validator

from operators.arguments._jsonstream import JSONStreamParser
from operators.arguments.structured import ContentJSONParser, parse_content_json
from pipeline.agent.structured import (
    StructuredOutput,
    StructuredOutputError,
    StructuredUpdate,
    stream_structured,
)
from pipeline.compose import process, to_chunks
from pipeline.models import ArgumentDelta, ArgumentError, ArgumentValue, ChunkResponse
from pipeline.testing import collect


async def _until_error(source: AsyncIterator[Any]) -> tuple[list[Any], StructuredOutputError]:
    """The items of ``source``, then the error it ended with."""
    items: list[Any] = []
    try:
        async for item in source:
            items.append(item)
    except StructuredOutputError as failure:
        return items, failure
    raise AssertionError("no StructuredOutputError")


class Step(BaseModel):
    text: str
    minutes: int = Field(ge=0)


class Recipe(BaseModel):
    title: str
    servings: int = Field(ge=1)
    tags: list[str] = []
    steps: list[Step]
    note: str | None = None

    @field_validator("title")
    @classmethod
    def strip_title(cls, value: str) -> str:
        return value.strip()


RECIPE: dict[str, Any] = {
    "title": " Pancakes ",
    "servings": 4,
    "tags": ["breakfast", "sweet"],
    "steps": [{"text": 'Whisk the eggs \u00e9 "well"', "minutes": 2}, {"text": "Fry", "minutes": 5}],
    "note": None,
}
TEXT = json.dumps(RECIPE, ensure_ascii=False, indent=1)


def openai_chunks(text: str, size: int = 4) -> list[dict[str, Any]]:
    """An OpenAI Chat stream in JSON mode: the JSON as content deltas of ``size`` characters."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    for start in range(0, len(text), size):
        delta = {"content": text[start : start + size]}
        chunks.append({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return chunks


def run(pieces: list[str]) -> list[StructuredUpdate[Recipe]]:
    core = StructuredOutput(Recipe)
    updates: list[StructuredUpdate[Recipe]] = []
    for piece in pieces:
        updates.extend(core.feed(piece))
    updates.extend(core.finish())
    return updates


def test_report_depth_reports_nested_values_inner_first() -> None:
    parser = JSONStreamParser(report_depth=3)
    values = [
        e for e in parser.feed('{"a": [1, {"b": "x"}], "c": {"d": [2]}}') if isinstance(e, ArgumentValue)
    ]
    assert [(e.path, e.value) for e in values] == [
        (("a", 0), 1),
        (("a", 1, "b"), "x"),
        (("a", 1), {"b": "x"}),
        (("a",), [1, {"b": "x"}]),
        (("c", "d", 0), 2),
        (("c", "d"), [2]),
        (("c",), {"d": [2]}),
        ((), {"a": [1, {"b": "x"}], "c": {"d": [2]}}),
    ]
    # The default is unchanged: the root object's members only (not a root array's elements).
    default = [e.path for e in JSONStreamParser().feed('[1, {"b": 2}]') if isinstance(e, ArgumentValue)]
    assert default == [()]


def test_field_complete_order() -> None:
    updates = run([TEXT])
    assert [name for update in updates for name in update.fields] == [
        "title",
        "servings",
        "tags",
        "steps",
        "note",
    ]
    completed = [path for update in updates for path in update.completed]
    assert completed == [
        ("title",),
        ("servings",),
        ("tags", 0),
        ("tags", 1),
        ("tags",),
        ("steps", 0, "text"),
        ("steps", 0, "minutes"),
        ("steps", 0),
        ("steps", 1, "text"),
        ("steps", 1, "minutes"),
        ("steps", 1),
        ("steps",),
        ("note",),
    ]
    assert updates[-1].done
    assert updates[-1].value == Recipe.model_validate(RECIPE)
    assert updates[-1].value.title == "Pancakes"  # field validators run in the final validation


def test_partial_snapshots_hold_validated_fields_as_they_complete() -> None:
    text = json.dumps(RECIPE)
    cut = text.index('"tags"')
    core = StructuredOutput(Recipe)
    (update,) = core.feed(text[:cut])
    assert update.fields == ("title", "servings")
    assert update.partial.model_fields_set == {"title", "servings"}
    assert update.partial.servings == 4
    assert update.partial.tags == []  # a default until the field completes
    assert not update.done
    assert update.value is None
    (streaming,) = core.feed('"tags": ["brea')
    assert streaming.fields == ()
    assert streaming.partial is update.partial  # no field completed: the same snapshot, nothing rebuilt
    assert streaming.deltas == (ArgumentDelta(("tags", 0), "brea"),)


def test_deltas_concatenate_to_every_string() -> None:
    updates = run(list(TEXT))
    texts: dict[tuple[Any, ...], str] = {}
    for update in updates:
        for delta in update.deltas:
            texts[delta.path] = texts.get(delta.path, "") + delta.delta
    assert texts[("steps", 0, "text")] == RECIPE["steps"][0]["text"]
    assert texts[("title",)] == " Pancakes "


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, len(TEXT)), max_size=12))
def test_any_chunking_gives_the_same_updates_in_total(cuts: list[int]) -> None:
    bounds = sorted(set(cuts))
    pieces = [TEXT[a:b] for a, b in zip([0, *bounds], [*bounds, len(TEXT)], strict=True)]
    updates = run(pieces)
    whole = run([TEXT])
    assert [p for u in updates for p in u.completed] == [p for u in whole for p in u.completed]
    assert [f for u in updates for f in u.fields] == [f for u in whole for f in u.fields]
    assert updates[-1].value == whole[-1].value


def test_invalid_json_at_its_offset_after_the_updates_before() -> None:
    bad = '{"title": "x", "servings": 4, "tags": [1 2]}'
    core = StructuredOutput(Recipe)
    (first,) = core.feed(bad[:30])
    assert first.fields == ("title", "servings")
    with pytest.raises(StructuredOutputError) as failure:
        core.feed(bad[30:])
    assert failure.value.kind == "invalid_json"
    assert failure.value.offset == bad.index("2")
    assert "offset 41" in str(failure.value)


def test_a_field_failing_validation_is_reported_and_left_out() -> None:
    text = '{"title": "x", "servings": 0, "steps": []}'
    core = StructuredOutput(Recipe)
    (update,) = core.feed(text[:-12])
    assert update.fields == ("title",)
    assert [name for name, _ in update.errors] == ["servings"]
    assert "greater than or equal to 1" in str(update.errors[0][1])
    assert "servings" not in update.partial.model_fields_set
    with pytest.raises(StructuredOutputError, match="not a valid Recipe") as failure:
        core.feed(text[-12:])
    assert failure.value.kind == "validation"
    assert failure.value.validation_error is not None


def test_truncated_empty_and_too_large() -> None:
    core = StructuredOutput(Recipe)
    core.feed('{"title": "x"')
    with pytest.raises(StructuredOutputError, match="where ',' or '}' was expected") as failure:
        core.finish()
    assert failure.value.kind == "truncated"
    with pytest.raises(StructuredOutputError, match="no content") as empty:
        StructuredOutput(Recipe).finish()
    assert empty.value.kind == "empty"
    with pytest.raises(StructuredOutputError) as large:
        StructuredOutput(Recipe, max_size=10).feed('{"title": "a long title"}')
    assert large.value.kind == "too_large"


def test_a_code_fence_is_invalid_json_at_offset_zero() -> None:
    with pytest.raises(StructuredOutputError) as failure:
        StructuredOutput(Recipe).feed("```json\n{}")
    assert (failure.value.kind, failure.value.offset) == ("invalid_json", 0)


def test_aliases_map_to_field_names() -> None:
    class Aliased(BaseModel):
        full_name: str = Field(alias="fullName")

    core = StructuredOutput(Aliased)
    (update,) = core.feed('{"fullName": "Ada"')
    assert update.fields == ("full_name",)
    assert update.partial.full_name == "Ada"
    assert core.feed("}")[-1].value == Aliased(fullName="Ada")
    assert core.finish() == []


def test_content_parser_core_over_chunks() -> None:
    core = ContentJSONParser(field_depth=1)
    events = core.feed(ChunkResponse(content='{"a": [1], "b": "x'))
    assert events == [ArgumentValue(("a",), [1]), ArgumentDelta(("b",), "x")]
    assert core.feed(ChunkResponse(content='y"}', is_complete=True)) == [
        ArgumentDelta(("b",), "y"),
        ArgumentValue(("b",), "xy"),
        ArgumentValue((), {"a": [1], "b": "xy"}),
    ]
    # The next response starts afresh; one cut off is truncated at finish.
    assert core.feed(ChunkResponse(content="[1")) == []
    (error,) = core.finish()
    assert isinstance(error, ArgumentError)
    assert error.kind == "truncated"
    assert core.finish() == []


@pytest.mark.anyio
async def test_operator_over_recorded_shape_chunks() -> None:
    events = await collect(to_chunks(openai_chunks(TEXT), provider="openai") | parse_content_json.pipe())
    assert events[-1] == ArgumentValue((), RECIPE)


@pytest.mark.anyio
@pytest.mark.parametrize("via", ["chunks", "process", "strings"])
async def test_stream_structured_through_the_pipeline(via: str) -> None:
    source: Any
    if via == "chunks":
        source = to_chunks(openai_chunks(TEXT, 3), provider="openai")
    elif via == "process":
        source = process(openai_chunks(TEXT, 5), provider="openai")
    else:

        async def strings() -> AsyncIterator[str]:
            for start in range(0, len(TEXT), 7):
                yield TEXT[start : start + 7]

        source = strings()
    updates = [update async for update in stream_structured(source, Recipe)]
    assert [name for update in updates for name in update.fields] == [
        "title",
        "servings",
        "tags",
        "steps",
        "note",
    ]
    assert updates[-1].done
    assert updates[-1].value == Recipe.model_validate(RECIPE)


def test_what_a_failing_piece_completed_travels_on_the_error() -> None:
    core = StructuredOutput(Recipe)
    with pytest.raises(StructuredOutputError) as failure:
        core.feed('{"title": "x", "servings": 2, oops}')
    (update,) = failure.value.partial_outputs
    assert update.fields == ("title", "servings")


@pytest.mark.anyio
async def test_stream_structured_delivers_updates_before_the_error() -> None:
    text = '{"title": "x", "servings": 2, oops}'
    for size in (4, len(text)):
        source = to_chunks(openai_chunks(text, size), provider="openai")
        updates, failure = await _until_error(stream_structured(source, Recipe))
        assert [name for update in updates for name in update.fields] == ["title", "servings"], size
        assert failure.kind == "invalid_json"
        assert failure.offset == 30

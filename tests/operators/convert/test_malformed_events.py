"""Malformed events found by fuzzing the converters with mutated recordings: each one is a streamfold error
naming the event and the field (or nothing), never a raw ``TypeError`` or ``UnicodeDecodeError``."""

from __future__ import annotations

import pytest

from operators.adapter.sse import SSEPayloadDecoder
from operators.convert import AnthropicConverter, OpenAIChatConverter, OpenAIResponsesConverter
from pipeline.errors import ConverterError, StreamDecodeError
from pipeline.models import Payload


@pytest.mark.parametrize("name", [["sql"], {"n": "sql"}])
def test_a_custom_tool_call_whose_name_is_not_a_string_names_the_field(name: object) -> None:
    converter = OpenAIResponsesConverter()
    converter.feed(
        {"type": "response.created", "response": {"id": "r", "tools": [{"type": "custom", "name": "sql"}]}}
    )
    item = {"type": "custom_tool_call", "id": "ct", "call_id": "c", "name": name, "input": ""}
    with pytest.raises(ConverterError, match=r"^event 1 \(response.output_item.added\): field 'item.name'"):
        converter.feed({"type": "response.output_item.added", "output_index": 0, "item": item})


@pytest.mark.parametrize("kind", [[], {"a": 1}, 7])
def test_a_chat_event_without_choices_whose_type_is_not_a_string_gives_nothing(kind: object) -> None:
    assert OpenAIChatConverter().feed({"type": kind}) == []


@pytest.mark.parametrize("make", [AnthropicConverter, OpenAIResponsesConverter])
def test_a_field_of_the_wrong_type_beside_invalid_utf8_names_the_bytes(make: type) -> None:
    """What a framer reading line by line would have refused first, whatever else is wrong."""
    with pytest.raises(StreamDecodeError, match=r"^invalid UTF-8 at byte 118 of the stream"):
        make().feed(Payload(b'{"type": 1, "x": "\xff"}', 100))


def test_a_bytearray_read_whose_data_is_not_json_names_the_event() -> None:
    with pytest.raises(StreamDecodeError, match=r"^event 0 \(byte 6\) has data that is not valid JSON"):
        SSEPayloadDecoder().feed(bytearray(b"data: " + b"x" * 100 + b"\n\n"))

"""One builder per error class, one wording per condition: every in-band provider error reads
``{where}: provider error ({kind}): {message}``, whichever converter or decoder met it."""

from __future__ import annotations

from typing import Any

import pytest

from operators.convert.anthropic import AnthropicConverter
from operators.convert.gemini import GeminiConverter
from operators.convert.openai_chat import OpenAIChatConverter
from operators.convert.openai_responses import OpenAIResponsesConverter
from pipeline.errors import ConverterError, ProviderError
from pipeline.stage import Core


def test_from_payload_names_where_kind_and_message() -> None:
    payload = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "slow down"}}
    error = ProviderError.from_payload(payload["error"], payload, "event 4")
    assert str(error) == "event 4: provider error (RESOURCE_EXHAUSTED): slow down"
    assert (error.kind, error.status, error.payload) == ("RESOURCE_EXHAUSTED", 429, payload)


def test_from_payload_without_a_kind_or_message() -> None:
    error = ProviderError.from_payload({}, {"error": {}}, "event 0")
    assert str(error) == "event 0: provider error: the provider reported an error"
    assert (error.kind, error.status) == (None, None)


FIRST_EVENTS: dict[str, dict[str, Any]] = {
    "anthropic": {"type": "message_start", "message": {"id": "msg_1", "model": "m", "usage": {}}},
    "openai": {"object": "chat.completion.chunk", "choices": []},
    "gemini": {"candidates": []},
    "openai-responses": {"type": "response.in_progress", "sequence_number": 0, "response": {}},
}
ERRORS: list[tuple[str, Core[Any, Any], dict[str, Any]]] = [
    (
        "anthropic",
        AnthropicConverter(),
        {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
    ),
    ("openai", OpenAIChatConverter(), {"error": {"type": "overloaded_error", "message": "busy"}}),
    ("gemini", GeminiConverter(), {"error": {"code": 503, "status": "overloaded_error", "message": "busy"}}),
    (
        "openai-responses",
        OpenAIResponsesConverter(),
        {"type": "error", "code": "overloaded_error", "message": "busy", "sequence_number": 1},
    ),
]


@pytest.mark.parametrize(("name", "core", "event"), ERRORS, ids=[name for name, _, _ in ERRORS])
def test_every_converter_words_an_in_band_error_the_same(
    name: str, core: Core[Any, Any], event: dict[str, Any]
) -> None:
    core.feed(FIRST_EVENTS[name])
    with pytest.raises(ProviderError) as caught:
        core.feed(event)
    assert str(caught.value) == "event 1: provider error (overloaded_error): busy"
    assert caught.value.kind == "overloaded_error"
    assert caught.value.payload == event


def test_a_mistyped_field_has_one_wording_in_every_converter() -> None:
    from operators.convert.cohere import CohereConverter

    anthropic = AnthropicConverter()
    anthropic.feed({"type": "ping"})
    with pytest.raises(ConverterError) as from_anthropic:
        anthropic.feed(
            {"type": "content_block_delta", "index": "0", "delta": {"type": "text_delta", "text": "x"}}
        )
    assert str(from_anthropic.value) == (
        "event 1 (content_block_delta): field 'index': Expected `int`, got `str`"
    )
    chat = OpenAIChatConverter()
    with pytest.raises(ConverterError) as from_chat:
        chat.feed({"object": "chat.completion.chunk", "choices": "no"})
    assert str(from_chat.value) == "event 0: field 'choices': Expected `array | null`, got `str`"
    cohere = CohereConverter()
    with pytest.raises(ConverterError) as from_cohere:
        cohere.feed({"type": "message-start", "id": 7})
    assert str(from_cohere.value) == "event 0: field 'id': Expected `str | null`, got `int`"

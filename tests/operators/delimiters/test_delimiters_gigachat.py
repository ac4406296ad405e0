"""GigaChat 3 / 3.1 function calls."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant

RAW = FIXTURES / "raw_model_output"
CALL = Call(0, "call_0", "manage_user_memory", '{"action": "create", "id": "preferences"}')


@pytest.mark.parametrize(
    "name", ["vllm-test_gigachat3_mixed_content_eos.txt", "vllm-test_gigachat31_mixed_content.txt"]
)
def test_fixture_text_then_call(name: str) -> None:
    result = assert_chunking_invariant("gigachat3", (RAW / name).read_text())
    assert (result.content, result.calls) == ("I'll check that for you.", [CALL])


@pytest.mark.parametrize(
    "prose", ["Done.<|message_sep|>\n\n", "Done.<|message_sep|>\n\nuser<|role_sep|>\nhi"]
)
def test_a_message_separator_without_a_call_stays_text(prose: str) -> None:
    result = assert_chunking_invariant("gigachat3", prose)
    assert (result.content, result.calls) == (prose, [])


def test_eos_inside_a_string_is_content() -> None:
    text = '<|function_call|>{"name": "f", "arguments": {"s": "</s>"}}</s>'
    result = assert_chunking_invariant("gigachat3", text)
    assert result.calls == [Call(0, "call_0", "f", '{"s": "</s>"}')]


# --- GigaChat 3.5: GCML sections ---

G = "\uff5cGCML\uff5c"


def test_fixture_gigachat35_text_then_call() -> None:
    result = assert_chunking_invariant(
        "gigachat35", (RAW / "vllm-test_gigachat35_surrounding_text.txt").read_text()
    )
    assert (result.content, result.calls) == (
        "I will check.",
        [Call(0, "call_0", "get_weather", '{"city": "Tokyo"}')],
    )


def test_fixture_gigachat35_parallel_calls() -> None:
    result = assert_chunking_invariant(
        "gigachat35", (RAW / "vllm-test_gigachat35_parallel_tool_calls.txt").read_text()
    )
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "Tokyo"}'),
        Call(1, "call_1", "get_time", '{"timezone": "Asia/Tokyo"}'),
    ]


def test_fixture_gigachat35_string_false_values_are_json() -> None:
    text = (RAW / "vllm-test_gigachat35_various_data_types.txt").read_text()
    result = assert_chunking_invariant("gigachat35", text)
    assert result.parsed() == [
        (
            "typed_args",
            {
                "string_field": "hello",
                "int_field": 7,
                "float_field": 3.5,
                "bool_field": True,
                "null_field": None,
                "array_field": [1, 2, 3],
                "object_field": {"nested": True},
            },
        )
    ]


def test_gigachat35_a_value_without_the_attribute_is_a_string() -> None:
    text = (
        f'<{G}tool_calls><{G}invoke name="f"><{G}parameter name="n">42</{G}parameter>'
        f"</{G}invoke></{G}tool_calls>"
    )
    assert assert_chunking_invariant("gigachat35", text).calls == [Call(0, "call_0", "f", '{"n": "42"}')]

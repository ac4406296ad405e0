"""InternLM2 / Intern-S1 ``<|action_start|><|plugin|>{...}<|action_end|>`` tool calls."""

from __future__ import annotations

import pytest

from operators.delimiters import get_format
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant

RAW = FIXTURES / "raw_model_output"


def test_fixture_text_then_call() -> None:
    result = assert_chunking_invariant(
        "internlm2", (RAW / "vllm-test_internlm2_surrounding_text.txt").read_text()
    )
    assert result.content == "Let me check the weather for you. "
    assert result.calls == [Call(0, "call_0", "get_weather", '{"city": "Tokyo"}')]


def test_fixture_every_json_type_streams_verbatim() -> None:
    text = (RAW / "vllm-test_internlm2_various_data_types.txt").read_text()
    result = assert_chunking_invariant("internlm2", text)
    arguments = text[text.index('"parameters": ') + len('"parameters": ') : text.rindex("}")].rstrip()
    assert result.calls == [Call(0, "call_0", "test_function", arguments)]


def test_intern_s1_is_the_same_format_with_space_between_the_tokens() -> None:
    assert get_format("intern_s1") is get_format("internlm2")
    text = (
        'a<|action_start|> <|plugin|>\n{"name": "f", "arguments": {"q": "<|action_end|>"}}\n<|action_end|>b'
    )
    result = assert_chunking_invariant("intern_s1", text)
    assert (result.content, result.calls) == ("ab", [Call(0, "call_0", "f", '{"q": "<|action_end|>"}')])


@pytest.mark.parametrize(
    "prose",
    [
        "<|action_start|><|interpreter|>print(1)<|action_end|>",
        "<|action_start|><|plugin|>not json<|action_end|>",
    ],
)
def test_other_actions_stay_text(prose: str) -> None:
    result = assert_chunking_invariant("internlm2", prose)
    assert (result.content, result.calls) == (prose, [])


def test_cut_off_and_without_end_token() -> None:
    result = assert_chunking_invariant(
        "internlm2", '<|action_start|><|plugin|>{"name": "func", "parameters": {'
    )
    assert result.calls == [Call(0, "call_0", "func", "{", finished=False)]
    result = assert_chunking_invariant(
        "internlm2", '<|action_start|><|plugin|>{"name": "f", "parameters": {}}'
    )
    assert result.calls == [Call(0, "call_0", "f", "{}")]

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

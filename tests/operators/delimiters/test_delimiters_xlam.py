"""xLAM tool calls: a JSON list bare, fenced, after ``[TOOL_CALLS]`` or inside ``<tool_call>``."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant

RAW = FIXTURES / "raw_model_output"
DALLAS = Call(0, "call_0", "get_current_weather", '{"city": "Dallas", "state": "TX", "unit": "fahrenheit"}')


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("vllm-test_xlam_think_tag_then_list.txt", "<think>I'll help you with that.</think>"),
        ("vllm-test_xlam_json_code_block.txt", "I'll help you with that.\n"),
        ("vllm-test_xlam_tool_calls_tag.txt", "I'll check the weather for you."),
        ("vllm-test_xlam_tool_call_xml_tags.txt", "I'll help you check the weather."),
    ],
)
def test_fixture_each_layout(name: str, content: str) -> None:
    result = assert_chunking_invariant("xlam", (RAW / name).read_text())
    assert (result.content, result.calls) == (content, [DALLAS])


def test_fixture_bare_parallel_calls() -> None:
    result = assert_chunking_invariant("xlam", (RAW / "vllm-test_xlam_parallel_tool_calls.txt").read_text())
    assert result.content == ""
    assert [call.name for call in result.calls] == ["get_current_weather", "get_current_weather"]
    assert result.arguments(1) == {"city": "Orlando", "state": "FL", "unit": "fahrenheit"}


@pytest.mark.parametrize(
    "prose",
    [
        "Code:\n```python\nx = [1]\n```\n",
        "A list later: [1, 2] and [{}]",
        "Use the <tool_call> tag and [TOOL_CALLS] token.",
        "```\n[1, 2]\n```",
    ],
)
def test_prose_and_other_code_blocks_stay_text(prose: str) -> None:
    result = assert_chunking_invariant("xlam", prose)
    assert (result.content, result.calls) == (prose, [])


def test_fence_inside_a_string_is_content() -> None:
    text = '```json\n[{"name": "f", "arguments": {"code": "```x```"}}]\n```\ndone'
    result = assert_chunking_invariant("xlam", text)
    assert (result.content, result.calls) == ("\ndone", [Call(0, "call_0", "f", '{"code": "```x```"}')])

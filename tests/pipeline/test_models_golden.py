"""``to_dict()`` of every event kind, byte for byte, against golden files made before the typed events.

Each recording below is replayed through :func:`pipeline.process` (deterministic call and segment ids) and
every event's ``to_dict()`` is JSON-encoded; the lines must equal ``tests/golden/<name>.jsonl`` exactly.
Regenerate (only when a change of the wire format is intended) with
``python -m tests.pipeline.test_models_golden``.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from pipeline._jsonenc import encode_json
from pipeline.testing import replay
from tests.conftest import TESTS
from tests.reference import FIXTURES, call_id_for

GOLDEN = TESTS / "golden"

RECORDINGS: dict[str, tuple[str, str | None]] = {
    "anthropic_truncated": (
        "anthropic/anthropic-sdk-python_claude-3-7-sonnet_tool_use_truncated_max_tokens.sse",
        None,
    ),
    "anthropic_parallel": ("anthropic/fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse", None),
    "anthropic_server_tools": ("anthropic/pydantic-ai_claude_parallel_server_tool_uses.sse", None),
    "cohere_tool_plan": ("cohere/vercel_cohere_v2_tool_plan_then_2_parallel_tool_calls.jsonl", None),
    "gemini_streamed_calls": (
        "gemini/vercel_gemini-3-flash_thought_then_4_streamed_calls_incl_no_args.jsonl",
        None,
    ),
    "gemini_signature": ("gemini/pydantic-ai_gemini-2.5-pro_thought_summaries_then_text_signature.sse", None),
    "openai_parallel": ("openai_chat/openai-python_parallel_tool_calls_gpt4o.sse", None),
    "compatible_index1": (
        "openai_compatible/vercel_anthropic-openai-compat_text_then_tool_call_index1.sse",
        None,
    ),
    "compatible_reasoning": (
        "openai_compatible/fantasy_zai_glm-4.7-flash_reasoning_text_2_parallel_tools.sse",
        None,
    ),
    "responses_custom": ("openai_responses/vercel_gpt-5.2-codex_custom_tool_call.jsonl", None),
    "responses_citations": ("openai_responses/vercel_gpt-5-mini_web_search_calls_url_citations.jsonl", None),
    "responses_encrypted": (
        "openai_responses/fantasy_o4-mini_encrypted_reasoning_then_function_call.sse",
        None,
    ),
    "kimi_k2": ("raw_model_output/vllm-test_kimi-k2_text_then_3_parallel_tools.txt", "kimi_k2"),
    "qwen3_coder": ("raw_model_output/vllm-test_qwen3-coder_text_then_tool_xml_params.txt", "qwen3_coder"),
    "deepseek_truncated": ("raw_model_output/vllm-test_deepseek-v3.1_truncated_block.txt", "deepseek_v31"),
    "hermes_file_tools": ("../golden/inputs/hermes_file_tools_and_invalid_json.txt", "hermes"),
}
"""Recordings that together give every event kind: START / CONTENT / ARGUMENT (delta and value) / END of
text, reasoning, tool_call, tool_result segments, END with an error (truncated), invocations with and
without errors, provider-executed calls, citations, signatures, and RESPONSE_END."""


async def _lines(name: str) -> list[str]:
    path, tool_format = RECORDINGS[name]
    events = await replay(FIXTURES / path, tool_format=cast(Any, tool_format), id_factory=call_id_for)
    return [encode_json(event.to_dict()).decode() for event in events]


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(RECORDINGS))
async def test_to_dict_is_byte_for_byte_the_golden_file(name: str) -> None:
    expected = (GOLDEN / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    assert await _lines(name) == expected


def test_the_golden_files_cover_every_event_kind() -> None:
    text = "".join((GOLDEN / f"{name}.jsonl").read_text(encoding="utf-8") for name in RECORDINGS)
    for needle in [
        '"type":"SEGMENT_START"',
        '"type":"SEGMENT_CONTENT"',
        '"type":"SEGMENT_ARGUMENT"',
        '"type":"SEGMENT_END"',
        '"type":"TOOL_INVOCATION"',
        '"type":"RESPONSE_END"',
        '"segment_type":"reasoning"',
        '"segment_type":"tool_result"',
        '"kind":"truncated"',
        '"provider_executed":true',
        '"segment_type":"write_file"',
        '"segment_type":"patch_file"',
        '"kind":"invalid_json"',
    ]:
        assert needle in text, needle


def _regenerate() -> None:
    for name in RECORDINGS:
        lines = asyncio.run(_lines(name))
        (GOLDEN / f"{name}.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


if __name__ == "__main__":
    _regenerate()

"""Every recorded provider stream through the whole pipeline, compared with the independent oracle.

The pipeline (adapter -> converter -> splitter -> segment emitter -> invocation folder) is incremental;
the oracle in tests/reference.py reads each recording whole and parses once. They share no code, so
agreement on text, reasoning, invocations, finish reason and usage is evidence for both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.compose import process
from pipeline.errors import ProviderError
from pipeline.models import PipelineEvent, ToolInvocation
from pipeline.testing import Summary, counter_segment_ids, replay, summarize
from tests.reference import FIXTURES, Expected, ExpectedCall, call_id_for, expected, fixture_paths

PATHS = fixture_paths()
ERROR_PATHS = [path for path in PATHS if expected(path).error is not None]
COMPLETE_PATHS = [path for path in PATHS if path not in ERROR_PATHS]

RECHUNKED = [
    FIXTURES / name
    for name in (
        "anthropic/anthropic-sdk-python_claude-3-7-sonnet_tool_use_truncated_max_tokens.sse",
        "anthropic/anthropic-sdk-python_claude-haiku-4-5_text_after_tool_result.sse",
        "anthropic/fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse",
        "anthropic/pydantic-ai_claude_parallel_server_tool_uses.sse",
        "bedrock_converse/pydantic-ai_nova-2-lite_server_code_interpreter_then_tool_use.eventstream.bin",
        "bedrock_converse/vercel_claude_reasoning_signature_text.jsonl",
        "cohere/vercel_cohere_v2_tool_plan_then_2_parallel_tool_calls.jsonl",
        "gemini/fantasy_gemini-2.5-flash_2_parallel_function_calls_one_chunk.sse",
        "gemini/vercel_gemini-3-flash_thought_then_4_streamed_calls_incl_no_args.jsonl",
        "ollama/ollama-docs_llama3.2_chat_streamed_tool_call.jsonl",
        "openai_chat/openai-python_parallel_tool_calls_gpt4o.sse",
        "openai_compatible/fantasy_openrouter_gemini_2_parallel_tools.sse",
        "openai_compatible/vercel_anthropic-openai-compat_text_then_tool_call_index1.sse",
        "openai_responses/pydantic-ai_gpt-4o_function_call.sse",
        "openai_responses/vercel_gpt-5.2-codex_custom_tool_call.jsonl",
    )
]
"""A sample across formats and quirks: cut-off arguments, non-ASCII text, parallel and server calls,
SSE comments and event names, JSONL, AWS event-stream frames, custom tools, indexes starting at 1."""


def by_name(path: Path) -> str:
    return path.name


def invocation_facts(invocation: ToolInvocation) -> tuple[Any, ...]:
    error = invocation.error
    return (
        invocation.id,
        invocation.name,
        invocation.arguments,
        error.kind if error else None,
        error.raw if error else "",
        invocation.provider_executed,
    )


def expected_facts(call: ExpectedCall) -> tuple[Any, ...]:
    # A failed call still carries the top-level members that were complete, never a silent {}.
    arguments = call.arguments if call.arguments is not None else call.partial_arguments
    return (call.id, call.name, arguments, call.error_kind, call.raw, call.provider_executed)


def assert_agrees(summary: Summary, oracle: Expected) -> None:
    # A refusal streams like content (ChunkResponse.refusal); it must reach the reader as text.
    assert summary.text == oracle.text + oracle.refusal
    assert summary.reasoning == oracle.reasoning
    assert [invocation_facts(item) for item in summary.invocations] == [
        expected_facts(call) for call in oracle.invocations
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("path", COMPLETE_PATHS, ids=by_name)
async def test_pipeline_agrees_with_the_oracle(path: Path) -> None:
    oracle = expected(path)
    summary = summarize(await replay(path, provider="auto", chunk_size=None, id_factory=call_id_for))
    assert_agrees(summary, oracle)
    assert summary.finish_reason == oracle.finish_reason
    assert (summary.usage.to_dict() if summary.usage else None) == oracle.usage


async def _one_piece(data: bytes) -> AsyncIterator[bytes]:
    yield data


@pytest.mark.anyio
@pytest.mark.parametrize("path", ERROR_PATHS, ids=by_name)
async def test_in_band_error_raises_after_everything_before_it(path: Path) -> None:
    oracle = expected(path)
    assert oracle.error is not None
    received: list[PipelineEvent] = []
    events = process(
        _one_piece(await anyio.Path(path).read_bytes()),
        provider="auto",
        id_factory=call_id_for,
        segment_ids=counter_segment_ids(),
    )

    async def consume() -> None:
        # replay() collects into a list, which an exception discards: iterate to keep what came first.
        async with events.stream() as items:
            async for event in items:
                received.append(event)

    with pytest.raises(ProviderError) as raised:
        await consume()
    assert oracle.error in str(raised.value)
    assert_agrees(summarize(received, raised.value), oracle)


_one_piece_events: dict[Path, list[dict[str, Any]]] = {}


@pytest.mark.anyio
@pytest.mark.parametrize("path", RECHUNKED, ids=by_name)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=8))
async def test_any_rechunking_gives_the_same_events(path: Path, sizes: list[int]) -> None:
    if path not in _one_piece_events:
        _one_piece_events[path] = [event.to_dict() for event in await replay(path, id_factory=call_id_for)]
    rechunked = await replay(path, chunk_sizes=sizes, id_factory=call_id_for)
    assert [event.to_dict() for event in rechunked] == _one_piece_events[path]


def test_the_sample_spans_every_format() -> None:
    assert all(path in PATHS for path in RECHUNKED)
    assert {path.parent.name for path in RECHUNKED} == {path.parent.name for path in PATHS}
    assert ERROR_PATHS

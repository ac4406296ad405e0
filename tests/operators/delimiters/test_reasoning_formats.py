"""The reasoning formats beyond ``<think>`` (Granite, Hunyuan, ERNIE, Step-3, Seed-OSS, harmony's analysis
channel): the cases of vLLM's reasoning-parser tests, at every chunk boundary, through ``process()``, the
CLI and the proxy."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters.reasoning_tags import REASONING_FORMATS, ReasoningFormat, ReasoningTagSplitter
from pipeline.compose import process
from pipeline.errors import ConfigurationError
from pipeline.models import ChunkResponse
from pipeline.testing import collect, counter_segment_ids, summarize
from tests.conftest import TESTS

FIXTURES = TESTS / "fixtures"
RAW = FIXTURES / "raw_model_output"
VLLM_CASES: list[dict[str, Any]] = json.loads(
    (FIXTURES / "reasoning" / "vllm-tests_reasoning_parsers.json").read_text("utf-8")
)
"""Outputs and the reasoning / content vLLM's parsers give them (tests/fixtures/SOURCES.md)."""

HARMONY = RAW / "harmony_gpt-oss_analysis_then_builtin_tool_call_and_response.txt"
HARMONY_TEXT = HARMONY.read_text("utf-8")
HARMONY_ANALYSIS_END = HARMONY_TEXT.index("<|end|>")
WRITTEN_CASES: list[dict[str, Any]] = [
    {
        "format": "harmony",
        "case": HARMONY.name,
        "output": HARMONY_TEXT,
        "reasoning": HARMONY_TEXT[len("<|channel|>analysis<|message|>") : HARMONY_ANALYSIS_END],
        "content": HARMONY_TEXT[HARMONY_ANALYSIS_END + len("<|end|>") :],
    },
    {
        "format": "harmony",
        "case": "analysis_then_final",
        "output": (
            "<|channel|>analysis<|message|>Think.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Hi.<|return|>"
        ),
        "reasoning": "Think.",
        "content": "Hi.",
    },
    {
        "format": "granite",
        "case": "heres_variant_and_later_phrases_are_text",
        "output": "Here's my thought process:\nA.\nHere's my response:\nB. Here is my thought process: C.",
        "reasoning": "\nA.\n",
        "content": "\nB. Here is my thought process: C.",
    },
    {
        "format": "hunyuan",
        "case": "a_closing_tag_outside_reasoning_is_text",
        "output": "No thinking: </think> stays.",
        "reasoning": None,
        "content": "No thinking: </think> stays.",
    },
    {
        "format": "seed_oss",
        "case": "budget_reflection_stays_reasoning",
        "output": "<seed:think>A<seed:cot_budget_reflect>used 10</seed:cot_budget_reflect>B</seed:think>C",
        "reasoning": "A<seed:cot_budget_reflect>used 10</seed:cot_budget_reflect>B",
        "content": "C",
    },
]
CASES = VLLM_CASES + WRITTEN_CASES


def case_id(case: dict[str, Any]) -> str:
    return f"{case['format']}-{case['case']}"


def parts(chunks: list[ChunkResponse]) -> tuple[str | None, str | None]:
    """The reasoning and the content of ``chunks`` joined; ``None`` where there is none (vLLM's terms)."""
    reasoning = "".join(chunk.reasoning or "" for chunk in chunks)
    content = "".join(chunk.content for chunk in chunks)
    return reasoning or None, content or None


def split(style: str, pieces: list[str]) -> list[ChunkResponse]:
    core = ReasoningTagSplitter(style)
    out: list[ChunkResponse] = []
    for piece in pieces:
        out.extend(core.feed(ChunkResponse(content=piece)))
    out.extend(core.finish())
    return out


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_every_case_at_every_chunk_boundary(case: dict[str, Any]) -> None:
    text: str = case["output"]
    expected = (case["reasoning"], case["content"])
    assert parts(split(case["format"], [text])) == expected
    assert parts(split(case["format"], list(text))) == expected
    for cut in range(1, len(text)):
        assert parts(split(case["format"], [text[:cut], text[cut:]])) == expected, cut


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(CASES), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_any_chunking_gives_the_same_reasoning_and_text(case: dict[str, Any], cuts: list[int]) -> None:
    text: str = case["output"]
    bounds = sorted({cut % (len(text) + 1) for cut in cuts})
    pieces = [text[start:end] for start, end in zip([0, *bounds], [*bounds, len(text)], strict=True)]
    assert parts(split(case["format"], pieces)) == (case["reasoning"], case["content"])


def test_the_cases_cover_every_new_format() -> None:
    assert {case["format"] for case in CASES} == set(REASONING_FORMATS) - {"think", "kimi"}


@pytest.mark.parametrize("name", list(REASONING_FORMATS))
def test_no_marker_is_a_prefix_of_another_matched_with_it(name: str) -> None:
    form = REASONING_FORMATS[name]
    outside = form.drops if form.opens_only_at_start else form.opens + form.drops
    for group in (outside, form.closes):
        for marker in group:
            assert not any(other != marker and other.startswith(marker) for other in group), marker


@pytest.mark.parametrize("name", list(REASONING_FORMATS))
def test_what_is_held_back_is_shorter_than_the_longest_marker(name: str) -> None:
    form = REASONING_FORMATS[name]
    longest = max(map(len, form.opens + form.closes + form.drops))
    core = ReasoningTagSplitter(name)
    given_out = 0
    for marker in (*form.opens[:1], *form.closes[:1]):
        for piece in ("x" * 5000, marker[:-1]):
            chunks = core.feed(ChunkResponse(content=piece))
            given_out += sum(len(chunk.content) + len(chunk.reasoning or "") for chunk in chunks)
    assert given_out >= 10_000 - 2 * longest


def test_an_unclosed_granite_opening_at_the_end_is_text() -> None:
    assert parts(split("granite", ["Here is my thought"])) == (None, "Here is my thought")


def test_start_in_reasoning_overrides_the_formats_default() -> None:
    core = ReasoningTagSplitter("seed_oss", start_in_reasoning=False)
    chunks = core.feed(ChunkResponse(content="Plain answer</seed:think> stays", is_complete=True))
    assert parts(chunks) == (None, "Plain answer</seed:think> stays")


def test_a_format_object_and_unknown_names() -> None:
    custom = ReasoningFormat(("[[",), ("]]",), drops=("<<end>>",))
    assert parts(split(custom, ["a[[b]]c<<end>>"])) == ("b", "ac")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="expected one of: think, kimi, granite, hunyuan"):
        ReasoningTagSplitter("granite4")


async def model_text(*pieces: str) -> Any:
    for piece in pieces:
        yield {
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
        }
    yield {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


@pytest.mark.anyio
@pytest.mark.parametrize("case", [CASES[0], CASES[8], CASES[17], CASES[-5]], ids=case_id)
async def test_through_process(case: dict[str, Any]) -> None:
    text: str = case["output"]
    events = process(
        model_text(text[:7], text[7:]), reasoning_tags=case["format"], segment_ids=counter_segment_ids()
    )
    summary = summarize(await collect(events))
    assert (summary.reasoning or None, summary.text or None) == (case["reasoning"], case["content"])


def test_the_cli_and_the_proxy_offer_every_format() -> None:
    from pipeline.cli.main import _parser
    from pipeline.proxy._front import reasoning_splitter

    parser = _parser()
    for name in REASONING_FORMATS:
        assert parser.parse_args(["replay", "x.sse", "--reasoning-tags", name]).reasoning_tags == name
        assert reasoning_splitter(name) is not None

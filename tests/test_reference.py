"""Checks of the oracle (tests/reference.py) itself: against facts stated in tests/fixtures/SOURCES.md or
read by hand from the recordings, and properties of its argument judge and SSE reader."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reference import (
    FIXTURES,
    FORMATS,
    Expected,
    ExpectedCall,
    expected,
    fixture_paths,
    judge_arguments,
    read_payloads,
)

ADD_2_3 = {"a": 2, "b": 3}
FLORENCE = {"location": "Florence, Italy"}


@dataclass(frozen=True)
class Fact:
    """What a fixture holds: its calls as (name, arguments) in order, how it ends, and whether (or exactly
    what) text and reasoning it carries."""

    file: str
    calls: tuple[tuple[str, dict[str, Any] | None], ...]
    finish_reason: str | None
    text: str | bool
    reasoning: str | bool = False

    def __str__(self) -> str:
        return self.file


FACTS = [
    # anthropic
    Fact(
        "anthropic/anthropic-sdk-python_claude-3-7-sonnet_tool_use_truncated_max_tokens.sse",
        (("make_file", None),),
        "length",
        "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a file "
        "called taxes.txt. Let me do that for you now.",
    ),
    Fact(
        "anthropic/anthropic-sdk-python_claude-haiku-4-5_text_after_tool_result.sse",
        (),
        "stop",
        True,
    ),
    Fact(
        "anthropic/anthropic-sdk-python_claude-haiku-4-5_tool_use_only_streamed.sse",
        (("get_weather", {"location": "San Francisco, CA", "units": "f"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "anthropic/anthropic-sdk-python_claude-sonnet-4_text_then_tool_use.sse",
        (("get_weather", {"location": "Paris"}),),
        "tool_calls",
        "I'll check the current weather in Paris for you.",
    ),
    Fact(
        "anthropic/dive_claude-3-7-sonnet_thinking_signature_text.jsonl",
        (),
        "stop",
        True,
        True,
    ),
    Fact(
        "anthropic/fantasy_bedrock_claude-sonnet-4-5_tool_use_only.decoded.jsonl",
        (("weather", {"location": "Florence,Italy"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "anthropic/fantasy_claude-opus-4-6_computer_use_tool_use.sse",
        (("computer", {"action": "screenshot"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "anthropic/fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse",
        (("add", ADD_2_3), ("multiply", ADD_2_3)),
        "tool_calls",
        True,
    ),
    Fact(
        "anthropic/fantasy_claude-sonnet-4_text_then_tool_use.sse",
        (("weather", {"location": "Florence,Italy"}),),
        "tool_calls",
        "I'll get the weather information for Florence, Italy for you.",
    ),
    Fact(
        "anthropic/fantasy_claude-sonnet-4_thinking_then_tool_use.sse",
        (("weather", FLORENCE),),
        "tool_calls",
        False,
        True,
    ),
    Fact(
        "anthropic/llm-anthropic_claude-haiku-4-5_thinking_then_tool_use_no_args.sse",
        (("fixed_version", {}),),
        "tool_calls",
        False,
        True,
    ),
    Fact(
        "anthropic/llm-anthropic_claude-haiku-4-5_tool_use_only_no_args.sse",
        (("fixed_version", {}),),
        "tool_calls",
        False,
    ),
    Fact(
        "anthropic/llm-anthropic_claude-opus-4-6_text_before_thinking_adaptive.sse",
        (),
        "stop",
        "\n\n1. **Captain Scoop**\n2. **Gullet**",
        "Brief answer with two pet pelican names.",
    ),
    Fact(
        "anthropic/pydantic-ai_claude_redacted_thinking_text.sse",
        (),
        "stop",
        True,
        False,  # redacted thinking is opaque data, not reasoning text
    ),
    Fact(
        "anthropic/pydantic-ai_claude_signature_only_thinking_advisor.sse",
        (("advisor", {}),),
        "stop",
        True,
        False,  # the thinking block has a signature and no text
    ),
    Fact(
        "anthropic/pydantic-ai_claude_text_server_tool_search_then_client_tool_use.sse",
        (
            ("tool_search_tool_bm25", {"query": "USD EUR exchange rate currency conversion"}),
            ("get_exchange_rate", {"from_currency": "USD", "to_currency": "EUR"}),
        ),
        "tool_calls",
        True,
    ),
    Fact(
        "anthropic/pydantic-ai_claude_parallel_server_tool_uses.sse",
        (
            (
                "text_editor_code_execution",
                {"command": "create", "path": "/tmp/hello.txt", "file_text": "Hello, world!"},
            ),
            ("text_editor_code_execution", {"command": "view", "path": "/tmp/hello.txt"}),
            ("text_editor_code_execution", {"command": "view", "path": "/tmp/hello.txt"}),
        ),
        "stop",
        True,
    ),
    Fact(
        "anthropic/vercel_claude-haiku-4-5_text_then_tool_use.jsonl",
        (
            (
                "json",
                {"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]},
            ),
        ),
        "tool_calls",
        "I'll invoke the JSON response tool.",
    ),
    Fact(
        "anthropic/vercel_claude-sonnet-4-5_mcp_tool_use.jsonl",
        (("echo", {"message": "hello world"}),),
        "stop",
        True,
    ),
    Fact(
        "anthropic/vercel_claude-sonnet-4-5_text_then_tool_use_no_args.jsonl",
        (("updateIssueList", {}),),
        "tool_calls",
        "I'll update the issue list for you.",
    ),
    Fact(
        "anthropic/vercel_claude-sonnet-4_web_search_citations.jsonl",
        (("web_search", {"query": "tech news today September 26 2025"}),),
        "stop",
        True,
    ),
    # bedrock_converse
    Fact(
        "bedrock_converse/pydantic-ai_nova-2-lite_server_code_interpreter_then_tool_use.eventstream.bin",
        (("nova_code_interpreter", {"snippet": "1234 * 5678"}), ("final_result", {"result": 7006652.0})),
        "tool_calls",
        False,
    ),
    Fact(
        "bedrock_converse/pydantic-ai_nova-micro_text_after_tool_result.eventstream.bin",
        (),
        "stop",
        "The current temperature in Paris, the capital of France, is 30\u00b0C.",
    ),
    Fact(
        "bedrock_converse/pydantic-ai_claude-sonnet-4_reasoning_signature_text.eventstream.bin",
        (),
        "stop",
        "Hello! It's nice to meet you. How can I help you today?",
        True,
    ),
    Fact(
        "bedrock_converse/vercel_text_max_tokens.jsonl", (), "length", "Hello! How can I assist you today? If"
    ),
    # cohere
    Fact(
        "cohere/vercel_cohere_v2_tool_plan_then_2_parallel_tool_calls.jsonl",
        (("weather", {"location": "San Francisco"}), ("cityAttractions", {"city": "San Francisco"})),
        "tool_calls",
        False,
        "I will use the weather tool to find the weather in San Francisco and the cityAttractions tool "
        "to find attractions in San Francisco.",
    ),
    # gemini
    Fact(
        "gemini/fantasy_gemini-2.5-flash_2_parallel_function_calls_one_chunk.sse",
        (("add", ADD_2_3), ("multiply", ADD_2_3)),
        "tool_calls",
        False,
    ),
    Fact(
        "gemini/fantasy_gemini-2.5-flash_thought_summary_then_function_call.sse",
        (("weather", FLORENCE),),
        "tool_calls",
        False,
        True,
    ),
    Fact(
        "gemini/fantasy_gemini-2.5-pro_2_parallel_function_calls_two_chunks.sse",
        (("add", ADD_2_3), ("multiply", ADD_2_3)),
        "tool_calls",
        False,
    ),
    Fact(
        "gemini/fantasy_gemini-3.1-pro_function_call_id_signature_thinking.sse",
        (("weather", FLORENCE),),
        "tool_calls",
        False,
        False,
    ),
    Fact(
        "gemini/pydantic-ai_gemini-2.0-flash_function_call_single_chunk.sse",
        (("get_capital", {"country": "France"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "gemini/pydantic-ai_gemini-2.5-pro_thought_summaries_then_text_signature.sse",
        (),
        "stop",
        True,
        True,
    ),
    Fact(
        "gemini/pydantic-ai_gemini-3-flash_function_call_with_id.sse",
        (("get_user_country", {}),),
        "tool_calls",
        False,
    ),
    Fact(
        "gemini/pydantic-ai_gemini-3-pro_function_call_empty_args_signature.sse",
        (("get_country", {}),),
        "tool_calls",
        False,
    ),
    Fact(
        "gemini/vercel_gemini-2.5-flash_interactions_api_tool_call.jsonl",
        (("getWeather", {"location": "San Francisco"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "gemini/vercel_gemini-3-flash_streamed_array_args_no_terminal_call.jsonl",
        (
            (
                "writeItems",
                {
                    "operations": [
                        {
                            "action": "add",
                            "description": "Fresh red apple",
                            "itemid": "apple_001",
                            "price": 0.5,
                        },
                        {
                            "action": "add",
                            "description": "Ripe yellow banana",
                            "itemid": "banana_001",
                            "price": 0.3,
                        },
                    ]
                },
            ),
        ),
        "tool_calls",
        False,
    ),
    Fact(
        "gemini/vercel_gemini-3-flash_thought_then_4_streamed_calls_incl_no_args.jsonl",
        (
            ("read_theme", {}),
            ("read_screen", {"id": "A"}),
            ("read_screen", {"id": "B"}),
            ("read_screen", {"id": "C"}),
        ),
        "tool_calls",
        False,
        True,
    ),
    Fact(
        "gemini/vercel_gemini-3-pro_text_only.jsonl",
        (),
        "stop",
        'There are **3** "r"s in strawberry.\n\nst**r**awbe**rr**y',
    ),
    Fact(
        "gemini/vercel_gemini-3.1-pro_streamed_function_call_args_parallel.jsonl",
        (("getWeather", {"location": "Boston"}), ("getWeather", {"location": "San Francisco"})),
        "tool_calls",
        False,
    ),
    # openai_chat
    Fact(
        "openai_chat/fantasy_gpt-4o-mini_2_parallel_tool_calls.sse",
        (("add", ADD_2_3), ("multiply", ADD_2_3)),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_chat/fantasy_o4-mini_single_tool_call.sse",
        (("weather", FLORENCE),),
        "tool_calls",
        False,
    ),
    Fact("openai_chat/openai-python_max_tokens_length_gpt4o.sse", (), "length", '{"'),
    Fact(
        "openai_chat/openai-python_multiple_choices_n3_gpt4o.sse",
        (),
        "stop",
        '{"city":"San Francisco","temperature":65,"units":"f"}',
    ),
    Fact(
        "openai_chat/openai-python_nonstrict_tool_call_gpt4o.sse",
        (("get_weather", {"city": "New York City"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_chat/openai-python_parallel_tool_calls_gpt4o.sse",
        (
            ("GetWeatherArgs", {"city": "Edinburgh", "country": "GB", "units": "c"}),
            ("get_stock_price", {"ticker": "AAPL", "exchange": "NASDAQ"}),
        ),
        "tool_calls",
        False,
    ),
    Fact("openai_chat/openai-python_refusal_gpt4o.sse", (), "stop", False),
    Fact(
        "openai_chat/openai-python_strict_tool_call_gpt4o.sse",
        (("get_weather", {"city": "San Francisco", "state": "CA"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_chat/pydantic-ai_gpt-4o-mini_tool_call_obfuscation.sse",
        (("get_capital", {"country": "UK"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_chat/pydantic-ai_gpt-4o_parallel_tool_calls_empty_args.sse",
        (("get_country", {}), ("get_product_name", {})),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_chat/pydantic-ai_gpt-4o_single_tool_call_get_weather.sse",
        (("get_weather", {"city": "Mexico City"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_chat/vercel-test_gpt-3.5-turbo-0125_tool_call_deltas.sse",
        (("test-tool", {"value": "Sparkle Day"}),),
        "tool_calls",
        False,
    ),
    # openai_compatible
    Fact(
        "openai_compatible/fantasy_avian_kimi_reasoning_text_interleaved_between_parallel_tools.sse",
        (("add", ADD_2_3), ("multiply", ADD_2_3)),
        "tool_calls",
        True,
        True,
    ),
    Fact(
        "openai_compatible/fantasy_groq_kimi-k2_text_then_2_parallel_tools.sse",
        (("add", ADD_2_3), ("multiply", ADD_2_3)),
        "tool_calls",
        True,
    ),
    Fact(
        "openai_compatible/fantasy_xai_grok-4-fast_2_parallel_tools_no_text.sse",
        (("add", ADD_2_3), ("multiply", ADD_2_3)),
        "tool_calls",
        False,
        False,
    ),
    Fact(
        "openai_compatible/fantasy_zai_glm-4.7-flash_reasoning_text_single_tool.sse",
        (("weather", {"location": "Florence"}),),
        "tool_calls",
        "I'll check the weather in Florence, Italy for you.",
        True,
    ),
    Fact(
        "openai_compatible/pydantic-ai_groq_gpt-oss-120b_long_reasoning_then_tool_call.sse",
        (("final_result", {"response": "no"}),),
        "tool_calls",
        False,
        True,
    ),
    Fact(
        "openai_compatible/pydantic-ai_groq_gpt-oss-120b_reasoning_then_tool_call.sse",
        (("get_something_by_name", {"name": "example"}),),
        "tool_calls",
        False,
        True,
    ),
    Fact(
        "openai_compatible/pydantic-ai_groq_gpt-oss-120b_reasoning_text_then_error_event.sse",
        (),
        None,
        "maybe",
        True,
    ),
    Fact(
        "openai_compatible/pydantic-ai_openrouter_reasoning_details_text.sse",
        (),
        "stop",
        "2 + 2 = 4",
        "This is a simple arithmetic question. 2+2 equals 4.",
    ),
    Fact(
        "openai_compatible/pydantic-ai_snowflake_cortex_claude_reasoning_details.sse",
        (),
        None,  # no finish_reason is ever sent
        True,
        "15 * 27 = 405",
    ),
    Fact(
        "openai_compatible/vercel-test_vllm-style_llama-3.1-8b_tool_call_trailing_empty_args_chunk.sse",
        (("searchGoogle", {"query": "latest news on ai"}),),  # the trailing empty delta adds no call
        "tool_calls",
        False,
    ),
    Fact(
        "openai_compatible/vercel_alibaba_qwen3-max_tool_call.jsonl",
        (("weather", {"location": "San Francisco"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_compatible/vercel_anthropic-openai-compat_text_then_tool_call_index1.sse",
        (("read_file", {"path": "a.txt"}),),
        "tool_calls",
        "Reading it.",
    ),
    Fact(
        "openai_compatible/vercel_deepseek-reasoner_reasoning_then_tool_call.jsonl",
        (("weather", {"location": "San Francisco"}),),
        "tool_calls",
        False,
        True,
    ),
    Fact(
        "openai_compatible/vercel_groq_llama-3.3-70b_tool_call_single_chunk.jsonl",
        (("weather", {}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_compatible/vercel_mistral-small_tool_call_no_index.jsonl",
        (("weather", {"location": "San Francisco"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_compatible/vercel_mistral_glm-5-2_incremental_tool_call.jsonl",
        (("webSearchTool", {"query": "current Berlin weather"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_compatible/vercel_mistral_magistral_thinking_content_list.jsonl",
        (),
        "stop",
        "2 + 2 = 4",
        "The user is asking for 2+2. This is basic arithmetic. 2+2=4.",
    ),
    # openai_responses
    Fact(
        "openai_responses/fantasy_gpt-4o_2_parallel_function_calls.sse",
        (("add", ADD_2_3), ("multiply", ADD_2_3)),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_responses/fantasy_gpt-5_reasoning_summary_then_function_call.sse",
        (("weather", FLORENCE),),
        "tool_calls",
        False,
        True,
    ),
    Fact(
        "openai_responses/fantasy_o4-mini_encrypted_reasoning_then_function_call.sse",
        (("weather", FLORENCE),),
        "tool_calls",
        False,
        False,  # encrypted reasoning only
    ),
    Fact(
        "openai_responses/pydantic-ai_bedrock-mantle_gpt-5.6_function_call_single_delta.sse",
        (("second_tool", {}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_responses/pydantic-ai_deepseek-v4-flash_responses_reasoning_text_function_call.sse",
        (("get_temperature", {"city": "Tokyo"}),),
        "tool_calls",
        False,
        "The user asks about temperature in Tokyo. I'll call the tool.",
    ),
    Fact(
        "openai_responses/pydantic-ai_gpt-4o_function_call.sse",
        (("get_capital", {"country": "France"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_responses/pydantic-ai_gpt-4o_text_after_tool.sse",
        (),
        "stop",
        "The capital of France is Paris.",
    ),
    Fact(
        "openai_responses/pydantic-ai_gpt-5.5_reasoning_commentary_text_then_function_call.sse",
        (("get_capital", {"country": "PotatoLand"}),),
        "tool_calls",
        "I\u2019ll check the capital lookup tool for \u201cPotatoLand.\u201d",
    ),
    Fact(
        "openai_responses/pydantic-ai_gpt-5_encrypted_reasoning_then_function_call.sse",
        (("final_result", {"result": 6666}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_responses/pydantic-ai_openrouter_gpt-oss-20b_reasoning_text_after_message.sse",
        (),
        "stop",
        "4",
        True,
    ),
    Fact(
        "openai_responses/vercel_azure_gpt-5.1-codex-max_step1_reasoning_summary_then_function_call.jsonl",
        (("calculator", {"a": 12, "b": 7, "op": "add"}),),
        "tool_calls",
        False,
        True,
    ),
    Fact(
        "openai_responses/vercel_azure_gpt-5.1_single_function_call.jsonl",
        (("weather", {"location": "San Francisco"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_responses/vercel_github-copilot_gpt-5.3-codex_reasoning_summary_id_rotation.jsonl",
        (),
        "stop",
        True,
        "**Counting character occurrences**",
    ),
    Fact(
        "openai_responses/vercel_gpt-5.1-codex-max_step2_function_call_only.jsonl",
        (("calculator", {"a": 19, "b": 3, "op": "multiply"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_responses/vercel_gpt-5.1-codex-max_step4_final_text.jsonl",
        (),
        "stop",
        "The final result is **570**.",
    ),
    Fact(
        "openai_responses/vercel_gpt-5.4_function_call_get_weather.jsonl",
        (("get_weather", {"location": "San Francisco, CA", "unit": "fahrenheit"}),),
        "tool_calls",
        False,
    ),
    Fact(
        "openai_responses/vercel_gpt-5.4_tool_search_then_function_call.jsonl",
        (("get_weather", {"location": "San Francisco, CA", "unit": "fahrenheit"}),),  # no search call
        "tool_calls",
        False,
    ),
    # ollama
    Fact(
        "ollama/attogram_granite3.3-2b_generate_streamed_text.jsonl",
        (),
        "stop",
        "Rabbits are small to medium-sized mammals known for their fluffy tails and long ears, which they"
        " use to detect predators. They are herbivores, primarily feeding on grasses, leaves, and roots, and"
        " are famous for their rapid hopping ability.",
    ),
    Fact(
        "ollama/ollama-docs_gemma4_generate_streamed_text.jsonl",
        (),
        "stop",
        "That's a fantastic question!",
    ),
    Fact(
        "ollama/ollama-docs_llama3.2_chat_streamed_tool_call.jsonl",
        (("get_weather", {"city": "Tokyo"}),),
        "tool_calls",
        False,
    ),
    Fact("ollama/ollama-docs_llama3.2_chat_text_without_done_reason.jsonl", (), "stop", "The"),
    Fact(
        "openai_responses/vercel_lmstudio_glm-4.7-flash_reasoning_text_function_call.jsonl",
        (("weather", {"location": "San Francisco"}),),  # arguments only in .done events
        "tool_calls",
        "I'll get the current weather information for San Francisco for you.",
        True,
    ),
]


def oracle(file: str) -> Expected:
    return expected(FIXTURES / file)


def test_the_facts_cover_every_format_and_many_fixtures() -> None:
    files = {fact.file for fact in FACTS}
    assert len(files) == len(FACTS)
    assert len(files) >= 25
    assert {file.split("/")[0] for file in files} == set(FORMATS)
    assert all((FIXTURES / file).is_file() for file in files)


@pytest.mark.parametrize("fact", FACTS, ids=str)
def test_oracle_agrees_with_the_documented_facts(fact: Fact) -> None:
    result = oracle(fact.file)
    calls = tuple((call.name, call.arguments) for call in result.invocations)
    assert len(calls) == len(fact.calls)
    for (name, arguments), (fact_name, fact_arguments) in zip(calls, fact.calls, strict=True):
        assert name == fact_name
        if fact_arguments is not None:
            assert arguments == fact_arguments
    assert result.finish_reason == fact.finish_reason
    for got, want in ((result.text, fact.text), (result.reasoning, fact.reasoning)):
        if isinstance(want, str):
            assert got == want
        else:
            assert bool(got.strip()) is want, repr(got[:80])


def test_truncated_anthropic_call_keeps_what_was_complete() -> None:
    (call,) = oracle(
        "anthropic/anthropic-sdk-python_claude-3-7-sonnet_tool_use_truncated_max_tokens.sse"
    ).invocations
    assert call == ExpectedCall(
        id="toolu_01EKqbqmZrGRXy18eN7m9kvY",
        name="make_file",
        arguments=None,
        error_kind="truncated",
        raw='{"filename": "taxes.txt", "lines_of_text": [\n'
        '"# COMPREHENSIVE TAX GUIDE FOR INDIVIDUALS WITH MULTIPLE W-2s",\n"",\n"## INTRODUCTION",\n'
        '"",\n"Filing taxes',
        partial_arguments={"filename": "taxes.txt"},
    )


@pytest.mark.parametrize(
    ("file", "executed_by_provider"),
    [
        ("anthropic/pydantic-ai_claude-sonnet-4-5_thinking_mcp_tool_use_text.sse", [True]),
        ("anthropic/vercel_claude-sonnet-4-5_code_execution_server_tools.jsonl", [True, True]),
        ("anthropic/pydantic-ai_claude_thinking_server_web_fetch.sse", [True]),
        (
            "anthropic/pydantic-ai_claude_text_server_tool_search_then_client_tool_use.sse",
            [True, False],
        ),
        ("anthropic/fantasy_claude-opus-4-6_computer_use_tool_use.sse", [False]),
        ("openai_responses/vercel_gpt-5-codex_local_shell_call.jsonl", [False]),
        ("openai_responses/vercel_gpt-5.2-codex_custom_tool_call.jsonl", [False]),
    ],
)
def test_who_executes_each_call(file: str, executed_by_provider: list[bool]) -> None:
    assert [call.provider_executed for call in oracle(file).invocations] == executed_by_provider


@pytest.mark.parametrize(
    ("file", "ids"),
    [
        # Gemini without ids: the deterministic id_factory of the pipeline under test.
        ("gemini/fantasy_gemini-2.5-flash_2_parallel_function_calls_one_chunk.sse", ["call_0", "call_1"]),
        (
            "gemini/vercel_gemini-3-flash_thought_then_4_streamed_calls_incl_no_args.jsonl",
            ["call_0", "call_1", "call_2", "call_3"],
        ),
        ("gemini/fantasy_gemini-3.1-pro_parallel_function_calls_with_ids.sse", ["8hd01vsf", "k0srpqrc"]),
        ("gemini/vercel_gemini-2.5-flash_interactions_api_tool_call.jsonl", ["61nzpsv4"]),
        # Later deltas repeat id "" (Alibaba) or carry no index (Mistral): the first id stays.
        ("openai_compatible/vercel_alibaba_qwen3-max_tool_call.jsonl", ["call_eee11723464a4b9eb8cee71d"]),
        ("openai_compatible/vercel_mistral-small_tool_call_no_index.jsonl", ["gSIMJiOkT"]),
        (
            "openai_compatible/vercel_mistral_glm-5-2_incremental_tool_call.jsonl",
            ["chatcmpl-tool-9f149c74c42f265b"],
        ),
        ("openai_responses/vercel_gpt-5.2-codex_custom_tool_call.jsonl", ["call_custom_sql_001"]),
        ("openai_responses/vercel_gpt-5-codex_local_shell_call.jsonl", ["call_h3nm8hUG0KO9tVNuRACkL1ri"]),
        (
            "cohere/vercel_cohere_v2_tool_plan_then_2_parallel_tool_calls.jsonl",
            ["weather_e8p4pn45zt0t", "cityAttractions_pyxssbwnq9fq"],
        ),
    ],
)
def test_call_ids(file: str, ids: list[str]) -> None:
    assert [call.id for call in oracle(file).invocations] == ids


def test_responses_built_in_client_calls_and_custom_tools() -> None:
    (shell,) = oracle("openai_responses/vercel_gpt-5-codex_local_shell_call.jsonl").invocations
    assert (shell.name, shell.arguments) == (
        "local_shell",
        {"type": "exec", "command": ["ls", "-a", "~"], "env": {}},
    )
    (custom,) = oracle("openai_responses/vercel_gpt-5.2-codex_custom_tool_call.jsonl").invocations
    assert (custom.name, custom.arguments) == ("write_sql", {"input": "SELECT * FROM users WHERE age > 25"})


def test_gemini_nested_streamed_arguments_are_rebuilt_by_json_path() -> None:
    (call,) = oracle("gemini/vercel_gemini-3.1-pro_vertex_streamed_nested_args.jsonl").invocations
    assert call.name == "cookRecipe"
    assert call.arguments is not None
    recipe = call.arguments["recipe"]
    assert recipe["name"] == "Lasagna"
    assert len(recipe["ingredients"]) == 10
    assert recipe["ingredients"][0] == {"amount": "16 oz", "name": "Lasagna noodles"}
    assert recipe["ingredients"][9] == {"amount": "1/2 tsp", "name": "Pepper"}
    # steps[1] and steps[4] arrive in two string pieces each.
    assert recipe["steps"][1] == (
        "Cook lasagna noodles according to package directions, drain and set aside."
    )
    assert recipe["steps"][4] == "In a 9x13 baking dish, spread a thin layer of meat sauce."
    assert recipe["steps"][0] == "Preheat oven to 375\u00b0F (190\u00b0C)."
    assert len(recipe["steps"]) == 10


@pytest.mark.parametrize(
    ("file", "usage"),
    [
        (
            # input 450 + cache read 0 + cache creation 0; output 124 from message_delta.
            "anthropic/anthropic-sdk-python_claude-3-7-sonnet_tool_use_truncated_max_tokens.sse",
            {
                "prompt_tokens": 450,
                "completion_tokens": 124,
                "total_tokens": 574,
                "cached_tokens": 0,
                "cache_creation_tokens": 0,
            },
        ),
        (
            "anthropic/llm-anthropic_claude-haiku-4-5_thinking_then_tool_use_no_args.sse",
            {
                "prompt_tokens": 598,
                "completion_tokens": 92,
                "total_tokens": 690,
                "cached_tokens": 0,
                "cache_creation_tokens": 0,
                "reasoning_tokens": 53,
            },
        ),
        (
            # candidates 23 + thoughts 132; total as Gemini says.
            "gemini/vercel_gemini-3.1-pro_streamed_function_call_args_parallel.jsonl",
            {"prompt_tokens": 26, "completion_tokens": 155, "total_tokens": 181, "reasoning_tokens": 132},
        ),
        (
            # message_delta's input_tokens 0 is the re-serialiser's zero for an absent field.
            "anthropic/dive_claude-3-7-sonnet_text_then_tool_use.jsonl",
            {"prompt_tokens": 471, "completion_tokens": 80, "total_tokens": 551},
        ),
        (
            # message_delta's counts (7621 in) replace message_start's (2307 in).
            "anthropic/pydantic-ai_claude_parallel_server_tool_uses.sse",
            {
                "prompt_tokens": 7621,
                "completion_tokens": 384,
                "total_tokens": 8005,
                "cached_tokens": 0,
                "cache_creation_tokens": 0,
            },
        ),
        (
            "gemini/pydantic-ai_gemini-2.0-flash_function_call_single_chunk.sse",
            {"prompt_tokens": 52, "completion_tokens": 5, "total_tokens": 57},
        ),
        (
            "gemini/vercel_gemini-2.5-flash_interactions_api_tool_call.jsonl",
            {
                "prompt_tokens": 53,
                "completion_tokens": 80,
                "total_tokens": 133,
                "cached_tokens": 0,
                "reasoning_tokens": 65,
            },
        ),
        (
            "cohere/vercel_cohere_v2_tool_plan_then_2_parallel_tool_calls.jsonl",
            {"prompt_tokens": 1549, "completion_tokens": 95, "total_tokens": 1644, "cached_tokens": 1504},
        ),
        (
            "openai_chat/vercel-test_gpt-3.5-turbo-0125_tool_call_deltas.sse",
            {"prompt_tokens": 53, "completion_tokens": 17, "total_tokens": 70},
        ),
        (
            # xAI counts reasoning apart (288 + 27 + 313 = 628); in OpenAI's terms completion includes it.
            "openai_compatible/fantasy_xai_grok-3-mini_long_reasoning_then_tool.sse",
            {
                "prompt_tokens": 288,
                "completion_tokens": 340,
                "total_tokens": 628,
                "cached_tokens": 287,
                "reasoning_tokens": 313,
            },
        ),
        (
            # Groq repeats usage in x_groq; reasoning tokens are reported.
            "openai_compatible/pydantic-ai_groq_gpt-oss-120b_reasoning_then_tool_call.sse",
            {"prompt_tokens": 304, "completion_tokens": 49, "total_tokens": 353, "reasoning_tokens": 23},
        ),
        (
            # OpenRouter's cache_write_tokens are the tokens written to the cache.
            "openai_compatible/fantasy_openrouter_anthropic_2_parallel_tools.sse",
            {
                "prompt_tokens": 685,
                "completion_tokens": 120,
                "total_tokens": 805,
                "cached_tokens": 0,
                "cache_creation_tokens": 0,
                "reasoning_tokens": 0,
            },
        ),
        (
            "openai_responses/pydantic-ai_bedrock-mantle_gpt-5.6_function_call_single_delta.sse",
            {
                "prompt_tokens": 115,
                "completion_tokens": 30,
                "total_tokens": 145,
                "cached_tokens": 0,
                "cache_creation_tokens": 0,
                "reasoning_tokens": 14,
            },
        ),
        (
            "openai_responses/pydantic-ai_deepseek-v4-flash_responses_reasoning_text_function_call.sse",
            {
                "prompt_tokens": 366,
                "completion_tokens": 59,
                "total_tokens": 425,
                "cached_tokens": 256,
                "reasoning_tokens": 14,
            },
        ),
        ("openai_compatible/vercel_anthropic-openai-compat_text_then_tool_call_index1.sse", None),
    ],
)
def test_usage(file: str, usage: dict[str, int] | None) -> None:
    assert oracle(file).usage == usage


def test_in_band_error_events() -> None:
    early = oracle("openai_compatible/pydantic-ai_groq_gpt-oss-120b_reasoning_text_then_error_event.sse")
    assert early.error == "Tool choice is required, but model did not call a tool"
    assert (early.text, early.invocations, early.usage) == ("maybe", [], None)
    assert early.reasoning.startswith('The user says: "dont make a tool call')
    midstream = oracle(
        "openai_compatible/pydantic-ai_groq_gpt-oss-120b_reasoning_then_midstream_error_event.sse"
    )
    assert midstream.error is not None
    assert midstream.error.startswith("Tool call validation failed")
    assert (midstream.text, midstream.invocations) == ("", [])
    assert midstream.reasoning.endswith(" do that.")


def test_refusal_is_kept_apart_from_text() -> None:
    refusal = oracle("openai_chat/openai-python_refusal_gpt4o.sse")
    assert (refusal.text, refusal.refusal) == ("", "I'm sorry, I can't assist with that request.")


@pytest.mark.parametrize("path", fixture_paths(), ids=lambda path: path.name)
def test_every_fixture_has_a_consistent_expectation(path: Path) -> None:
    result = expected(path)
    errors_expected = "error_event" in path.name
    assert (result.error is not None) is errors_expected
    if not errors_expected:
        assert result.finish_reason in {"stop", "length", "tool_calls", "content_filter", None}
    ids = [call.id for call in result.invocations]
    assert len(set(ids)) == len(ids)
    for call in result.invocations:
        assert call.name
        assert (call.arguments is None) is (call.error_kind is not None)
    if result.usage is not None:
        assert result.usage["total_tokens"] >= result.usage["prompt_tokens"]


def test_fixture_paths_cover_the_folders_but_not_anthropic_on_bedrock_frames() -> None:
    paths = fixture_paths()
    assert {path.parent.name for path in paths} == set(FORMATS)
    assert {path.parent.name for path in paths if path.suffix == ".bin"} == {"bedrock_converse"}
    assert FIXTURES / "anthropic/fantasy_bedrock_claude-sonnet-4-5_tool_use_only.decoded.jsonl" in paths
    with pytest.raises(ValueError, match="raw_model_output"):
        expected(FIXTURES / "raw_model_output/vllm-test_glm-4.5_no_args_tool.txt")


# --------------------------------------------------------------------------------------------------
# The SSE reader


def test_sse_reader_handles_crlf_comments_event_names_multiline_data_and_done(tmp_path: Path) -> None:
    path = tmp_path / "stream.sse"
    path.write_bytes(
        b": OPENROUTER PROCESSING\r\n\r\n"
        b'event: message_start\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
        b'data:{"b": 2}\n\n'
        b"data: [DONE]\n\n"
    )
    assert read_payloads(path) == [("message_start", {"a": 1}), (None, {"b": 2})]


def test_jsonl_reader_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "stream.jsonl"
    path.write_text('{"a": 1}\n\n{"b": 2}\n', encoding="utf-8")
    assert read_payloads(path) == [(None, {"a": 1}), (None, {"b": 2})]


# --------------------------------------------------------------------------------------------------
# The argument judge


@pytest.mark.parametrize(
    ("text", "judged"),
    [
        ("", ({}, None, {})),
        ("  \n", ({}, None, {})),
        ('{"a": 1}', ({"a": 1}, None, {})),
        ('{"a": 1, "b": [tr', (None, "truncated", {"a": 1})),
        ('{"a": "x\\u00', (None, "truncated", {})),
        ('{"a": -', (None, "truncated", {})),
        ('{"a": 1.5e', (None, "truncated", {})),
        ('{"a": 12', (None, "truncated", {})),  # a number is complete only when something follows it
        ('{"a": {"b": 1}, "c"', (None, "truncated", {"a": {"b": 1}})),
        ('{"a": 1}}', (None, "invalid_json", {"a": 1})),
        ('{"a": 1} x', (None, "invalid_json", {"a": 1})),
        ("{'a': 1}", (None, "invalid_json", {})),
        ('{"a": tru}', (None, "invalid_json", {})),
        ('{"a": 01}', (None, "invalid_json", {})),
        ('{"a": 1.2.', (None, "invalid_json", {})),
        ('{"a": "\\x"}', (None, "invalid_json", {})),
        ('{"a": "line\nbreak"}', (None, "invalid_json", {})),
        ('{"a" 1}', (None, "invalid_json", {})),
        ("[1, 2", (None, "truncated", {})),
    ],
)
def test_judge_arguments(text: str, judged: tuple[Any, ...]) -> None:
    assert judge_arguments(text) == judged


def test_judge_refuses_to_guess_about_non_object_roots() -> None:
    with pytest.raises(ValueError, match="not an object"):
        judge_arguments("[1, 2]")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=4)


@settings(max_examples=200, deadline=None)
@given(json_objects, st.booleans(), st.data())
def test_every_cut_of_an_object_is_truncated_with_its_complete_members(
    arguments: dict[str, Any], spaced: bool, data: st.DataObject
) -> None:
    text = json.dumps(arguments, indent=1 if spaced else None)
    assert judge_arguments(text) == (arguments, None, {})
    cut = data.draw(st.integers(min_value=1, max_value=len(text) - 1), label="cut")
    parsed, error_kind, partial = judge_arguments(text[:cut])
    assert (parsed, error_kind) == (None, "truncated")
    # What was complete is a leading run of the members, with their exact values.
    assert list(partial.items()) == list(arguments.items())[: len(partial)]


@settings(max_examples=100, deadline=None)
@given(json_objects, st.sampled_from(["}", "]", "x", ",", ":", '"a"', "{}"]))
def test_anything_after_a_whole_object_is_invalid(arguments: dict[str, Any], tail: str) -> None:
    parsed, error_kind, partial = judge_arguments(json.dumps(arguments) + tail)
    assert (parsed, error_kind, partial) == (None, "invalid_json", arguments)


# --------------------------------------------------------------------------------------------------
# Rules no recording exercises alone, on small hand-made streams


def write_stream(tmp_path: Path, folder: str, events: list[dict[str, Any]]) -> Path:
    path = tmp_path / folder / "stream.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(event) + "\n" for event in events), encoding="utf-8")
    return path


def test_chat_pieces_without_index_continue_the_last_call_unless_a_new_id_comes(tmp_path: Path) -> None:
    def piece(arguments: str, call_id: str | None = None, name: str | None = None) -> dict[str, Any]:
        function = {"arguments": arguments} | ({"name": name} if name else {})
        tool_call = {"function": function} | ({"id": call_id} if call_id else {})
        return {"choices": [{"index": 0, "delta": {"tool_calls": [tool_call]}}]}

    path = write_stream(
        tmp_path,
        "openai_compatible",
        [piece('{"x": ', "a", "f"), piece("1}"), piece("{}", "b", "g"), piece("", "b")],
    )
    assert [(call.id, call.name, call.arguments) for call in expected(path).invocations] == [
        ("a", "f", {"x": 1}),
        ("b", "g", {}),
    ]


def test_anthropic_call_without_input_deltas_takes_its_start_input(tmp_path: Path) -> None:
    block = {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "q"}}
    path = write_stream(
        tmp_path,
        "anthropic",
        [
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        ],
    )
    result = expected(path)
    assert result.invocations == [ExpectedCall("srv_1", "web_search", {"query": "q"}, provider_executed=True)]
    assert (result.finish_reason, result.usage) == ("stop", None)


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
def test_anthropic_stop_reasons(tmp_path: Path, stop_reason: str, finish_reason: str) -> None:
    events = [{"type": "message_delta", "delta": {"stop_reason": stop_reason}}]
    assert expected(write_stream(tmp_path, "anthropic", events)).finish_reason == finish_reason


def test_anthropic_error_event_ends_the_expectation(tmp_path: Path) -> None:
    text_block = {"type": "text", "text": ""}
    path = write_stream(
        tmp_path,
        "anthropic",
        [
            {"type": "content_block_start", "index": 0, "content_block": text_block},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ],
    )
    result = expected(path)
    assert (result.text, result.error, result.finish_reason) == ("Hi", "Overloaded", None)


def test_chat_legacy_function_call_finish_is_tool_calls(tmp_path: Path) -> None:
    events = [{"choices": [{"index": 0, "delta": {}, "finish_reason": "function_call"}]}]
    assert expected(write_stream(tmp_path, "openai_chat", events)).finish_reason == "tool_calls"


def test_responses_builtin_calls_mcp_and_incomplete(tmp_path: Path) -> None:
    def added(output_index: int, item: dict[str, Any]) -> dict[str, Any]:
        return {"type": "response.output_item.added", "output_index": output_index, "item": item}

    computer = {"type": "computer_call", "call_id": "c1", "action": {"type": "click", "x": 1, "y": 2}}
    patch = {"type": "apply_patch_call", "call_id": "c2", "operation": {"type": "delete_file", "path": "a"}}
    mcp = {"type": "mcp_call", "id": "mcp_1", "name": "ask", "arguments": ""}
    search = {"type": "web_search_call", "id": "ws_1"}
    path = write_stream(
        tmp_path,
        "openai_responses",
        [
            added(0, search),
            added(1, computer),
            added(2, patch),
            added(3, mcp),
            {"type": "response.mcp_call_arguments.delta", "output_index": 3, "delta": '{"q": "x"}'},
            {
                "type": "response.incomplete",
                "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
            },
        ],
    )
    result = expected(path)
    assert result.invocations == [
        ExpectedCall("ws_1", "web_search", {}, provider_executed=True),
        ExpectedCall("c1", "computer", {"type": "click", "x": 1, "y": 2}),
        ExpectedCall("c2", "apply_patch", {"type": "delete_file", "path": "a"}),
        ExpectedCall("mcp_1", "ask", {"q": "x"}, provider_executed=True),
    ]
    assert result.finish_reason == "length"


def test_responses_error_event(tmp_path: Path) -> None:
    path = write_stream(
        tmp_path,
        "openai_responses",
        [
            {"type": "response.output_text.delta", "output_index": 0, "delta": "So"},
            {"type": "error", "code": "server_error", "message": "The server had an error"},
        ],
    )
    assert (expected(path).text, expected(path).error) == ("So", "The server had an error")


@pytest.mark.parametrize(
    ("finish", "finish_reason"),
    [("STOP", "stop"), ("MAX_TOKENS", "length"), ("SAFETY", "content_filter"), ("OTHER", "other")],
)
def test_gemini_finish_reasons_and_thought_parts(tmp_path: Path, finish: str, finish_reason: str) -> None:
    parts = [{"text": "hm", "thought": True}, {"text": "Hello"}]
    candidate = {"content": {"parts": parts}, "finishReason": finish}
    result = expected(write_stream(tmp_path, "gemini", [{"candidates": [candidate]}]))
    assert (result.text, result.reasoning, result.finish_reason) == ("Hello", "hm", finish_reason)


def test_cohere_text_and_complete(tmp_path: Path) -> None:
    path = write_stream(
        tmp_path,
        "cohere",
        [
            {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "Hi"}}}},
            {"type": "message-end", "delta": {"finish_reason": "COMPLETE"}},
        ],
    )
    result = expected(path)
    assert (result.text, result.finish_reason, result.usage) == ("Hi", "stop", None)


def test_responses_completed_with_only_provider_executed_calls_is_stop(tmp_path: Path) -> None:
    mcp = {"type": "mcp_call", "id": "mcp_1", "name": "ask", "arguments": "{}"}
    path = write_stream(
        tmp_path,
        "openai_responses",
        [
            {"type": "response.output_item.added", "output_index": 0, "item": mcp},
            {"type": "response.output_item.done", "output_index": 0, "item": mcp},
            {"type": "response.completed", "response": {"status": "completed"}},
        ],
    )
    result = expected(path)
    assert result.invocations == [ExpectedCall("mcp_1", "ask", {}, provider_executed=True)]
    assert result.finish_reason == "stop"

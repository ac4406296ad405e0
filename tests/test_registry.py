"""operators.registry: the one list of providers, framings and tool formats, and one wording per bad name.

mypy (strict, ``warn_unused_ignores``) checks this file: the ``type: ignore[arg-type]`` lines below fail the
type check if a typo in a provider or tool format name stops being a type error.
"""

from __future__ import annotations

import argparse
import re
from typing import get_args

import pytest

from operators.convert.anthropic import AnthropicConverter
from operators.convert.cohere import CohereConverter
from operators.convert.gemini import GeminiConverter
from operators.convert.openai_chat import OpenAIChatConverter
from operators.convert.openai_responses import OpenAIResponsesConverter
from operators.delimiters import FORMATS
from operators.registry import (
    FRAMINGS,
    PROVIDERS,
    TOOL_FORMATS,
    WIRE_FORMATS,
    RegisteredFormat,
    ToolFormat,
    converter_for,
    resolve_tool_format,
)
from pipeline.compose import process
from pipeline.errors import ConfigurationError
from pipeline.models import ToolInvocation
from pipeline.seeds.handlers import resolve_parser_name
from pipeline.testing import collect, sequential_call_ids
from tests.conftest import FIXTURES

UNKNOWN_FORMAT = "unknown tool format 'kimi-k3'; expected one of: none, "


def test_the_tool_format_literal_lists_every_built_in_delimiter_format_and_alias() -> None:
    assert TOOL_FORMATS[:2] == ("none", "api_tool_call")
    assert sorted(TOOL_FORMATS[2:]) == sorted(FORMATS)
    assert len(set(TOOL_FORMATS)) == len(TOOL_FORMATS)


def test_the_runtime_tuples_come_from_the_literals() -> None:
    assert WIRE_FORMATS == ("openai", "openai-responses", "anthropic", "gemini", "cohere")
    assert (*WIRE_FORMATS, "text") == PROVIDERS
    assert FRAMINGS == ("auto", "sse", "jsonl", "json", "eventstream")
    assert get_args(ToolFormat) == TOOL_FORMATS


@pytest.mark.parametrize(
    ("name", "converter"),
    [
        ("openai", OpenAIChatConverter),
        ("openai-responses", OpenAIResponsesConverter),
        ("anthropic", AnthropicConverter),
        ("gemini", GeminiConverter),
        ("cohere", CohereConverter),
    ],
)
def test_converter_for_makes_the_named_converter(name: str, converter: type) -> None:
    assert type(converter_for(name)) is converter
    assert type(converter_for(name, id_factory=sequential_call_ids)) is converter


@pytest.mark.parametrize("name", ["text", "auto", "OpenAI", None])
def test_converter_for_refuses_what_is_not_a_wire_format(name: object) -> None:
    expected = (
        f"unknown provider {name!r}; expected one of: openai, openai-responses, anthropic, gemini, cohere"
    )
    with pytest.raises(ConfigurationError) as caught:
        converter_for(name)
    assert str(caught.value) == expected


@pytest.mark.parametrize("name", [None, "none", "api_tool_call"])
def test_one_no_rewrite_rule(name: str | None) -> None:
    assert resolve_tool_format(name) is None


def test_formats_and_aliases_resolve_to_themselves() -> None:
    assert resolve_tool_format("kimi_k2") == "kimi_k2"
    assert resolve_tool_format("hermes2_pro") == "hermes2_pro"


@pytest.mark.parametrize("name", ["", "kimi-k3", "NONE", 3])
def test_an_unknown_tool_format_names_the_choices(name: object) -> None:
    with pytest.raises(
        ConfigurationError, match=re.escape(f"unknown tool format {name!r}; expected one of: none, ")
    ):
        resolve_tool_format(name)


def test_every_entry_point_words_an_unknown_tool_format_the_same() -> None:
    from pipeline.cli.main import _tool_format

    with pytest.raises(ConfigurationError) as from_process:
        process(b"", tool_format="kimi-k3")  # type: ignore[arg-type]  # the typo mypy catches
    with pytest.raises(argparse.ArgumentTypeError) as from_cli:
        _tool_format("kimi-k3")
    assert str(from_process.value).startswith(UNKNOWN_FORMAT)
    assert str(from_cli.value) == str(from_process.value)
    with pytest.raises(ConfigurationError) as from_seeds:
        resolve_parser_name("kimi-k3")
    assert str(from_seeds.value).startswith(
        "unknown stream parser 'kimi-k3'; expected one of: api_tool_call, pass_through, none, "
    )


def test_the_proxy_words_an_unknown_tool_format_the_same() -> None:
    pytest.importorskip("starlette")
    from pipeline.proxy.app import create_app

    with pytest.raises(ConfigurationError) as caught:
        create_app("http://127.0.0.1:9", tool_format="kimi-k3")
    assert str(caught.value).startswith(UNKNOWN_FORMAT)


def test_a_typo_in_a_provider_is_a_type_error_and_a_configuration_error() -> None:
    with pytest.raises(
        ConfigurationError, match=re.escape("unknown provider 'opnai'; expected one of: auto, openai,")
    ):
        process(b"", provider="opnai")  # type: ignore[arg-type]  # the typo mypy catches


@pytest.mark.anyio
async def test_a_registered_format_name_is_accepted_at_run_time() -> None:
    body = (FIXTURES / "raw_model_output" / "vllm-test_kimi-k2_text_then_3_parallel_tools.txt").read_text()

    async def invocations(tool_format: ToolFormat | RegisteredFormat) -> list[ToolInvocation]:
        events = process([body], provider="text", tool_format=tool_format, id_factory=sequential_call_ids)
        return [event for event in await collect(events) if isinstance(event, ToolInvocation)]

    named = await invocations(RegisteredFormat("kimi"))
    assert len(named) == 3
    assert named == await invocations("kimi_k2")

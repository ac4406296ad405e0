"""The one list of providers (wire formats), framings and tool formats, and how a name becomes a stage.

Names are ``Literal`` types, so that a typo (``provider="opnai"``) fails mypy, and the runtime tuples are
derived from them (`PROVIDERS`, `FRAMINGS`, `TOOL_FORMATS`). ``compose``, the CLI, the
proxy, the synchronous handlers and detection all read them here.

Tool formats: `ToolFormat` lists ``none`` (no rewriting) and its alias ``api_tool_call``, then every
built-in delimiter format and alias (a test keeps it equal to the delimiter registry). A format added with
``operators.delimiters.register_format`` is known at run time only: pass its name as
``RegisteredFormat("my_format")`` (a ``NewType`` of ``str``), so that a plain string is still a type error.

This module imports no stage at import time: `converter_for` and `resolve_tool_format` import the
stage they need when called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal, NewType, TypeAlias, get_args

from pipeline.errors import ConfigurationError

if TYPE_CHECKING:
    from pipeline.models import ChunkResponse
    from pipeline.stage import Core

__all__ = [
    "AUTO_FORMAT",
    "FRAMINGS",
    "NO_REWRITE",
    "PROVIDERS",
    "TOOL_FORMATS",
    "WIRE_FORMATS",
    "Framing",
    "FramingOption",
    "Provider",
    "ProviderOption",
    "RegisteredFormat",
    "ToolFormat",
    "WireFormat",
    "check_choice",
    "converter_for",
    "resolve_tool_format",
    "tool_format_choices",
]

WireFormat: TypeAlias = Literal[
    "openai", "openai-responses", "anthropic", "gemini", "cohere", "bedrock-converse", "ollama"
]
"""The wire formats with a converter. ``openai``: Chat Completions (OpenAI and compatible servers);
``openai-responses``: the Responses API; ``anthropic``: Messages; ``gemini``: ``generateContent`` (Gemini
API and Vertex AI) and the Gemini Interactions API; ``cohere``: Chat v2; ``bedrock-converse``: Amazon
Bedrock ``ConverseStream``; ``ollama``: Ollama's native ``/api/chat`` and ``/api/generate`` (one converter
reads both)."""

Provider: TypeAlias = Literal[WireFormat, "text"]
"""What a stream can be: a wire format, or ``text`` (plain model text, one content delta per piece)."""

ProviderOption: TypeAlias = Literal["auto", Provider]
"""The ``provider=`` option: a `Provider`, or ``auto`` (detected from the first event)."""

Framing: TypeAlias = Literal["sse", "jsonl", "json", "eventstream"]
"""How provider events are framed in a byte stream: server-sent events, one JSON payload a line, a JSON
array of payloads (Gemini without ``alt=sse``; also pretty-printed objects one after another), or AWS
event-stream binary frames (Bedrock: ``InvokeModelWithResponseStream`` and ``ConverseStream``)."""

FramingOption: TypeAlias = Literal["auto", Framing]
"""The ``framing=`` option: a `Framing`, or ``auto`` (detected from the first bytes)."""

ToolFormat: TypeAlias = Literal[
    "none",
    "api_tool_call",
    "auto",
    # built-in delimiter formats, then their aliases (kept equal to operators.delimiters.FORMATS by a test)
    "cohere_command",
    "deepseek_v3",
    "deepseek_v31",
    "deepseek_v32",
    "functiongemma",
    "gemma4",
    "gigachat3",
    "gigachat35",
    "glm45",
    "glm47",
    "granite",
    "granite_20b_fc",
    "harmony",
    "hermes",
    "internlm2",
    "jamba",
    "json",
    "kimi_k2",
    "lfm2",
    "llama3_json",
    "longcat",
    "minimax_m2",
    "mistral",
    "olmo3",
    "pythonic",
    "phi4_mini",
    "qwen3_coder",
    "sentinel",
    "xlam",
    "xml",
    "cohere",
    "command_a",
    "command_r",
    "hunyuan",
    "hunyuan_a13b",
    "kimi_k3",
    "minimax_m3",
    "seed_oss",
    "step3",
    "step3p5",
    "deepseek_dsml",
    "deepseek_r1",
    "deepseek_v3.1",
    "deepseek_v4",
    "deepseekv3",
    "deepseekv31",
    "deepseekv32",
    "gigachat",
    "gigachat3.5",
    "glm46",
    "glm4_moe",
    "glm5",
    "gpt-oss",
    "gpt_oss",
    "granite-20b-fc",
    "granite3",
    "granite4",
    "hermes2_pro",
    "intern_s1",
    "internlm",
    "kimi",
    "kimi_k25",
    "llama",
    "llama3",
    "llama4_pythonic",
    "longcat_flash",
    "minimax-m2",
    "mistral_v11",
    "openai_harmony",
    "phi4_mini_json",
    "qwen25",
    "qwen35",
    "qwen3_xml",
    "ernie45",
    "hy_v3",
    "hy_v4",
    "minimax-m3",
    "seed-oss",
    "step3.5",
]
"""The ``tool_format=`` names known to mypy: ``none`` and ``api_tool_call`` (no delimiter rewriting),
``auto`` (the format told from the model's markers), then the built-in delimiter formats and their
aliases."""

RegisteredFormat = NewType("RegisteredFormat", str)
"""The name of a delimiter format registered at run time (``register_format``), which `ToolFormat`
cannot list: ``process(..., tool_format=RegisteredFormat("my_format"))``."""

WIRE_FORMATS: Final[tuple[WireFormat, ...]] = get_args(WireFormat)
PROVIDERS: Final[tuple[Provider, ...]] = get_args(Provider)
"""The wire formats `pipeline.process` knows (``openai`` also covers OpenAI-compatible servers)."""
FRAMINGS: Final[tuple[FramingOption, ...]] = get_args(FramingOption)
"""The ``framing=`` values of byte sources."""
TOOL_FORMATS: Final[tuple[ToolFormat, ...]] = get_args(ToolFormat)

NO_REWRITE: Final = "none"
"""The tool format that means: no delimiter rewriting, tool calls come structured from the provider."""

AUTO_FORMAT: Final = "auto"
"""The tool format told from the model's own markers, per answer."""

_NO_REWRITE_NAMES: Final = frozenset({None, NO_REWRITE, "api_tool_call"})
"""The one "no rewrite" rule: ``None``, ``"none"`` and the synchronous handlers' ``"api_tool_call"``."""


def check_choice(option: str, value: object, choices: tuple[str, ...] | list[str]) -> str:
    """``value`` if it is one of ``choices``.

    Args:
        option: the option's name, for the message.
        value: what the caller gave.
        choices: the accepted values.

    Returns:
        ``value``, as a string.

    Raises:
        ConfigurationError: ``value`` is not one of ``choices`` (the message lists them).
    """
    if isinstance(value, str) and value in choices:
        return value
    raise ConfigurationError(f"unknown {option} {value!r}; expected one of: {', '.join(choices)}")


def tool_format_choices() -> list[str]:
    """What a ``tool_format`` option accepts: ``none`` and ``auto`` first, then every delimiter format
    (and alias), including those registered at run time."""
    from operators.delimiters import FORMATS

    return [NO_REWRITE, AUTO_FORMAT, *sorted(FORMATS)]


def resolve_tool_format(name: object) -> str | None:
    """The delimiter format to rewrite with (``"auto"``: told from the model's markers), or ``None`` for
    no rewriting (``None``, ``"none"``, ``"api_tool_call"``); a `ConfigurationError` listing the
    choices for anything else."""
    if name in _NO_REWRITE_NAMES:
        return None
    from operators.delimiters import FORMATS

    if isinstance(name, str) and (name in FORMATS or name == AUTO_FORMAT):
        return name
    return check_choice("tool format", name, tool_format_choices())


def converter_for(
    name: object, *, id_factory: Callable[[int], str] | None = None, choice: int = 0
) -> Core[Any, ChunkResponse]:
    """A new converter core for the wire format ``name`` (one of `WIRE_FORMATS`).

    Args:
        name: the wire format.
        id_factory: makes the ids of calls sent without one.
        choice: the OpenAI Chat Completions choice to follow (other formats have one).

    Raises:
        ConfigurationError: ``name`` is not a wire format (the message names the choices).
    """
    options: dict[str, Any] = {} if id_factory is None else {"id_factory": id_factory}
    match check_choice("provider", name, WIRE_FORMATS):
        case "openai":
            from operators.convert.openai_chat import OpenAIChatConverter

            return OpenAIChatConverter(**options, choice=choice)
        case "openai-responses":
            from operators.convert.openai_responses import OpenAIResponsesConverter

            return OpenAIResponsesConverter(**options)
        case "anthropic":
            from operators.convert.anthropic import AnthropicConverter

            return AnthropicConverter(**options)
        case "gemini":
            from operators.convert.gemini import GeminiConverter

            return GeminiConverter(**options)
        case "cohere":
            from operators.convert.cohere import CohereConverter

            return CohereConverter(**options)
        case "bedrock-converse":
            from operators.convert.bedrock_converse import BedrockConverseConverter

            return BedrockConverseConverter(**options)
        case _:
            from operators.convert.ollama import OllamaConverter

            return OllamaConverter(**options)

"""The one list of providers (wire formats), framings and tool formats, and how a name becomes a stage.

Names are ``Literal`` types, so that a typo (``provider="opnai"``) fails mypy, and the runtime tuples are
derived from them (:data:`PROVIDERS`, :data:`FRAMINGS`, :data:`TOOL_FORMATS`). ``compose``, the CLI, the
proxy, the seeds' handlers and detection all read them here.

Tool formats: :data:`ToolFormat` lists ``none`` (no rewriting) and its alias ``api_tool_call``, then every
built-in delimiter format and alias (a test keeps it equal to the delimiter registry). A format added with
``operators.delimiters.register_format`` is known at run time only: pass its name as
``RegisteredFormat("my_format")`` (a ``NewType`` of ``str``), so that a plain string is still a type error.

This module imports no stage at import time: :func:`converter_for` and :func:`resolve_tool_format` import the
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

WireFormat: TypeAlias = Literal["openai", "openai-responses", "anthropic", "gemini", "cohere"]
"""The wire formats with a converter. ``openai``: Chat Completions (OpenAI and compatible servers);
``openai-responses``: the Responses API; ``anthropic``: Messages; ``gemini``: ``generateContent`` (Gemini
API and Vertex AI) and the Gemini Interactions API; ``cohere``: Chat v2."""

Provider: TypeAlias = Literal[WireFormat, "text"]
"""What a stream can be: a wire format, or ``text`` (plain model text, one content delta per piece)."""

ProviderOption: TypeAlias = Literal["auto", Provider]
"""The ``provider=`` option: a :data:`Provider`, or ``auto`` (detected from the first event)."""

Framing: TypeAlias = Literal["sse", "jsonl", "json", "eventstream"]
"""How provider events are framed in a byte stream: server-sent events, one JSON payload a line, a JSON
array of payloads (Gemini without ``alt=sse``; also pretty-printed objects one after another), or AWS
event-stream binary frames (Bedrock)."""

FramingOption: TypeAlias = Literal["auto", Framing]
"""The ``framing=`` option: a :data:`Framing`, or ``auto`` (detected from the first bytes)."""

ToolFormat: TypeAlias = Literal[
    "none",
    "api_tool_call",
    # built-in delimiter formats, then their aliases (kept equal to operators.delimiters.FORMATS by a test)
    "deepseek_v3",
    "deepseek_v31",
    "deepseek_v32",
    "glm45",
    "glm47",
    "harmony",
    "hermes",
    "json",
    "kimi_k2",
    "llama3_json",
    "minimax_m2",
    "mistral",
    "qwen3_coder",
    "sentinel",
    "xml",
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
    "glm46",
    "glm4_moe",
    "glm5",
    "gpt-oss",
    "gpt_oss",
    "hermes2_pro",
    "kimi",
    "kimi_k25",
    "llama",
    "llama3",
    "minimax-m2",
    "mistral_v11",
    "openai_harmony",
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
"""The ``tool_format=`` names known to mypy: ``none`` and ``api_tool_call`` (no delimiter rewriting), then the
built-in delimiter formats and their aliases."""

RegisteredFormat = NewType("RegisteredFormat", str)
"""The name of a delimiter format registered at run time (``register_format``), which :data:`ToolFormat`
cannot list: ``process(..., tool_format=RegisteredFormat("my_format"))``."""

WIRE_FORMATS: Final[tuple[WireFormat, ...]] = get_args(WireFormat)
PROVIDERS: Final[tuple[Provider, ...]] = get_args(Provider)
"""The wire formats :func:`pipeline.process` knows (``openai`` also covers OpenAI-compatible servers)."""
FRAMINGS: Final[tuple[FramingOption, ...]] = get_args(FramingOption)
"""The ``framing=`` values of byte sources."""
TOOL_FORMATS: Final[tuple[ToolFormat, ...]] = get_args(ToolFormat)

NO_REWRITE: Final = "none"
"""The tool format that means: no delimiter rewriting, tool calls come structured from the provider."""

_NO_REWRITE_NAMES: Final = frozenset({None, NO_REWRITE, "api_tool_call"})
"""The one "no rewrite" rule: ``None``, ``"none"`` and the seeds' ``"api_tool_call"``."""


def check_choice(option: str, value: object, choices: tuple[str, ...] | list[str]) -> str:
    """``value`` if it is one of ``choices``; else a :class:`ConfigurationError` listing them."""
    if isinstance(value, str) and value in choices:
        return value
    raise ConfigurationError(f"unknown {option} {value!r}; expected one of: {', '.join(choices)}")


def tool_format_choices() -> list[str]:
    """What a ``tool_format`` option accepts: ``none`` first, then every delimiter format (and alias),
    including those registered at run time."""
    from operators.delimiters import FORMATS

    return [NO_REWRITE, *sorted(FORMATS)]


def resolve_tool_format(name: object) -> str | None:
    """The delimiter format to rewrite with, or ``None`` for no rewriting (``None``, ``"none"``,
    ``"api_tool_call"``); a :class:`ConfigurationError` listing the choices for anything else."""
    if name in _NO_REWRITE_NAMES:
        return None
    from operators.delimiters import FORMATS

    if isinstance(name, str) and name in FORMATS:
        return name
    return check_choice("tool format", name, tool_format_choices())


def converter_for(
    name: object, *, id_factory: Callable[[int], str] | None = None, choice: int = 0
) -> Core[Any, ChunkResponse]:
    """A new converter core for the wire format ``name`` (one of :data:`WIRE_FORMATS`).

    ``id_factory`` makes the ids of calls sent without one; ``choice`` is the OpenAI Chat Completions
    choice to follow (other formats have one). Anything else than a wire format is a
    :class:`ConfigurationError` naming the choices."""
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
        case _:
            from operators.convert.cohere import CohereConverter

            return CohereConverter(**options)

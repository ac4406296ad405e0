"""The events of both Gemini APIs as msgspec Structs: what the converters read, from bytes or from dicts.

``generateContent`` chunks (`GenerateContentResponse`) have camelCase names on the wire; each part
kind is a key of its own with a fixed type, so the schema types them and msgspec checks them. Interactions
API events (`InteractionEvent`) have snake_case names and one shape for every ``event_type``; the
fields whose type depends on the step or delta type stay loose (``Any``) and the converter checks them
where it reads them. Unknown fields are ignored, and a part or event of an unknown kind decodes with every
known field unset, so that it gives nothing (forward compatibility). An enum the converter reads is a name
or a number (`EnumValue`): clients may ask for numbers
(``$alt=json;enum-encoding=int``); the converter reads either as the name.
"""

from __future__ import annotations

from typing import Any

import msgspec

from operators.convert.gemini._enums import EnumValue

__all__ = [
    "Candidate",
    "GenerateContentResponse",
    "InteractionEvent",
    "Part",
    "PartialArg",
    "UsageMetadata",
]


class _Camel(msgspec.Struct, rename="camel", gc=False):
    """A Struct whose fields are camelCase on the wire (``thought_signature`` is ``thoughtSignature``)."""


class PartialArg(_Camel):
    """One value of a streamed call's arguments (Vertex ``partialArgs``), given by its JSON path.

    The value fields stay loose: which one is present says the value's kind, and the converter checks it."""

    json_path: str | None = None
    string_value: Any = msgspec.UNSET
    number_value: Any = msgspec.UNSET
    bool_value: Any = msgspec.UNSET
    null_value: Any = msgspec.UNSET
    will_continue: bool = False


class FunctionCall(_Camel):
    """A ``functionCall`` part: a whole call, or a piece of a streamed one (``willContinue``)."""

    name: str | None = None
    args: dict[str, Any] | None = None
    id: str | None = None
    will_continue: bool = False
    partial_args: list[PartialArg] | None = None


class ExecutableCode(_Camel):
    """Code the code execution tool runs on the server."""

    code: str | None = None
    language: EnumValue | None = None
    id: str | None = None


class CodeExecutionResult(_Camel):
    """What the code execution tool returned."""

    outcome: EnumValue | None = None
    output: str | None = None
    id: str | None = None


class ServerToolCall(_Camel):
    """A ``toolCall`` part: a built-in tool the server runs (Google Search, URL context, Maps, ...)."""

    id: str | None = None
    tool_type: EnumValue | None = None
    args: dict[str, Any] | None = None


class ServerToolResponse(_Camel):
    """A ``toolResponse`` part: what a built-in tool returned."""

    id: str | None = None
    tool_type: EnumValue | None = None
    response: dict[str, Any] | None = None


class InlineData(_Camel):
    """Media sent inline, base64 encoded."""

    mime_type: str | None = None
    data: str | None = None


class FileData(_Camel):
    """Media sent as a URI."""

    mime_type: str | None = None
    file_uri: str | None = None


class Part(_Camel):
    """One part of a candidate's content; the key that is set says its kind."""

    text: str | None = None
    thought: bool = False
    thought_signature: str | None = None
    function_call: FunctionCall | None = None
    executable_code: ExecutableCode | None = None
    code_execution_result: CodeExecutionResult | None = None
    tool_call: ServerToolCall | None = None
    tool_response: ServerToolResponse | None = None
    inline_data: InlineData | None = None
    file_data: FileData | None = None


class Content(_Camel):
    parts: list[Part] | None = None


class GroundingMetadata(_Camel):
    """Search grounding: the sources (``groundingChunks``) and the supports of the text that cite them.

    Both stay as sent (the citations pass them on whole)."""

    grounding_chunks: list[Any] | None = None
    grounding_supports: list[dict[str, Any]] | None = None


class CitationMetadata(_Camel):
    citations: list[dict[str, Any]] | None = None


class Candidate(_Camel):
    """One candidate response; only candidate 0 is converted (an absent ``index`` is 0)."""

    index: int = 0
    content: Content | None = None
    finish_reason: EnumValue | None = None
    finish_message: str | None = None
    grounding_metadata: GroundingMetadata | None = None
    citation_metadata: CitationMetadata | None = None


class PromptFeedback(_Camel):
    """Why the prompt was blocked, if it was."""

    block_reason: EnumValue | None = None
    block_reason_message: str | None = None


class UsageMetadata(_Camel):
    prompt_token_count: int | None = None
    candidates_token_count: int | None = None
    thoughts_token_count: int | None = None
    cached_content_token_count: int | None = None
    total_token_count: int | None = None


class GenerateContentResponse(_Camel):
    """One ``generateContent`` chunk (a whole response, or one piece of ``streamGenerateContent``).

    ``error`` is set on an in-band error instead of everything else."""

    candidates: list[Candidate] | None = None
    prompt_feedback: PromptFeedback | None = None
    usage_metadata: UsageMetadata | None = None
    model_version: str | None = None
    response_id: str | None = None
    error: Any = None


class InteractionStep(msgspec.Struct, gc=False):
    """The ``step`` of a ``step.start``: a thought, text or function call (other types give nothing)."""

    type: Any = None
    text: Any = None
    name: Any = None
    id: Any = None
    arguments: Any = None
    signature: Any = None


class StepDelta(msgspec.Struct, gc=False):
    """The ``delta`` of a ``step.delta``; which fields it has depends on its ``type``."""

    type: Any = None
    text: Any = None
    content: Any = None
    signature: Any = None
    arguments: Any = None


class InteractionUsage(msgspec.Struct, gc=False):
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    total_thought_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_tokens: int | None = None


class Interaction(msgspec.Struct, gc=False):
    """The interaction of ``interaction.created`` / ``interaction.completed``."""

    id: Any = None
    model: Any = None
    service_tier: Any = None
    status: Any = None
    usage: InteractionUsage | None = None


class InteractionEvent(msgspec.Struct, gc=False):
    """One Interactions API event; ``content`` is the older name of ``step``."""

    event_type: str | None = None
    index: Any = None
    step: InteractionStep | None = None
    content: InteractionStep | None = None
    delta: StepDelta | None = None
    interaction: Interaction | None = None
    error: Any = None


class APIProbe(msgspec.Struct, gc=False):
    """Just enough of a first event to tell the APIs apart: Interactions API events have an ``event_type``."""

    event_type: Any = None

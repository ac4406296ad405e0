"""The Gemini ``generateContent`` converter: ``streamGenerateContent`` chunks (``GenerateContentResponse``,
as framed bytes or as dicts) -> chunks.

Every chunk carries ``candidates[0].content.parts``; a part is text (``thought: true`` for reasoning), a
``functionCall``, inline or file media, or a call the provider runs itself. A ``thoughtSignature`` on a
thought part is the signature of the reasoning (``reasoning_signature``); on an ordinary text part it is
bound to that text (``content_signature``: the text segment's END metadata, never an empty reasoning
segment); on a ``functionCall`` part it belongs to that call. Whichever part it came on is where the next
turn must send it back.

Calls the provider runs itself become ``server`` calls, finished as they arrive, and what they return a
`ToolResult`:

- ``executableCode {language, code, id?}`` -> a call ``code_execution`` with the arguments
  ``{"language", "code"}``; ``codeExecutionResult {outcome, output, id?}`` -> its result (``content``
  ``{"outcome", "output"}``, ``is_error`` unless the outcome is ``OUTCOME_OK``), paired by ``id`` or else
  with the last call before it (one call may have several results).
- ``toolCall {id, toolType, args}`` (Google Search, URL context, file search, Maps) -> a call named after
  its ``toolType`` in lower case (``file_search``); ``toolResponse {id, toolType, response}`` -> its result.

Citations: each ``groundingMetadata.groundingSupports`` entry becomes a citation ``{"type":
"grounding_support", "segment", "groundingChunkIndices", "confidenceScores", "sources"}`` (``sources``: the
``groundingChunks`` it points to), each ``citationMetadata.citations`` entry a citation ``{"type":
"citation", ...}``, in a chunk after the parts of their event (so at the end of the text they cite). A
chunk repeating metadata already given gives nothing new.

A part that repeats a whole call (function, code execution or built-in tool) already given in this
response to the letter (same ``id``, name and arguments) is that call sent again and is left out, so the
tool runs once; a call that reuses an id with a different name or arguments is a call of its own, at the
next position (the segment emitter gives it the id ``<id>_2``).

Values from google-genai objects are normalised to what the wire JSON holds: enums (``FinishReason``,
``Language``, ...) to their plain words, and an integral ``numberValue`` (which the SDK types ``float``) to
an integer, so that SDK objects and raw bytes give the same events. Each chunk is decoded into the Structs
of ``_schema.py``: a field of the wrong type (a candidate ``index`` that is not an integer, a ``thought`` or
``willContinue`` that is not a boolean, a call ``id`` that is not a string, ...) raises
`ConverterError` naming the event and the field, rather than dropping or misplacing
what it carries. An in-band error (``{"error": {...}}``) raises `ProviderError`.

Function calls come in two shapes:

- **whole** (the default): ``{"name", "args", "id"?}`` in one part. It becomes one finished
  `ToolCallDelta` whose arguments text is ``args`` encoded as JSON.
- **streamed** (Vertex ``streamFunctionCallArguments``, Gemini 3): a part ``{"name", "willContinue": true}``
  opens the call, parts ``{"partialArgs": [...], "willContinue": true}`` add values by JSON path, and the
  first part without ``willContinue`` (usually ``{}``; in some recordings the last ``partialArgs`` part)
  ends it. `PartialArgsWriter` turns the values into JSON text as they arrive, string values
  streamed piece by piece, so the arguments stream like any other provider's.

A streamed call still open when the response ends (its closing part never came) is left unfinished, its
JSON unclosed: the later stages report it as truncated rather than guess. A new call starting while one
is open ends the open one first, since the server streams calls one at a time.

Only candidate 0 (``index`` 0, or no index) is converted.

Memory kept per response: the fingerprint (kind, name, arguments text) of each call with an id, the JSON
text of each citation given, and the latest ``groundingChunks``: all proportional to the calls and
citations the response has, never to its text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from operators.convert._base import (
    PAYLOAD_ERRORS,
    EventDecoder,
    IdFactory,
    check_utf8,
    new_call_id,
    payload_error,
)
from operators.convert.gemini._calls import ResponseCalls
from operators.convert.gemini._chunks import ChunkBuilder
from operators.convert.gemini._common import converter_error, enum_name, plain, provider_error, token_usage
from operators.convert.gemini._enums import BLOCK_REASONS, FINISH_REASONS, LANGUAGES, OUTCOMES, EnumValue
from operators.convert.gemini._partial_args import json_text
from operators.convert.gemini._schema import (
    Candidate,
    CodeExecutionResult,
    ExecutableCode,
    GenerateContentResponse,
    Part,
    PromptFeedback,
    ServerToolCall,
    ServerToolResponse,
    UsageMetadata,
)
from pipeline.errors import ConverterError
from pipeline.models import ChunkResponse, Payload, TokenUsage, ToolResult

__all__ = ["GenerateContentConverter", "normalize_gemini_finish_reason"]

_CONTENT_FILTER_REASONS: Final = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
)

_MEDIA_KINDS: Final = ("image", "audio", "video")

_DECODER: Final = EventDecoder(GenerateContentResponse)
_DECODE_BYTES: Final = _DECODER.bytes_decoder.decode


def normalize_gemini_finish_reason(finish_reason: str, *, made_function_call: bool) -> str:
    """Gemini's ``finishReason`` in OpenAI's words.

    Args:
        finish_reason: the candidate's ``finishReason``.
        made_function_call: the candidate called a function: ``STOP`` then means ``tool_calls``.

    Returns:
        ``stop``, ``length``, ``tool_calls``, ``content_filter``, or Gemini's reason in lower case.
    """
    if finish_reason == "STOP":
        return "tool_calls" if made_function_call else "stop"
    if finish_reason == "MAX_TOKENS":
        return "length"
    if finish_reason in _CONTENT_FILTER_REASONS:
        return "content_filter"
    return finish_reason.lower()


class GenerateContentConverter:
    """Sans-IO core: one ``GenerateContentResponse`` chunk (framed bytes or a dict) in, the chunks it
    carries out.

    ``id_factory`` names the calls Gemini sends without an ``id`` (most models before Gemini 3).
    Response metadata is given when it changes, not on every chunk that repeats it. The usage, which
    Gemini repeats on every chunk with its running counts, is given once, as OpenAI's is: with the chunk
    that ends the response (the latest usage with counts), or by `finish` if the input ends first; a
    usage that changes after the end is given again.
    """

    __slots__ = (
        "_builder",
        "_calls",
        "_cited",
        "_event_number",
        "_given_usage_metadata",
        "_grounding_chunks",
        "_last_usage",
        "_model",
        "_response_id",
        "_usage_metadata",
    )

    def __init__(self, *, id_factory: IdFactory | None = None) -> None:
        self._event_number = -1
        self._builder = ChunkBuilder()
        self._calls = ResponseCalls(id_factory or new_call_id)
        self._usage_metadata: UsageMetadata | None = None
        """The latest ``usageMetadata`` with counts: given when the response ends."""
        self._given_usage_metadata: UsageMetadata | None = None
        self._last_usage: TokenUsage | None = None
        self._response_id: str | None = None
        self._model: str | None = None
        self._grounding_chunks: Sequence[Any] = ()
        """The latest ``groundingChunks``: the sources grounding supports point into."""
        self._cited: set[str] = set()
        """The JSON text of every citation given, so that a chunk repeating them gives them once."""

    def feed(self, item: Payload | Mapping[str, Any], /) -> list[ChunkResponse]:
        """Convert one chunk; a chunk that repeats only what is known gives nothing."""
        number = self._event_number = self._event_number + 1
        if type(item) is Payload:  # the decode of `EventDecoder.decode`, without a call between
            data = item.data
            try:
                event = _DECODE_BYTES(data)
            except PAYLOAD_ERRORS as error:
                raise payload_error(error, item, number) from None
            if not data.isascii():
                check_utf8(data, item.offset)
        else:
            event = _DECODER.decode(item, number)
        if event.error is not None:
            raise provider_error(item, event.error, number)
        usage = event.usage_metadata
        if usage is not None and (usage.prompt_token_count is not None or _has_counts(usage)):
            self._usage_metadata = usage
        if event.response_id != self._response_id or event.model_version != self._model:
            return self._gathered(event, self._new_metadata(event))
        plain = self._plain(event)
        return self._gathered(event, None) if plain is None else plain

    def _plain(self, event: GenerateContentResponse) -> list[ChunkResponse] | None:
        """The chunk of an event whose one part, of candidate 0, is text or a thought, with nothing else
        but the usage (nearly every event); ``None`` for any other event, which `_gathered` gathers into
        the same chunks."""
        candidates = event.candidates
        if not candidates or len(candidates) != 1 or event.prompt_feedback is not None:
            return None
        candidate = candidates[0]
        content = candidate.content
        if (
            content is None
            or candidate.index != 0
            or candidate.finish_reason is not None
            or candidate.grounding_metadata is not None
            or candidate.citation_metadata is not None
        ):
            return None
        parts = content.parts
        if not parts or len(parts) != 1:
            return None
        part = parts[0]
        text = part.text
        if not text or part.function_call is not None or part.thought_signature is not None:
            return None
        return [ChunkResponse(reasoning=text)] if part.thought else [ChunkResponse(content=text)]

    def _gathered(
        self, event: GenerateContentResponse, metadata: dict[str, Any] | None
    ) -> list[ChunkResponse]:
        """The chunks of an event's candidate 0, its finish and a blocked prompt, with ``metadata``."""
        finish_reason = None
        candidates = event.candidates
        if candidates:
            candidate = candidates[0] if candidates[0].index == 0 else _candidate_zero(candidates)
            if candidate is not None:
                self._candidate(candidate)
                if candidate.finish_reason is not None:
                    finish_reason, metadata = self._finished(candidate, metadata)
        feedback = event.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            finish_reason, metadata = self._blocked(feedback, metadata)
        return self._builder.take(
            None if finish_reason is None else self._new_usage(), finish_reason, metadata
        )

    def finish(self) -> list[ChunkResponse]:
        """The usage, if the response ended without a finish reason after it (or it changed since);
        a streamed call never closed stays unfinished on purpose."""
        usage = self._new_usage()
        return [] if usage is None else [ChunkResponse(usage=usage)]

    def _candidate(self, candidate: Candidate) -> None:
        """Candidate 0's parts, then its citations, into the builder; what a failing part's event
        gathered is dropped with it."""
        builder = self._builder
        try:
            content = candidate.content
            if content is not None and content.parts:
                for number, part in enumerate(content.parts):
                    text = part.text
                    if text is None or part.function_call is not None:
                        self._other_part(part, number)
                    elif part.thought:
                        builder.reasoning(text, part.thought_signature)
                    else:
                        builder.content(text, part.thought_signature)
            if candidate.grounding_metadata is not None or candidate.citation_metadata is not None:
                citations = self._citations(candidate)
                if citations:
                    builder.citations(citations)
        except ConverterError:
            self._builder = ChunkBuilder()
            raise

    def _finished(self, candidate: Candidate, metadata: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        """Candidate 0's finish reason in OpenAI's words, and the metadata with the provider's own."""
        assert candidate.finish_reason is not None
        raw_reason = enum_name(candidate.finish_reason, FINISH_REASONS)
        metadata = {} if metadata is None else metadata
        metadata["stop_reason"] = raw_reason
        if candidate.finish_message is not None:
            metadata["finish_message"] = plain(candidate.finish_message)
        made_call = self._calls.made_function_call
        return normalize_gemini_finish_reason(raw_reason, made_function_call=made_call), metadata

    def _blocked(
        self, feedback: PromptFeedback, metadata: dict[str, Any] | None
    ) -> tuple[str, dict[str, Any]]:
        """A blocked prompt ends the response: ``content_filter``, the reason in metadata."""
        assert feedback.block_reason is not None
        metadata = {} if metadata is None else metadata
        metadata["stop_reason"] = enum_name(feedback.block_reason, BLOCK_REASONS)
        if feedback.block_reason_message is not None:
            metadata["block_reason_message"] = plain(feedback.block_reason_message)
        return "content_filter", metadata

    # parts

    def _other_part(self, part: Part, number: int) -> None:
        """A part that is not text: a function call, a call the server runs, its result, or media.

        A ``functionResponse`` (the client's own answer, echoed) and parts of kinds this version does not
        know give nothing but their signature."""
        signature = part.thought_signature
        where = f"candidates[0].content.parts[{number}]"
        if part.function_call is not None:
            where_call = (self._event_number, f"{where}.functionCall")
            self._calls.function_call(self._builder, part.function_call, signature, where_call)
        elif part.executable_code is not None:
            self._executable_code(part.executable_code, signature, f"{where}.executableCode")
        elif part.code_execution_result is not None:
            self._code_execution_result(part.code_execution_result, signature, f"{where}.codeExecutionResult")
        elif part.tool_call is not None:
            self._tool_call(part.tool_call, signature)
        elif part.tool_response is not None:
            self._tool_response(part.tool_response, signature, f"{where}.toolResponse")
        else:
            builder = self._builder
            if signature:
                builder.signature(signature)
            if part.inline_data is not None:
                _add_media(builder, part.inline_data.mime_type, part.inline_data.data, inline=True)
            if part.file_data is not None:
                _add_media(builder, part.file_data.mime_type, part.file_data.file_uri, inline=False)

    def _executable_code(self, part: ExecutableCode, signature: str | None, where: str) -> None:
        """``executableCode`` (the code execution tool): a server call ``code_execution``."""
        if part.code is None:
            raise self._error(f"{where}.code", "is missing")
        code = plain(part.code)
        arguments = (
            {"code": code}
            if part.language is None
            else {"language": enum_name(part.language, LANGUAGES), "code": code}
        )
        self._calls.server_call(self._builder, part.id, "code_execution", arguments, signature)

    def _code_execution_result(self, part: CodeExecutionResult, signature: str | None, where: str) -> None:
        """``codeExecutionResult``: the result of the code execution call it follows (or names by id)."""
        outcome = None if part.outcome is None else enum_name(part.outcome, OUTCOMES)
        content: dict[str, Any] = {}
        if outcome is not None:
            content["outcome"] = outcome
        if part.output is not None:
            content["output"] = plain(part.output)
        if signature:
            self._builder.signature(signature)
        self._builder.tool_result(
            ToolResult(
                call_id=self._result_call_id(part.id, where),
                name="code_execution",
                content=content,
                is_error=outcome not in (None, "OUTCOME_OK"),
                result_type="code_execution_result",
            )
        )

    def _tool_call(self, part: ServerToolCall, signature: str | None) -> None:
        """``toolCall``: a built-in tool the server runs (Google Search, URL context, file search, Maps);
        a server call named after its ``toolType`` in lower case (``file_search``)."""
        name = _tool_name(part.tool_type)
        self._calls.server_call(self._builder, part.id, name, part.args or {}, signature)

    def _tool_response(self, part: ServerToolResponse, signature: str | None, where: str) -> None:
        """``toolResponse``: what a built-in tool returned, as sent."""
        if signature:
            self._builder.signature(signature)
        self._builder.tool_result(
            ToolResult(
                call_id=self._result_call_id(part.id, where),
                name=_tool_name(part.tool_type),
                content=part.response,
                result_type="tool_response",
            )
        )

    def _result_call_id(self, call_id: str | None, where: str) -> str:
        found = call_id or self._calls.last_server_call
        if found is None:
            raise self._error(where, "has no id and follows no executableCode or toolCall part")
        return found

    # citations

    def _citations(self, candidate: Candidate) -> list[Mapping[str, Any]]:
        """The citations a candidate adds: one per grounding support (with the sources it points to), one
        per ``citationMetadata`` citation. Each is given once, however many chunks repeat it."""
        found: list[Mapping[str, Any]] = []
        grounding = candidate.grounding_metadata
        if grounding is not None:
            if grounding.grounding_chunks is not None:
                self._grounding_chunks = grounding.grounding_chunks
            for number, support in enumerate(grounding.grounding_supports or ()):
                cited = self._cited_sources(support, number)
                self._add_citation(found, {"type": "grounding_support", **support, "sources": cited})
        metadata = candidate.citation_metadata
        if metadata is not None:
            for citation in metadata.citations or ():
                self._add_citation(found, {"type": "citation", **citation})
        return found

    def _cited_sources(self, support: Mapping[str, Any], number: int) -> list[Any]:
        """The ``groundingChunks`` a grounding support points to (indices out of range are left out)."""
        indices = support.get("groundingChunkIndices")
        if indices is None:
            return []
        if not isinstance(indices, Sequence) or isinstance(indices, str):
            where = f"candidates[0].groundingMetadata.groundingSupports[{number}].groundingChunkIndices"
            raise self._error(where, "is not a list")
        sources = self._grounding_chunks
        return [
            sources[index]
            for index in indices
            if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(sources)
        ]

    def _add_citation(self, found: list[Mapping[str, Any]], citation: Mapping[str, Any]) -> None:
        key = json_text(citation)
        if key not in self._cited:
            self._cited.add(key)
            found.append(citation)

    # response-level fields

    def _new_usage(self) -> TokenUsage | None:
        """The usage of the latest ``usageMetadata`` with counts, if it differs from the last one given."""
        usage_metadata = self._usage_metadata
        if usage_metadata is None or usage_metadata is self._given_usage_metadata:
            return None
        self._given_usage_metadata = usage_metadata
        usage = token_usage(
            usage_metadata.prompt_token_count,
            usage_metadata.candidates_token_count,
            usage_metadata.thoughts_token_count,
            usage_metadata.cached_content_token_count,
            usage_metadata.total_token_count,
        )
        if usage == self._last_usage:
            return None
        self._last_usage = usage
        return usage

    def _new_metadata(self, event: GenerateContentResponse) -> dict[str, Any] | None:
        """The response id and model when they are new."""
        metadata: dict[str, Any] = {}
        if event.response_id is not None and event.response_id != self._response_id:
            metadata["id"] = self._response_id = event.response_id
        if event.model_version is not None and event.model_version != self._model:
            metadata["model"] = self._model = event.model_version
        return metadata or None

    def _error(self, where: str, problem: str) -> ConverterError:
        return converter_error(self._event_number, where, problem)


def _has_counts(usage: UsageMetadata) -> bool:
    """Whether ``usageMetadata`` has a count (Vertex sends only ``trafficType`` on most streamed chunks)."""
    return (
        usage.prompt_token_count is not None
        or usage.candidates_token_count is not None
        or usage.thoughts_token_count is not None
        or usage.cached_content_token_count is not None
        or usage.total_token_count is not None
    )


def _candidate_zero(candidates: list[Candidate]) -> Candidate | None:
    """Candidate 0: the one whose ``index`` is 0 (an absent index is 0, as protobuf JSON omits it)."""
    for candidate in candidates:
        if candidate.index == 0:
            return candidate
    return None


def _tool_name(tool_type: EnumValue | None) -> str:
    """A built-in tool's call name: its ``toolType`` in lower case (a number, which no table names yet,
    as its digits)."""
    if tool_type is None or tool_type == "":
        return "server_tool"
    return enum_name(tool_type, {}).lower()


def _add_media(builder: ChunkBuilder, mime_type: str | None, data: str | None, *, inline: bool) -> None:
    """Media as a URL (``data:`` for inline data, else the file's URI), if it is an image, audio or video."""
    if mime_type is None or data is None:
        return
    kind = mime_type.partition("/")[0]
    url = f"data:{mime_type};base64,{data}" if inline else data
    if kind in _MEDIA_KINDS and url:
        builder.media(kind, url)

"""The Gemini ``generateContent`` converter: ``streamGenerateContent`` chunks (``GenerateContentResponse``
dicts) -> chunks.

Every chunk carries ``candidates[0].content.parts``; a part is text (``thought: true`` for reasoning), a
``functionCall``, inline or file media, or a call the provider runs itself. A ``thoughtSignature`` on a
thought part is the signature of the reasoning (``reasoning_signature``); on an ordinary text part it is
bound to that text (``content_signature``: the text segment's END metadata, never an empty reasoning
segment); on a ``functionCall`` part it belongs to that call. Whichever part it came on is where the next
turn must send it back.

Calls the provider runs itself become ``server`` calls, finished as they arrive, and what they return a
:class:`~pipeline.models.ToolResult`:

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
an integer, so that SDK objects and raw bytes give the same events. A field of the wrong type (a candidate
``index`` that is not an integer, a ``thought`` or ``willContinue`` that is not a boolean, a call ``id``
that is not a string, ...) raises :class:`~pipeline.errors.ConverterError` naming it, rather than dropping
or misplacing what it carries.

Function calls come in two shapes:

- **whole** (the default): ``{"name", "args", "id"?}`` in one part. It becomes one finished
  :class:`ToolCallDelta` whose arguments text is ``args`` encoded as JSON.
- **streamed** (Vertex ``streamFunctionCallArguments``, Gemini 3): a part ``{"name", "willContinue": true}``
  opens the call, parts ``{"partialArgs": [...], "willContinue": true}`` add values by JSON path, and the
  first part without ``willContinue`` (usually ``{}``; in some recordings the last ``partialArgs`` part)
  ends it. :class:`PartialArgsWriter` turns the values into JSON text as they arrive, string values
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

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from operators.convert._base import IdFactory, is_mapping, new_call_id
from operators.convert.gemini._common import converter_error, plain, provider_error, token_usage
from operators.convert.gemini._partial_args import (
    PartialArgsWriter,
    PartialValue,
    json_text,
    parse_json_path,
    plain_number,
)
from pipeline.errors import ConverterError
from pipeline.models import ChunkResponse, JSONPath, TokenUsage, ToolCallDelta, ToolResult

__all__ = ["GenerateContentConverter", "normalize_gemini_finish_reason"]

_CONTENT_FILTER_REASONS: Final = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
)

_MEDIA_KINDS: Final = ("image", "audio", "video")
_USAGE_FIELDS: Final = (
    "promptTokenCount",
    "candidatesTokenCount",
    "thoughtsTokenCount",
    "cachedContentTokenCount",
    "totalTokenCount",
)


def normalize_gemini_finish_reason(finish_reason: str, *, made_function_call: bool) -> str:
    """Gemini's ``finishReason`` in OpenAI's words; ``STOP`` after a function call is ``tool_calls``."""
    if finish_reason == "STOP":
        return "tool_calls" if made_function_call else "stop"
    if finish_reason == "MAX_TOKENS":
        return "length"
    if finish_reason in _CONTENT_FILTER_REASONS:
        return "content_filter"
    return finish_reason.lower()


class _StreamedCall:
    """A streamed function call whose closing part has not arrived."""

    __slots__ = ("position", "writer")

    def __init__(self, position: int, writer: PartialArgsWriter) -> None:
        self.position = position
        self.writer = writer


_REASONING, _SIGNATURE, _CONTENT, _TOOL_CALLS, _TOOL_RESULTS, _CITATIONS = range(6)
"""The order in which the segment emitter reads a chunk's fields (see :meth:`_ChunkBuilder.citations`)."""


class _ChunkBuilder:
    """Gathers one event's parts into as few chunks as keep their order.

    A chunk is read reasoning, signature, content (and the signature bound to it), tool calls, tool
    results; a part that would come earlier in that order than what the chunk holds (text after a function
    call, say) starts a new chunk.
    """

    __slots__ = (
        "_chunks",
        "_citations",
        "_content",
        "_content_signature",
        "_media",
        "_rank",
        "_reasoning",
        "_signature",
        "_tool_calls",
        "_tool_results",
    )

    def __init__(self) -> None:
        self._chunks: list[ChunkResponse] = []
        self._rank = _REASONING
        self._reasoning: list[str] = []
        self._signature: str | None = None
        self._content: list[str] = []
        self._content_signature: str | None = None
        self._media: dict[str, list[str]] = {}
        self._tool_calls: list[ToolCallDelta] = []
        self._tool_results: list[ToolResult] = []
        self._citations: list[Mapping[str, Any]] = []

    def reasoning(self, text: str) -> None:
        self._advance(_REASONING)
        self._reasoning.append(text)

    def signature(self, signature: str) -> None:
        self._advance(_SIGNATURE, again=self._signature is not None)
        self._signature = signature

    def content(self, text: str) -> None:
        self._advance(_CONTENT)
        self._content.append(text)

    def content_signature(self, signature: str) -> None:
        """The signature of a text part: it belongs to the text segment that part's text is in."""
        self._advance(_CONTENT, again=self._content_signature is not None)
        self._content_signature = signature

    def media(self, kind: str, url: str) -> None:
        self._advance(_CONTENT)
        self._media.setdefault(kind, []).append(url)

    def tool_call(self, delta: ToolCallDelta) -> None:
        self._advance(_TOOL_CALLS)
        self._tool_calls.append(delta)

    def tool_result(self, result: ToolResult) -> None:
        self._advance(_TOOL_RESULTS)
        self._tool_results.append(result)

    def citations(self, citations: list[Mapping[str, Any]]) -> None:
        """Citations of the text so far: in a chunk after the parts, so that the emitter places them at
        the end of the text they cite (it reads a chunk's citations before its text)."""
        self._advance(_CITATIONS, again=True)
        self._citations.extend(citations)

    def build(
        self,
        *,
        usage: TokenUsage | None,
        finish_reason: str | None,
        metadata: Mapping[str, Any] | None,
        is_complete: bool,
    ) -> list[ChunkResponse]:
        """The chunks, the last one carrying the event-level fields."""
        if usage is not None or finish_reason is not None or metadata or is_complete or self._has_parts():
            self._chunks.append(
                self._chunk(
                    usage=usage, finish_reason=finish_reason, metadata=metadata, is_complete=is_complete
                )
            )
        return self._chunks

    def _advance(self, rank: int, *, again: bool = False) -> None:
        if (rank < self._rank or again) and self._has_parts():
            self._chunks.append(self._chunk())
            self._reasoning, self._signature, self._content = [], None, []
            self._content_signature, self._media = None, {}
            self._tool_calls, self._tool_results, self._citations = [], [], []
        self._rank = rank

    def _has_parts(self) -> bool:
        return bool(
            self._reasoning
            or self._signature is not None
            or self._content
            or self._content_signature is not None
            or self._media
            or self._tool_calls
            or self._tool_results
            or self._citations
        )

    def _chunk(
        self,
        *,
        usage: TokenUsage | None = None,
        finish_reason: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        is_complete: bool = False,
    ) -> ChunkResponse:
        media = self._media
        return ChunkResponse(
            content="".join(self._content),
            reasoning="".join(self._reasoning) if self._reasoning else None,
            reasoning_signature=self._signature,
            content_signature=self._content_signature,
            tool_calls=self._tool_calls or None,
            tool_results=self._tool_results or None,
            citations=self._citations or None,
            image_urls=media.get("image", []),
            audio_urls=media.get("audio", []),
            video_urls=media.get("video", []),
            usage=usage,
            finish_reason=finish_reason,
            metadata=metadata or None,
            is_complete=is_complete,
        )


class GenerateContentConverter:
    """Sans-IO core: one ``GenerateContentResponse`` chunk (a dict) in, the chunks it carries out.

    ``id_factory`` names the calls Gemini sends without an ``id`` (most models before Gemini 3).
    Usage and response metadata are given when they change, not on every chunk that repeats them.
    """

    __slots__ = (
        "_call_count",
        "_cited",
        "_event_number",
        "_grounding_chunks",
        "_id_factory",
        "_known_metadata",
        "_last_server_call",
        "_last_usage",
        "_made_function_call",
        "_seen_calls",
        "_streamed",
    )

    def __init__(self, *, id_factory: IdFactory | None = None) -> None:
        self._id_factory: IdFactory = id_factory or new_call_id
        self._event_number = -1
        self._call_count = 0
        self._streamed: _StreamedCall | None = None
        self._made_function_call = False
        self._last_usage: TokenUsage | None = None
        self._known_metadata: dict[str, Any] = {}
        self._seen_calls: dict[str, str] = {}
        """Provider call id -> kind, name and arguments text of the whole call that had it first."""
        self._last_server_call: str | None = None
        """The id of the last code execution or server tool call: a result without an id answers it."""
        self._grounding_chunks: Sequence[Any] = ()
        """The latest ``groundingChunks``: the sources grounding supports point into."""
        self._cited: set[str] = set()
        """The JSON text of every citation given, so that a chunk repeating them gives them once."""

    def feed(self, event: Mapping[str, Any], /) -> list[ChunkResponse]:
        """Convert one chunk; a chunk that repeats only what is known gives nothing."""
        self._event_number += 1
        if not is_mapping(event):
            raise self._error("the chunk", f"is a {type(event).__name__}, not a mapping")
        if event.get("error") is not None:
            raise provider_error(event, self._event_number)
        builder = _ChunkBuilder()
        metadata = self._new_metadata(event)
        finish_reason: str | None = None
        candidate = self._candidate(event)
        if candidate is not None:
            self._parts(builder, candidate)
            raw_reason = candidate.get("finishReason")
            if raw_reason is not None:
                if not isinstance(raw_reason, str):
                    raise self._error("candidates[0].finishReason", "is not a string")
                raw_reason = plain(raw_reason)
                finish_reason = normalize_gemini_finish_reason(
                    raw_reason, made_function_call=self._made_function_call
                )
                metadata["stop_reason"] = raw_reason
                message = candidate.get("finishMessage")
                if message is not None:
                    if not isinstance(message, str):
                        raise self._error("candidates[0].finishMessage", "is not a string")
                    metadata["finish_message"] = plain(message)
            citations = self._citations(candidate)
            if citations:
                builder.citations(citations)
        feedback = event.get("promptFeedback")
        if feedback is not None:
            if not is_mapping(feedback):
                raise self._error("promptFeedback", "is not a mapping")
            block_reason = feedback.get("blockReason")
            if block_reason is not None:
                if not isinstance(block_reason, str):
                    raise self._error("promptFeedback.blockReason", "is not a string")
                finish_reason = "content_filter"
                metadata["stop_reason"] = plain(block_reason)
                block_message = feedback.get("blockReasonMessage")
                if isinstance(block_message, str):
                    metadata["block_reason_message"] = plain(block_message)
        return builder.build(
            usage=self._new_usage(event),
            finish_reason=finish_reason,
            metadata=metadata,
            is_complete=finish_reason is not None,
        )

    def finish(self) -> list[ChunkResponse]:
        """Nothing is held back; a streamed call never closed stays unfinished on purpose."""
        return []

    # parts

    def _candidate(self, event: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Candidate 0: the one whose ``index`` is 0 (an absent index is 0, as protobuf JSON omits it)."""
        candidates = event.get("candidates")
        if candidates is None:
            return None
        if not isinstance(candidates, Sequence) or isinstance(candidates, str):
            raise self._error("candidates", "is not a list")
        found = None
        for number, candidate in enumerate(candidates):
            if not is_mapping(candidate):
                raise self._error(f"candidates[{number}]", "is not a mapping")
            index = candidate.get("index", 0)
            if not isinstance(index, int) or isinstance(index, bool):
                raise self._error(f"candidates[{number}].index", f"is not an integer: {index!r}")
            if index == 0 and found is None:
                found = candidate
        return found

    def _parts(self, builder: _ChunkBuilder, candidate: Mapping[str, Any]) -> None:
        content = candidate.get("content")
        if content is None:
            return
        if not is_mapping(content):
            raise self._error("candidates[0].content", "is not a mapping")
        parts = content.get("parts")
        if parts is None:
            return
        if not isinstance(parts, Sequence) or isinstance(parts, str):
            raise self._error("candidates[0].content.parts", "is not a list")
        for number, part in enumerate(parts):
            where = f"candidates[0].content.parts[{number}]"
            if not is_mapping(part):
                raise self._error(where, "is not a mapping")
            self._part(builder, part, where)

    def _part(self, builder: _ChunkBuilder, part: Mapping[str, Any], where: str) -> None:
        signature = part.get("thoughtSignature")
        if signature is not None and not isinstance(signature, str):
            raise self._error(f"{where}.thoughtSignature", "is not a string")
        function_call = part.get("functionCall")
        if function_call is not None:
            if not is_mapping(function_call):
                raise self._error(f"{where}.functionCall", "is not a mapping")
            self._function_call(builder, function_call, signature, f"{where}.functionCall")
            return
        text = part.get("text")
        if text is not None:
            if not isinstance(text, str):
                raise self._error(f"{where}.text", "is not a string")
            thought = part.get("thought", False)
            if not isinstance(thought, bool):
                raise self._error(f"{where}.thought", f"is not a boolean: {thought!r}")
            if thought:
                if text:
                    builder.reasoning(text)
                if signature:
                    builder.signature(signature)
            else:
                if text:
                    builder.content(text)
                if signature:
                    builder.content_signature(signature)
            return
        for field, handler in self._SERVER_PARTS:
            value = part.get(field)
            if value is not None:
                if not is_mapping(value):
                    raise self._error(f"{where}.{field}", "is not a mapping")
                handler(self, builder, value, signature, f"{where}.{field}")
                return
        if signature:
            builder.signature(signature)
        for field, url_of in (("inlineData", _data_url), ("fileData", _file_url)):
            media = part.get(field)
            if is_mapping(media):
                kind, url = url_of(media)
                if kind in _MEDIA_KINDS and url:
                    builder.media(kind, url)
        # functionResponse (the client's own answer, echoed): nothing for the client to act on.

    def _function_call(
        self, builder: _ChunkBuilder, call: Mapping[str, Any], signature: str | None, where: str
    ) -> None:
        name = call.get("name")
        if name is not None and not isinstance(name, str):
            raise self._error(f"{where}.name", "is not a string")
        will_continue = call.get("willContinue", False)
        if not isinstance(will_continue, bool):
            raise self._error(f"{where}.willContinue", f"is not a boolean: {will_continue!r}")
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise self._error(f"{where}.id", f"is not a string: {call_id!r}")
        args = call.get("args")
        if args is not None and not is_mapping(args):
            raise self._error(f"{where}.args", "is not a mapping")
        partial_args = call.get("partialArgs")
        if partial_args is not None and (
            not isinstance(partial_args, Sequence) or isinstance(partial_args, str)
        ):
            raise self._error(f"{where}.partialArgs", "is not a list")
        pieces: list[str] = []
        if name:
            if self._streamed is not None:
                builder.tool_call(self._end_streamed([]))
            writer = PartialArgsWriter()
            pieces.append(writer.start())
            self._write_values(pieces, writer, args, partial_args, where)
            if not will_continue:
                pieces.append(writer.close())
                if call_id and self._repeats(call_id, "function", name, "".join(pieces)):
                    return
            position = self._call_count
            self._call_count += 1
            self._made_function_call = True
            if not call_id:
                call_id = self._id_factory(position)
            if will_continue:
                self._streamed = _StreamedCall(position, writer)
            builder.tool_call(
                ToolCallDelta(
                    position, call_id, name, "".join(pieces), not will_continue, signature=signature
                )
            )
            return
        streamed = self._streamed
        if streamed is None:
            if args or partial_args:
                raise self._error(where, "has arguments but no name, and no streamed call is open")
            return  # a closing part with no call to close
        self._write_values(pieces, streamed.writer, args, partial_args, where)
        if not will_continue:
            builder.tool_call(self._end_streamed(pieces, signature))
        elif pieces or signature:
            builder.tool_call(
                ToolCallDelta(streamed.position, arguments_delta="".join(pieces), signature=signature)
            )

    def _repeats(self, call_id: str, kind: str, name: str, arguments: str) -> bool:
        """Whether a whole call repeats the call that had ``call_id`` first, to the letter.

        Gemini sometimes sends a part twice; a repeat with the same id, name and arguments is that call
        again, not a second call, and is left out (running a tool twice is the harm). A call that reuses
        an id with a different name or arguments is a call of its own: it gets the next position (the
        segment emitter then gives it the id ``<id>_2``).
        """
        fingerprint = f"{kind}\0{name}\0{arguments}"
        first = self._seen_calls.get(call_id)
        if first is None:
            self._seen_calls[call_id] = fingerprint
            return False
        return first == fingerprint

    def _server_call(
        self,
        builder: _ChunkBuilder,
        call_id: str | None,
        name: str,
        arguments: Mapping[str, Any],
        signature: str | None,
    ) -> None:
        """A call the provider runs itself: one finished ``server`` call (nothing for the client to run)."""
        text = json_text(arguments)
        if call_id and self._repeats(call_id, "server", name, text):
            return
        position = self._call_count
        self._call_count += 1
        if not call_id:
            call_id = self._id_factory(position)
        self._last_server_call = call_id
        builder.tool_call(ToolCallDelta(position, call_id, name, text, True, "server", signature))

    def _executable_code(
        self, builder: _ChunkBuilder, part: Mapping[str, Any], signature: str | None, where: str
    ) -> None:
        """``executableCode`` (the code execution tool): a server call ``code_execution``."""
        code = self._string(part, "code", where)
        if code is None:
            raise self._error(f"{where}.code", "is missing")
        language = self._string(part, "language", where)
        arguments = {"code": code} if language is None else {"language": language, "code": code}
        self._server_call(builder, self._string(part, "id", where), "code_execution", arguments, signature)

    def _code_execution_result(
        self, builder: _ChunkBuilder, part: Mapping[str, Any], signature: str | None, where: str
    ) -> None:
        """``codeExecutionResult``: the result of the code execution call it follows (or names by id)."""
        outcome = self._string(part, "outcome", where)
        content: dict[str, Any] = {}
        if outcome is not None:
            content["outcome"] = outcome
        output = self._string(part, "output", where)
        if output is not None:
            content["output"] = output
        if signature:
            builder.signature(signature)
        builder.tool_result(
            ToolResult(
                call_id=self._result_call_id(part, where),
                name="code_execution",
                content=content,
                is_error=outcome not in (None, "OUTCOME_OK"),
                result_type="code_execution_result",
            )
        )

    def _tool_call(
        self, builder: _ChunkBuilder, part: Mapping[str, Any], signature: str | None, where: str
    ) -> None:
        """``toolCall``: a built-in tool the server runs (Google Search, URL context, file search, Maps);
        a server call named after its ``toolType`` in lower case (``file_search``)."""
        arguments = part.get("args")
        if arguments is not None and not is_mapping(arguments):
            raise self._error(f"{where}.args", "is not a mapping")
        name = self._tool_type(part, where)
        self._server_call(builder, self._string(part, "id", where), name, arguments or {}, signature)

    def _tool_response(
        self, builder: _ChunkBuilder, part: Mapping[str, Any], signature: str | None, where: str
    ) -> None:
        """``toolResponse``: what a built-in tool returned, as sent."""
        response = part.get("response")
        if response is not None and not is_mapping(response):
            raise self._error(f"{where}.response", "is not a mapping")
        if signature:
            builder.signature(signature)
        builder.tool_result(
            ToolResult(
                call_id=self._result_call_id(part, where),
                name=self._tool_type(part, where),
                content=response,
                result_type="tool_response",
            )
        )

    _SERVER_PARTS: Final = (
        ("executableCode", _executable_code),
        ("codeExecutionResult", _code_execution_result),
        ("toolCall", _tool_call),
        ("toolResponse", _tool_response),
    )
    """Parts of calls the provider runs itself, and their results."""

    def _result_call_id(self, part: Mapping[str, Any], where: str) -> str:
        call_id = self._string(part, "id", where) or self._last_server_call
        if call_id is None:
            raise self._error(where, "has no id and follows no executableCode or toolCall part")
        return call_id

    def _tool_type(self, part: Mapping[str, Any], where: str) -> str:
        tool_type = self._string(part, "toolType", where)
        return tool_type.lower() if tool_type else "server_tool"

    def _string(self, owner: Mapping[str, Any], key: str, where: str) -> str | None:
        """The plain string at ``key`` (``None`` when absent)."""
        value = owner.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._error(f"{where}.{key}", f"is not a string: {value!r}")
        return plain(value)

    # citations

    def _citations(self, candidate: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The citations a candidate adds: one per grounding support (with the sources it points to), one
        per ``citationMetadata`` citation. Each is given once, however many chunks repeat it."""
        found: list[Mapping[str, Any]] = []
        grounding = candidate.get("groundingMetadata")
        if grounding is not None:
            where = "candidates[0].groundingMetadata"
            if not is_mapping(grounding):
                raise self._error(where, "is not a mapping")
            chunks = self._list(grounding, "groundingChunks", where)
            if chunks is not None:
                self._grounding_chunks = chunks
            for number, support in enumerate(self._list(grounding, "groundingSupports", where) or ()):
                if not is_mapping(support):
                    raise self._error(f"{where}.groundingSupports[{number}]", "is not a mapping")
                indices = self._list(support, "groundingChunkIndices", f"{where}.groundingSupports[{number}]")
                sources = self._grounding_chunks
                cited = [
                    sources[index]
                    for index in indices or ()
                    if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(sources)
                ]
                self._add_citation(found, {"type": "grounding_support", **support, "sources": cited})
        metadata = candidate.get("citationMetadata")
        if metadata is not None:
            where = "candidates[0].citationMetadata"
            if not is_mapping(metadata):
                raise self._error(where, "is not a mapping")
            for number, citation in enumerate(self._list(metadata, "citations", where) or ()):
                if not is_mapping(citation):
                    raise self._error(f"{where}.citations[{number}]", "is not a mapping")
                self._add_citation(found, {"type": "citation", **citation})
        return found

    def _add_citation(self, found: list[Mapping[str, Any]], citation: Mapping[str, Any]) -> None:
        key = json_text(citation)
        if key not in self._cited:
            self._cited.add(key)
            found.append(citation)

    def _list(self, owner: Mapping[str, Any], key: str, where: str) -> Sequence[Any] | None:
        value = owner.get(key)
        if value is None:
            return None
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise self._error(f"{where}.{key}", "is not a list")
        return value

    def _write_values(
        self,
        pieces: list[str],
        writer: PartialArgsWriter,
        args: Mapping[str, Any] | None,
        partial_args: Sequence[Any] | None,
        where: str,
    ) -> None:
        try:
            if args:
                for key, value in args.items():
                    pieces.append(writer.write((key,), value))
            for number, partial in enumerate(partial_args or ()):
                path, value, will_continue = self._partial_arg(partial, f"{where}.partialArgs[{number}]")
                pieces.append(writer.write(path, value, will_continue=will_continue))
        except ValueError as error:
            raise self._error(where, f"cannot be written as JSON text: {error}") from error

    def _partial_arg(self, partial: Any, where: str) -> tuple[JSONPath, PartialValue, bool]:
        if not is_mapping(partial):
            raise self._error(where, "is not a mapping")
        raw_path = partial.get("jsonPath")
        if not isinstance(raw_path, str):
            raise self._error(f"{where}.jsonPath", "is missing or not a string")
        try:
            path = parse_json_path(raw_path)
        except ValueError as error:
            raise self._error(f"{where}.jsonPath", str(error)) from error
        value: PartialValue
        if "stringValue" in partial:
            value = partial["stringValue"]
            valid = isinstance(value, str)
        elif "numberValue" in partial:
            number: Any = partial["numberValue"]
            valid = isinstance(number, int | float) and not isinstance(number, bool) and math.isfinite(number)
            value = plain_number(number) if valid else number
        elif "boolValue" in partial:
            value = partial["boolValue"]
            valid = isinstance(value, bool)
        elif "nullValue" in partial:
            value, valid = None, True
        else:
            raise self._error(where, "has no stringValue, numberValue, boolValue or nullValue")
        if not valid:
            raise self._error(where, f"has a value of the wrong type: {value!r}")
        will_continue = partial.get("willContinue", False)
        if not isinstance(will_continue, bool):
            raise self._error(f"{where}.willContinue", f"is not a boolean: {will_continue!r}")
        if isinstance(value, str):
            value = plain(value)
        return path, value, will_continue

    def _end_streamed(self, pieces: list[str], signature: str | None = None) -> ToolCallDelta:
        streamed = self._streamed
        assert streamed is not None
        self._streamed = None
        pieces.append(streamed.writer.close())
        return ToolCallDelta(
            streamed.position, arguments_delta="".join(pieces), finished=True, signature=signature
        )

    # response-level fields

    def _new_usage(self, event: Mapping[str, Any]) -> TokenUsage | None:
        usage = token_usage(event.get("usageMetadata"), self._event_number, "usageMetadata", _USAGE_FIELDS)
        if usage is None:
            return None
        if usage == self._last_usage:
            return None
        self._last_usage = usage
        return usage

    def _new_metadata(self, event: Mapping[str, Any]) -> dict[str, Any]:
        metadata: dict[str, Any] = {}
        for field, key in (("responseId", "id"), ("modelVersion", "model")):
            value = event.get(field)
            if isinstance(value, str) and self._known_metadata.get(key) != value:
                metadata[key] = self._known_metadata[key] = value
        return metadata

    def _error(self, where: str, problem: str) -> ConverterError:
        return converter_error(self._event_number, where, problem)


def _data_url(inline_data: Mapping[str, Any]) -> tuple[str, str]:
    mime_type = inline_data.get("mimeType")
    data = inline_data.get("data")
    if not isinstance(mime_type, str) or not isinstance(data, str):
        return "", ""
    return mime_type.partition("/")[0], f"data:{mime_type};base64,{data}"


def _file_url(file_data: Mapping[str, Any]) -> tuple[str, str]:
    mime_type = file_data.get("mimeType")
    uri = file_data.get("fileUri")
    if not isinstance(mime_type, str) or not isinstance(uri, str):
        return "", ""
    return mime_type.partition("/")[0], uri

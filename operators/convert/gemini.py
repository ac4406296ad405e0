"""The Gemini converter: ``streamGenerateContent`` chunks (``GenerateContentResponse`` dicts) -> chunks.

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

The same converter reads the Interactions API stream, told apart by its ``event_type`` field::

    interaction.created {interaction: {id, model}}
    step.start {index, step: {type: thought | text | function_call {id, name, arguments}}}
    step.delta {index, delta: {type: text | thought_summary | thought_signature | arguments_delta}}
    step.stop {index}                                     a function_call step is complete
    interaction.completed {interaction: {status, usage}}  requires_action / completed -> the finish

(``content.start`` / ``content.delta`` / ``content.stop`` are taken as the older names of the step events.)
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from typing import Any, Final, TypeAlias

import msgspec
from aiostream import pipable_operator

from operators.convert._base import IdFactory, is_mapping, new_call_id
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, JSONPath, TokenUsage, ToolCallDelta, ToolResult
from pipeline.stage import drive

__all__ = [
    "GeminiConverter",
    "PartialArgsWriter",
    "convert_gemini",
    "normalize_gemini_finish_reason",
    "parse_json_path",
]

_CONTENT_FILTER_REASONS: Final = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
)

_MEDIA_KINDS: Final = ("image", "audio", "video")

PartialValue: TypeAlias = str | int | float | bool | None

_EXACT_INTEGERS: Final = 2**53
"""Integers a double holds exactly."""


def normalize_gemini_finish_reason(finish_reason: str, *, made_function_call: bool) -> str:
    """Gemini's ``finishReason`` in OpenAI's words; ``STOP`` after a function call is ``tool_calls``."""
    if finish_reason == "STOP":
        return "tool_calls" if made_function_call else "stop"
    if finish_reason == "MAX_TOKENS":
        return "length"
    if finish_reason in _CONTENT_FILTER_REASONS:
        return "content_filter"
    return finish_reason.lower()


def _plain(text: str) -> str:
    """``text`` as a plain ``str``: google-genai objects carry their enums (``FinishReason.STOP``), which
    are ``str`` subclasses; the wire has the bare word."""
    if type(text) is str:
        return text
    value = getattr(text, "value", text)
    return str.__str__(value if isinstance(value, str) else text)


def _plain_number(value: int | float) -> int | float:
    """A ``numberValue`` as the wire writes it: an integral double is an integer (``2``, not ``2.0``), so a
    value that went through google-genai (which types it ``float``) gives the same JSON text."""
    if type(value) is float and value.is_integer() and abs(value) <= _EXACT_INTEGERS:
        return int(value)
    return value


def _json_text(value: Any) -> str:
    """Compact JSON text of ``value``; lone surrogates (from a ``\\ud83d`` escape) stay escaped."""
    try:
        return msgspec.json.encode(value).decode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"))


def parse_json_path(path: str) -> JSONPath:
    """``$.recipe.steps[0]`` -> ``("recipe", "steps", 0)``: the RFC 9535 subset Gemini sends.

    Accepts ``.name``, ``[index]`` and ``['name']`` / ``["name"]`` (with backslash escapes). Raises
    :class:`ValueError` naming the offset of anything else.
    """
    if not path.startswith("$"):
        raise ValueError(f"JSON path {path!r} does not start with '$'")
    components: list[str | int] = []
    position, length = 1, len(path)
    while position < length:
        char = path[position]
        if char == ".":
            end = position + 1
            while end < length and path[end] not in ".[":
                end += 1
            if end == position + 1:
                raise ValueError(f"JSON path {path!r} has an empty name at offset {position}")
            components.append(path[position + 1 : end])
            position = end
        elif char == "[":
            end = path.find("]", position)
            if end < 0:
                raise ValueError(f"JSON path {path!r} has an unclosed '[' at offset {position}")
            quote = path[position + 1 : position + 2]
            if quote in ("'", '"'):
                name, end = _quoted_name(path, position + 1)
                components.append(name)
            elif path[position + 1 : end].isdigit():
                components.append(int(path[position + 1 : end]))
            else:
                raise ValueError(f"JSON path {path!r} has a bad selector at offset {position}")
            position = end + 1
        else:
            raise ValueError(f"JSON path {path!r} has an unexpected {char!r} at offset {position}")
    return tuple(components)


def _quoted_name(path: str, start: int) -> tuple[str, int]:
    """The name quoted at ``path[start]`` and the offset of the ``]`` after it."""
    quote = path[start]
    pieces: list[str] = []
    position = start + 1
    while position < len(path):
        char = path[position]
        if char == "\\" and position + 1 < len(path):
            pieces.append(path[position + 1])
            position += 2
            continue
        if char == quote:
            if path[position + 1 : position + 2] != "]":
                break
            return "".join(pieces), position + 1
        pieces.append(char)
        position += 1
    raise ValueError(f"JSON path {path!r} has a bad quoted name at offset {start}")


class _Container:
    """An object or array whose closing bracket is not written yet."""

    __slots__ = ("count", "is_array", "keys")

    def __init__(self, is_array: bool) -> None:
        self.is_array = is_array
        self.count = 0
        self.keys: set[str] = set()


class PartialArgsWriter:
    """Writes a streamed call's arguments as JSON text, value by value, in the order they arrive.

    Values come with their JSON path. The writer keeps the chain of open containers from the root object
    to the last value: a path that leaves it closes containers, one that goes deeper opens them, and a
    string value can stay open for more pieces. Work is proportional to the text written (plus the path
    length per value); nothing is re-read.

    Gemini sends values in document order. A path that goes back into a container already closed, repeats
    a key, skips an array index or mixes object and array cannot be written as JSON text without taking
    text back, so it raises :class:`ValueError`.
    """

    __slots__ = ("_closed", "_open_string", "_path", "_stack")

    def __init__(self) -> None:
        self._stack: list[_Container] = [_Container(is_array=False)]
        self._path: list[str | int] = []
        """The keys leading from the root to ``_stack[-1]``."""
        self._open_string: JSONPath | None = None
        self._closed = False

    def start(self) -> str:
        """The text before any value: the root object's ``{``."""
        return "{"

    def write(self, path: JSONPath, value: Any, *, will_continue: bool = False) -> str:
        """The text that puts ``value`` at ``path``; ``will_continue`` leaves a string value open."""
        if self._closed:
            raise ValueError("the arguments object is already closed")
        pieces: list[str] = []
        if self._open_string is not None:
            if path == self._open_string and isinstance(value, str):
                pieces.append(_string_body(value))
                if not will_continue:
                    pieces.append('"')
                    self._open_string = None
                return "".join(pieces)
            pieces.append('"')
            self._open_string = None
        if not path:
            raise ValueError("a value for the root '$': the arguments must be an object")
        parent, leaf = path[:-1], path[-1]
        open_path = self._path
        common = 0
        while common < len(open_path) and common < len(parent) and open_path[common] == parent[common]:
            common += 1
        while len(open_path) > common:
            pieces.append("]" if self._stack.pop().is_array else "}")
            open_path.pop()
        for depth in range(common, len(parent)):
            key = parent[depth]
            next_key = path[depth + 1]
            self._member(pieces, key, path)
            is_array = isinstance(next_key, int)
            pieces.append("[" if is_array else "{")
            self._stack.append(_Container(is_array))
            open_path.append(key)
        self._member(pieces, leaf, path)
        if isinstance(value, str) and will_continue:
            pieces.append('"')
            pieces.append(_string_body(value))
            self._open_string = path
        else:
            pieces.append(_json_text(value))
        return "".join(pieces)

    def close(self) -> str:
        """The text that ends the arguments: an open string's quote and every open bracket."""
        if self._closed:
            return ""
        pieces = ['"'] if self._open_string is not None else []
        self._open_string = None
        pieces.extend("]" if container.is_array else "}" for container in reversed(self._stack))
        self._stack.clear()
        self._path.clear()
        self._closed = True
        return "".join(pieces)

    def _member(self, pieces: list[str], key: str | int, path: JSONPath) -> None:
        """Start a new member ``key`` of the innermost open container."""
        container = self._stack[-1]
        if container.is_array:
            if not isinstance(key, int):
                raise ValueError(f"path {_format_path(path)} names key {key!r} inside an array")
            if key != container.count:
                raise ValueError(
                    f"path {_format_path(path)} has index {key} where index {container.count} comes next"
                )
        else:
            if not isinstance(key, str):
                raise ValueError(f"path {_format_path(path)} has index {key} inside an object")
            if key in container.keys:
                raise ValueError(f"path {_format_path(path)} goes back to key {key!r}, already written")
            container.keys.add(key)
        if container.count:
            pieces.append(",")
        container.count += 1
        if isinstance(key, str):
            pieces.append(_json_text(key))
            pieces.append(":")


def _string_body(text: str) -> str:
    """``text`` escaped for the inside of a JSON string (without the quotes)."""
    return _json_text(text)[1:-1]


def _format_path(path: JSONPath) -> str:
    return "$" + "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path)


class _StreamedCall:
    """A streamed function call whose closing part has not arrived."""

    __slots__ = ("position", "writer")

    def __init__(self, position: int, writer: PartialArgsWriter) -> None:
        self.position = position
        self.writer = writer


class _StepCall:
    """An Interactions API ``function_call`` step whose ``step.stop`` has not arrived."""

    __slots__ = ("arguments", "position", "streamed")

    def __init__(self, position: int, arguments: Mapping[str, Any] | None) -> None:
        self.position = position
        self.arguments = arguments
        """The step's ``arguments`` object: the arguments if no ``arguments_delta`` follows."""
        self.streamed = False


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


class GeminiConverter:
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
        "_step_calls",
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
        self._step_calls: dict[int, _StepCall] = {}
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
            self._raise_provider_error(event)
        event_type = event.get("event_type")
        if event_type is not None:
            return self._interaction_event(event, event_type)
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
                raw_reason = _plain(raw_reason)
                finish_reason = normalize_gemini_finish_reason(
                    raw_reason, made_function_call=self._made_function_call
                )
                metadata["stop_reason"] = raw_reason
                message = candidate.get("finishMessage")
                if message is not None:
                    if not isinstance(message, str):
                        raise self._error("candidates[0].finishMessage", "is not a string")
                    metadata["finish_message"] = _plain(message)
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
                metadata["stop_reason"] = _plain(block_reason)
                block_message = feedback.get("blockReasonMessage")
                if isinstance(block_message, str):
                    metadata["block_reason_message"] = _plain(block_message)
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
        text = _json_text(arguments)
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
        return _plain(value)

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
        key = _json_text(citation)
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
            value = _plain_number(number) if valid else number
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
            value = _plain(value)
        return path, value, will_continue

    def _end_streamed(self, pieces: list[str], signature: str | None = None) -> ToolCallDelta:
        streamed = self._streamed
        assert streamed is not None
        self._streamed = None
        pieces.append(streamed.writer.close())
        return ToolCallDelta(
            streamed.position, arguments_delta="".join(pieces), finished=True, signature=signature
        )

    # the Interactions API

    def _interaction_event(self, event: Mapping[str, Any], event_type: Any) -> list[ChunkResponse]:
        if event_type in ("step.start", "content.start"):
            return self._step_start(event)
        if event_type in ("step.delta", "content.delta"):
            return self._step_delta(event)
        if event_type in ("step.stop", "content.stop"):
            return self._step_stop(event)
        if event_type in (
            "interaction.created",
            "interaction.start",
            "interaction.completed",
            "interaction.complete",
        ):
            return self._interaction(event, completed=event_type.startswith("interaction.complete"))
        if event_type == "error":
            self._raise_provider_error(event)
        return []  # interaction.status_update and event types this version does not know

    def _interaction(self, event: Mapping[str, Any], *, completed: bool) -> list[ChunkResponse]:
        interaction = self._mapping(event, "interaction")
        metadata: dict[str, Any] = {}
        for key in ("id", "model", "service_tier"):
            value = interaction.get(key)
            if isinstance(value, str) and self._known_metadata.get(key) != value:
                metadata[key] = self._known_metadata[key] = value
        usage = self._interaction_usage(interaction.get("usage"))
        finish_reason = None
        if completed:
            status = interaction.get("status")
            if not isinstance(status, str):
                raise self._error("interaction.status", "is missing or not a string")
            metadata["stop_reason"] = status
            if status in ("completed", "requires_action"):
                finish_reason = "tool_calls" if self._made_function_call else "stop"
            else:
                finish_reason = status.lower()
        if not metadata and usage is None and not completed:
            return []
        return [
            ChunkResponse(
                usage=usage, finish_reason=finish_reason, metadata=metadata or None, is_complete=completed
            )
        ]

    def _step_start(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        step_index = self._index(event)
        step = event.get("step", event.get("content"))
        if not is_mapping(step):
            raise self._error("step", "is missing or not a mapping")
        step_type = step.get("type")
        if step_type == "text":
            text = step.get("text")
            return [ChunkResponse(content=text)] if isinstance(text, str) and text else []
        if step_type != "function_call":
            return []  # thought steps stream their text and signature as deltas
        name = step.get("name")
        if not isinstance(name, str) or not name:
            raise self._error("step.name", "is missing or not a string")
        arguments = step.get("arguments")
        if arguments is not None and not is_mapping(arguments):
            raise self._error("step.arguments", "is not a mapping")
        if step_index in self._step_calls:
            raise self._error("step.start", f"starts step {step_index} again before its stop")
        position = self._call_count
        self._call_count += 1
        self._made_function_call = True
        call_id = step.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = self._id_factory(position)
        signature = step.get("signature")
        self._step_calls[step_index] = _StepCall(position, arguments or None)
        delta = ToolCallDelta(
            position, call_id, name, signature=signature if isinstance(signature, str) and signature else None
        )
        return [ChunkResponse(tool_calls=[delta])]

    def _step_delta(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        step_index = self._index(event)
        delta = self._mapping(event, "delta")
        delta_type = delta.get("type")
        if delta_type == "text":
            text = self._delta_string(delta, "text")
            return [ChunkResponse(content=text)] if text else []
        if delta_type in ("thought_summary", "thought"):
            content = delta.get("content")
            text = self._delta_string(content if is_mapping(content) else delta, "text")
            return [ChunkResponse(reasoning=text)] if text else []
        if delta_type == "thought_signature":
            signature = self._delta_string(delta, "signature")
            return [ChunkResponse(reasoning_signature=signature)] if signature else []
        if delta_type == "arguments_delta":
            call = self._step_calls.get(step_index)
            if call is None:
                raise self._error(
                    "step.delta", f"has arguments for step {step_index}, not an open function call"
                )
            arguments = self._delta_string(delta, "arguments")
            if not arguments:
                return []
            call.streamed = True
            return [ChunkResponse(tool_calls=[ToolCallDelta(call.position, arguments_delta=arguments)])]
        return []  # delta types this version does not know

    def _step_stop(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        call = self._step_calls.pop(self._index(event), None)
        if call is None:
            return []
        arguments = None if call.streamed or not call.arguments else _json_text(call.arguments)
        return [
            ChunkResponse(tool_calls=[ToolCallDelta(call.position, arguments_delta=arguments, finished=True)])
        ]

    def _interaction_usage(self, raw: Any) -> TokenUsage | None:
        if raw is None:
            return None
        if not is_mapping(raw):
            raise self._error("interaction.usage", "is not a mapping")
        counts: dict[str, int] = {}
        for field in (
            "total_input_tokens",
            "total_output_tokens",
            "total_thought_tokens",
            "total_cached_tokens",
            "total_tokens",
        ):
            value = raw.get(field)
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise self._error(f"interaction.usage.{field}", "is not an integer")
            counts[field] = value
        if not counts:
            return None
        prompt = counts.get("total_input_tokens", 0)
        thoughts = counts.get("total_thought_tokens")
        completion = counts.get("total_output_tokens", 0) + (thoughts or 0)
        return TokenUsage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=counts.get("total_tokens", prompt + completion),
            cached_tokens=counts.get("total_cached_tokens"),
            reasoning_tokens=thoughts,
        )

    def _index(self, event: Mapping[str, Any]) -> int:
        value = event.get("index")
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._error("index", "is missing or not an integer")
        return value

    def _mapping(self, owner: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = owner.get(key)
        if not is_mapping(value):
            raise self._error(key, "is missing or not a mapping")
        return value

    def _delta_string(self, owner: Mapping[str, Any], key: str) -> str:
        """The string at ``key`` (``""`` when absent)."""
        value = owner.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._error(f"delta.{key}", "is not a string")
        return value

    # response-level fields

    def _new_usage(self, event: Mapping[str, Any]) -> TokenUsage | None:
        raw = event.get("usageMetadata")
        if raw is None:
            return None
        if not is_mapping(raw):
            raise self._error("usageMetadata", "is not a mapping")
        counts: dict[str, int] = {}
        for field in (
            "promptTokenCount",
            "candidatesTokenCount",
            "thoughtsTokenCount",
            "cachedContentTokenCount",
            "totalTokenCount",
        ):
            value = raw.get(field)
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise self._error(f"usageMetadata.{field}", "is not an integer")
            counts[field] = value
        if not counts:
            return None  # e.g. only trafficType, on every streamed chunk of Vertex
        prompt = counts.get("promptTokenCount", 0)
        thoughts = counts.get("thoughtsTokenCount")
        completion = counts.get("candidatesTokenCount", 0) + (thoughts or 0)
        usage = TokenUsage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=counts.get("totalTokenCount", prompt + completion),
            cached_tokens=counts.get("cachedContentTokenCount"),
            reasoning_tokens=thoughts,
        )
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

    def _raise_provider_error(self, event: Mapping[str, Any]) -> None:
        error = event["error"]
        details: Mapping[str, Any] = error if is_mapping(error) else {"message": str(error)}
        raise ProviderError.from_payload(details, event, f"event {self._event_number}")

    def _error(self, where: str, problem: str) -> ConverterError:
        return ConverterError(
            f"Gemini chunk {self._event_number}: {where} {problem}", event_number=self._event_number
        )


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


@pipable_operator
def convert_gemini(
    source: AsyncIterable[Mapping[str, Any]], *, id_factory: IdFactory | None = None
) -> AsyncIterator[ChunkResponse]:
    """Gemini ``streamGenerateContent`` chunks (dicts) -> normalised :class:`ChunkResponse`\\ s."""
    return drive(source, GeminiConverter(id_factory=id_factory))

"""OpenAI Chat Completions chunks (and OpenAI-compatible servers' variants) -> `ChunkResponse`.

Each event, the bytes of a framed `Payload` or a dict, is decoded once into the
typed chunk of `operators.convert._chat_schema`, whatever it carries. One ``ChunkResponse`` per chunk
that carries something, then a last ``is_complete=True`` chunk from
`finish`. What compatible servers do differently, and what is made of it:

- tool calls without ``index`` (Mistral): a new ``id`` is a new call; no ``id`` and no ``index`` continues
  the last call; an ``index`` numbered from 1 or anyhow: calls get positions 0, 1, ... in order of first
  appearance; an ``id`` repeated on every delta, or ``""``, or a ``name`` of ``""`` on later deltas: the same
  call; a new ``id`` at an index already taken by another id: a new call; ``arguments`` sent as a JSON
  object instead of text: encoded as JSON text; trailing deltas with empty arguments: nothing;
- reasoning in ``reasoning_content`` (DeepSeek, Qwen, xAI, GLM, llama.cpp), ``reasoning`` (Groq,
  OpenRouter), ``reasoning_details`` (OpenRouter: ``reasoning.text`` / ``reasoning.summary`` text, a
  ``signature``, ``reasoning.encrypted`` data), or ``content`` given as a list of parts (Mistral
  magistral ``thinking`` parts); ``reasoning_details`` text that repeats ``reasoning`` is not doubled;
- usage under ``x_groq.usage`` (Groq) or on every chunk (vLLM: emitted when it changes); xAI's
  ``completion_tokens`` without the reasoning tokens (recognised by ``total_tokens`` counting them
  separately) is brought to OpenAI's meaning;
- empty ``id`` / ``model`` / ``created: 0`` (Azure's prompt-filter chunk, Snowflake) are not metadata;
  OpenRouter's ``native_finish_reason`` is the ``stop_reason`` metadata when present;
- an ``error`` object in a chunk (OpenRouter mid-stream errors, with or without ``choices``; a server's
  ``{"error": {...}}`` in place of a chunk) raises `ProviderError` after everything before it was
  returned;
- Groq's ``executed_tools`` (compound models: tools Groq ran itself, listed in a delta once when called and
  again, at the same ``index``, with their ``output``): a ``server`` call named after the tool's ``type``
  with its ``arguments``, finished with a `ToolResult` holding the result fields Groq sent;
- the events of openai-python's ``client.chat.completions.stream()`` helper: its ``chunk`` events carry the
  raw chunks, which are read; its derived events (``content.delta``, ``tool_calls.function.arguments.done``,
  ...) repeat what the chunks said and are skipped.

Two calls with the same ``id`` are two calls (each at its own position, both with the provider's id; the
segment emitter renames the second ``<id>_2``), except a repeated id on the deltas of the call just before
when the server sends no ``index``: that is the same call.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final

import msgspec
from aiostream import pipable_operator

from operators.convert._base import (
    PAYLOAD_ERRORS,
    EventDecoder,
    IdFactory,
    check_utf8,
    field_error,
    is_mapping,
    new_call_id,
    payload_error,
)
from operators.convert._chat_schema import (
    Arguments,
    ChatChoice,
    ChatChunk,
    ChatDelta,
    ChatFunction,
    ChatToolCall,
    ContentPart,
    ExecutedTool,
    ImageOutput,
    ImageURL,
    ReasoningDetail,
    chat_usage,
)
from pipeline._options import check_count
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, Payload, TokenUsage, ToolCallDelta, ToolCallKind, ToolResult
from pipeline.stage import operator_stream

__all__ = ["DEFAULT_MAX_HELD_ARGUMENTS", "OpenAIChatConverter", "convert_openai_chat"]

DEFAULT_MAX_HELD_ARGUMENTS: Final = 32 * 1024 * 1024
"""Characters of arguments held for a call whose name has not arrived yet (the splitter's default cap on
one call's arguments): past it the stream fails with a `ConverterError`."""

_METADATA_KEYS = ("id", "model", "created", "system_fingerprint", "service_tier")
_FINISH_REASONS = {"function_call": "tool_calls"}
_HELPER_EVENTS = frozenset(
    {
        "content.delta",
        "content.done",
        "refusal.delta",
        "refusal.done",
        "tool_calls.function.arguments.delta",
        "tool_calls.function.arguments.done",
        "logprobs.content.delta",
        "logprobs.content.done",
        "logprobs.refusal.delta",
        "logprobs.refusal.done",
    }
)
"""The events openai-python's ``.stream()`` helper derives from the chunks (it also sends each chunk)."""

_DECODER: Final = EventDecoder(ChatChunk)
_decode_chunk = _DECODER.decode
_decode_bytes = _DECODER.bytes_decoder.decode
_NO_METADATA: Final = ChatChunk()
_NOTHING: Final = ChunkResponse()
"""A chunk that says nothing: an event that carries nothing new gives no chunk."""


class _Call:
    """One tool call of the selected choice, from its first delta to its ``finished`` delta."""

    __slots__ = (
        "announced",
        "call_id",
        "finished",
        "held",
        "held_size",
        "kind",
        "name",
        "position",
        "provider_id",
    )

    def __init__(self, position: int) -> None:
        self.position = position
        self.provider_id: str | None = None
        self.call_id = ""
        self.name: str | None = None
        self.kind: ToolCallKind = "function"
        self.announced = False
        self.finished = False
        self.held: list[str] = []
        """Arguments received before the call's name (emitted with the first delta once it is known)."""
        self.held_size = 0


class _Pieces(msgspec.Struct, gc=False):
    """What one chunk carries for the selected choice, gathered before the ChunkResponse is built.

    Each list is made when its first piece arrives: most chunks carry one kind of text, or none."""

    content: list[str] | None = None
    reasoning: list[str] | None = None
    refusal: list[str] | None = None
    signatures: list[str] | None = None
    encrypted: list[str] | None = None
    images: list[str] | None = None
    results: list[ToolResult] | None = None
    finish_reason: str | None = None
    stop_reason: str | None = None


class OpenAIChatConverter:
    """Chat Completions chunks -> `ChunkResponse` (sans-IO core of `convert_openai_chat`).

    The deltas of the other choices than ``choice`` are ignored. Usage is the request's, all choices
    together. Tool calls get ``finished=True`` on the chunk with the choice's ``finish_reason`` (any
    reason: a call cut by ``length`` is over too). A stream that ends without a ``finish_reason`` leaves its
    calls unfinished (the provider never said): the stages after close them (``truncated`` when their
    arguments are cut off).

    A call's arguments are held until its name arrives (the name decides what the call is). A call that
    has no name when its arguments pass ``max_held_arguments``, at its ``finish_reason`` or at the end of
    the stream raises `ConverterError`, after its id and held arguments were given out in a delta without
    a name: nothing received is lost, and the pipeline folds it into an invocation carrying the error.

    Args:
        id_factory: makes the ids of calls the stream sends without one, from their position.
        choice: the ``index`` of the choice of an ``n > 1`` request that becomes the stream.
        max_held_arguments: cap, in characters, of the arguments held for a call with no name yet.
    """

    __slots__ = (
        "_by_index",
        "_by_index_id",
        "_calls",
        "_choice",
        "_emitted_finish",
        "_event_number",
        "_executed",
        "_finish_reason",
        "_id_factory",
        "_last_call",
        "_legacy_call",
        "_max_held",
        "_metadata",
        "_metadata_chunk",
        "_open",
        "_usage",
    )

    def __init__(
        self,
        *,
        id_factory: IdFactory | None = None,
        choice: int = 0,
        max_held_arguments: int = DEFAULT_MAX_HELD_ARGUMENTS,
    ) -> None:
        self._id_factory = id_factory or new_call_id
        self._choice = check_count("choice", choice, minimum=0)
        self._max_held = check_count("max_held_arguments", max_held_arguments, minimum=1)
        self._event_number = 0
        self._metadata: dict[str, Any] = {}
        self._metadata_chunk = _NO_METADATA
        """The event whose metadata was seen last (later events repeat it, or bring a change)."""
        self._usage: TokenUsage | None = None
        self._calls: list[_Call] = []
        self._open: list[_Call] = []
        """Calls not yet finished, in order of position: the ones a ``finish_reason`` finishes."""
        self._by_index: dict[int | None, _Call] = {}
        """The call last seen at each provider ``index`` (never ``None``, which finds no call)."""
        self._by_index_id: dict[tuple[int, str], _Call] = {}
        """Calls by provider ``index`` and ``id``: servers that number every call 0 tell calls apart by id."""
        self._executed: dict[int, _Call] = {}
        """Groq's executed tools by their ``index``."""
        self._last_call: _Call | None = None
        self._legacy_call: _Call | None = None
        self._finish_reason: str | None = None
        self._emitted_finish: str | None = None

    def feed(self, item: Payload | Mapping[str, Any], /) -> list[ChunkResponse]:
        """Convert one event: a framed payload's bytes, or a chunk dict.

        Raises `ProviderError` for an in-band error, `ConverterError` for an event that does
        not fit the chunk's schema (naming the event and the field) and
        `StreamDecodeError` for bytes that are not JSON."""
        number = self._event_number
        self._event_number = number + 1
        if type(item) is Payload:  # the decode of `EventDecoder.decode`, without a call between
            data = item.data
            try:
                chunk = _decode_bytes(data)
            except PAYLOAD_ERRORS as error:
                raise payload_error(error, item, number) from None
            if not data.isascii():
                check_utf8(data, item.offset)
        else:
            found = _from_mapping(item, number)
            if found is None:
                return []
            chunk = found
        # Nearly every event repeats the last metadata, carries no usage and one choice, which `_plain`
        # reads. The metadata is compared field by field: a tuple of it on every event costs more.
        last = self._metadata_chunk
        choices = chunk.choices
        if (
            chunk.error is None
            and chunk.id == last.id
            and chunk.model == last.model
            and chunk.created == last.created
            and chunk.system_fingerprint == last.system_fingerprint
            and chunk.service_tier == last.service_tier
            and chunk.usage is None
            and chunk.x_groq is None
            and choices
            and len(choices) == 1
        ):
            plain = self._plain(choices[0])
            if plain is not None:
                return plain
        return self._gathered(chunk, item, number)

    def _gathered(
        self, chunk: ChatChunk, item: Payload | Mapping[str, Any], number: int
    ) -> list[ChunkResponse]:
        """The chunks of any event: its error, new metadata, usage and the selected choice's deltas."""
        if chunk.error is not None:
            raise _provider_error(chunk.error, item, number)
        metadata = self._metadata_changes(chunk)
        usage = self._usage_change(chunk, number)
        return self._choices(chunk.choices or [], number, usage, metadata)

    def finish(self) -> list[ChunkResponse]:
        """The last chunk, ``is_complete=True`` with the finish reason (none if the stream was empty).

        A call still without a name raises `ConverterError` instead, after a chunk with its id and
        held arguments (see the class docstring)."""
        if self._event_number == 0:
            return []
        number = self._event_number
        self._event_number = 0
        nameless = [call for call in self._open if not call.announced]
        if nameless:
            deltas = [self._nameless_delta(call) for call in nameless]
            positions = ", ".join(str(call.position) for call in nameless)
            exc = ConverterError(
                f"end of stream after event {number - 1}: tool call {positions} never got a function name",
                event_number=number - 1,
            )
            exc.partial_outputs = [ChunkResponse(tool_calls=deltas)]
            raise exc
        return [ChunkResponse(is_complete=True, finish_reason=self._finish_reason)]

    def _plain(self, choice: ChatChoice) -> list[ChunkResponse] | None:
        """The chunks of an event with nothing new but the selected choice's one piece of ``content``, of
        reasoning, or of one announced call's arguments, without a finish: nearly every event. ``None``
        for any other event, which `_choices` gathers into the same chunks."""
        delta = choice.delta
        if delta is None or choice.finish_reason or choice.index != self._choice:
            return None
        if (
            delta.refusal is not None
            or delta.reasoning_details is not None
            or delta.images is not None
            or delta.executed_tools is not None
            or delta.function_call is not None
        ):
            return None  # the fields only `_choices` gathers
        content, reasoning = delta.content, delta.reasoning_content or delta.reasoning
        if delta.tool_calls:
            return None if content or reasoning else self._plain_arguments(delta.tool_calls)
        if not content:
            return [ChunkResponse(reasoning=reasoning)] if reasoning else None
        if reasoning or type(content) is not str:
            return None  # both kinds of text, or content as a list of parts
        return [ChunkResponse(content=content)]

    def _plain_arguments(self, tool_calls: list[ChatToolCall]) -> list[ChunkResponse] | None:
        """`_plain` for a delta with only ``tool_calls``: the next arguments of one announced call."""
        raw = tool_calls[0]
        function = raw.function
        call = self._by_index.get(raw.index)  # `_continued_call`, inline: this runs once per delta
        if len(tool_calls) != 1 or raw.id or call is None or not call.announced or call.finished:
            return None
        arguments = function.arguments if function is not None else None
        if type(arguments) is not str:
            return None
        self._last_call = call
        if not arguments:
            return []
        return [
            ChunkResponse(tool_calls=[ToolCallDelta(call.position, None, None, arguments, False, call.kind)])
        ]

    def _choices(
        self,
        choices: list[ChatChoice],
        number: int,
        usage: TokenUsage | None,
        metadata: dict[str, Any] | None,
    ) -> list[ChunkResponse]:
        """The chunks of the selected choice's deltas (usually one, none in a chunk without choices) with
        the event's usage and metadata.

        If a call goes wrong (arguments after its finish, no name at the end), what the event carried
        before goes out first, on the exception (calls may have been announced)."""
        pieces: _Pieces | None = None
        tool_deltas: list[ToolCallDelta] = []
        selected = self._choice
        try:
            for choice in choices:
                index = choice.index
                if index == selected or (index is None and selected == 0):
                    if pieces is None:
                        pieces = _Pieces()
                    self._choice_delta(choice, number, pieces, tool_deltas)
        except ConverterError as exc:
            before = self._chunks(pieces or _Pieces(), tool_deltas, usage, metadata)
            exc.partial_outputs = before + exc.partial_outputs
            raise
        if pieces is not None:
            return self._chunks(pieces, tool_deltas, usage, metadata)
        return [ChunkResponse(usage=usage, metadata=metadata)] if usage or metadata else []

    def _choice_delta(
        self, choice: ChatChoice, number: int, pieces: _Pieces, tool_deltas: list[ToolCallDelta]
    ) -> None:
        """Gather the choice's delta: tool calls into ``tool_deltas``, the rest into ``pieces``."""
        delta = choice.delta
        if delta is not None:
            _text_fields(delta, pieces)
            if delta.tool_calls:
                for raw in delta.tool_calls:
                    self._tool_delta(raw, number, tool_deltas)
            if delta.function_call is not None:
                self._legacy_delta(delta.function_call, number, tool_deltas)
            if delta.executed_tools:
                self._executed_tools(delta.executed_tools, pieces, tool_deltas)
        if choice.finish_reason:
            self._finish(choice.finish_reason, choice.native_finish_reason, number, pieces, tool_deltas)

    def _legacy_delta(
        self, function_call: ChatFunction, number: int, tool_deltas: list[ToolCallDelta]
    ) -> None:
        """The deprecated ``function_call``: one call per response, without an id."""
        name, arguments = function_call.name, function_call.arguments
        if name is None and arguments is None:
            return
        call = self._legacy_call
        if call is None:
            call = self._legacy_call = self._new_call()
        self._call_delta(call, name, arguments, "function", number, tool_deltas)

    def _chunks(
        self,
        pieces: _Pieces,
        tool_deltas: list[ToolCallDelta],
        usage: TokenUsage | None,
        metadata: dict[str, Any] | None,
    ) -> list[ChunkResponse]:
        """The chunks of what one event carried; none if it carried nothing new."""
        finish_reason = pieces.finish_reason
        if finish_reason is not None:
            finish_reason, metadata = self._new_finish(pieces, bool(tool_deltas), metadata)
        signatures, encrypted = pieces.signatures or (), pieces.encrypted or ()
        chunk = ChunkResponse(
            content="".join(pieces.content) if pieces.content else "",
            reasoning=_joined(pieces.reasoning),
            refusal=_joined(pieces.refusal),
            tool_calls=tool_deltas or None,
            tool_results=pieces.results,
            finish_reason=finish_reason,
            usage=usage,
            metadata=metadata,
            reasoning_signature=signatures[0] if signatures else None,
            encrypted_reasoning=encrypted[0] if encrypted else None,
            image_urls=pieces.images or [],
        )
        if chunk == _NOTHING:
            return []
        if len(signatures) < 2 and len(encrypted) < 2:
            return [chunk]
        # Several signatures or encrypted blobs in one delta stay separate: opaque values cannot be joined.
        return [
            chunk,
            *(ChunkResponse(reasoning_signature=extra) for extra in signatures[1:]),
            *(ChunkResponse(encrypted_reasoning=extra) for extra in encrypted[1:]),
        ]

    def _new_finish(
        self, pieces: _Pieces, with_calls: bool, metadata: dict[str, Any] | None
    ) -> tuple[str | None, dict[str, Any] | None]:
        """The finish reason of an event's chunk and its metadata with the ``stop_reason``; no finish
        reason when it repeats the one given out and finishes no call (OpenRouter, Avian send it again)."""
        finish_reason = pieces.finish_reason
        if finish_reason == self._emitted_finish and not with_calls:
            return None, metadata
        self._emitted_finish = finish_reason
        metadata = metadata or {}
        metadata["stop_reason"] = pieces.stop_reason
        return finish_reason, metadata

    def _tool_delta(self, raw: ChatToolCall, number: int, tool_deltas: list[ToolCallDelta]) -> None:
        function = raw.function
        call = self._continued_call(raw)
        if call is not None and function is not None and type(function.arguments) is str:
            self._last_call = call
            arguments = function.arguments
            if arguments:
                tool_deltas.append(ToolCallDelta(call.position, None, None, arguments, False, call.kind))
            return
        index = raw.index
        provider_id = raw.id or None
        kind: ToolCallKind = "function"
        name: str | None = None
        arguments_: Arguments = None
        if function is not None:
            name, arguments_ = function.name, function.arguments
        elif raw.custom is not None:
            kind, name, arguments_ = "custom", raw.custom.name, raw.custom.input
        call = self._find_call(index, provider_id)
        self._call_delta(call, name, arguments_, kind, number, tool_deltas)

    def _continued_call(self, raw: ChatToolCall) -> _Call | None:
        """The announced, unfinished call whose next arguments ``raw`` may carry (most deltas of a
        streaming call: no id, the index of the call); else ``None``."""
        call = self._by_index.get(raw.index)
        if call is None or not call.announced or call.finished or raw.id:
            return None
        return call

    def _find_call(self, index: int | None, provider_id: str | None) -> _Call:
        """The call a delta belongs to. An ``index`` names the call; an ``id`` only tells apart calls that
        share an index. Without an index, an id continues the last call only if it is that call's id."""
        call: _Call | None
        if index is not None:
            call = self._call_at(index, provider_id)
        else:
            call = self._last_call
            if call is None or (provider_id is not None and call.provider_id not in (None, provider_id)):
                call = self._new_call()
        if provider_id is not None and call.provider_id is None:
            call.provider_id = provider_id
        self._last_call = call
        return call

    def _call_at(self, index: int, provider_id: str | None) -> _Call:
        """The call at ``index`` with id ``provider_id`` (a new one if there is none), remembered there."""
        call = self._by_index.get(index)
        if call is not None and provider_id is not None and call.provider_id not in (None, provider_id):
            # Another id at a taken index: another call (servers that number every call 0).
            call = self._by_index_id.get((index, provider_id))
        if call is None:
            call = self._new_call()
        self._by_index[index] = call
        if provider_id is not None:
            self._by_index_id[(index, provider_id)] = call
        return call

    def _new_call(self) -> _Call:
        call = _Call(len(self._calls))
        self._calls.append(call)
        self._open.append(call)
        return call

    def _nameless_delta(self, call: _Call) -> ToolCallDelta:
        """The delta that gives out a call that never got a name: its id and the arguments it held."""
        call.call_id = call.provider_id or self._id_factory(call.position)
        held = "".join(call.held) or None
        call.held = []
        call.announced = True
        return ToolCallDelta(call.position, call.call_id, None, held, kind=call.kind)

    def _executed_tools(
        self, executed: list[ExecutedTool], pieces: _Pieces, tool_deltas: list[ToolCallDelta]
    ) -> None:
        """Groq's ``executed_tools``: each a server call, finished with a result once its output is there."""
        for raw in executed:
            call = self._executed.get(raw.index)
            if call is None:
                call = self._executed[raw.index] = self._new_call()
                call.kind = "server"
                call.name = raw.type
                call.call_id = raw.id or self._id_factory(call.position)
                call.announced = True
                text = _arguments(raw.arguments) if raw.arguments is not None else None
                tool_deltas.append(
                    ToolCallDelta(call.position, call.call_id, call.name, text or None, kind="server")
                )
            if call.finished:
                continue
            result = _executed_result(raw)
            if result:
                call.finished = True
                tool_deltas.append(ToolCallDelta(call.position, finished=True, kind="server"))
                pieces.results = _add(
                    pieces.results, ToolResult(call_id=call.call_id, name=call.name, content=result)
                )

    def _call_delta(
        self,
        call: _Call,
        name: str | None,
        arguments: Arguments,
        kind: ToolCallKind,
        number: int,
        tool_deltas: list[ToolCallDelta],
    ) -> None:
        if name and call.name is None:
            call.name = name
        if kind != "function":
            call.kind = kind
        text = _arguments(arguments) if arguments is not None else ""
        if text and call.finished:
            raise ConverterError(
                f"event {number}: tool call {call.position} received arguments after its finish_reason",
                event_number=number,
            )
        if call.announced:
            if text:
                tool_deltas.append(ToolCallDelta(call.position, None, None, text, False, call.kind))
            return
        self._hold_or_announce(call, text, number, tool_deltas)

    def _hold_or_announce(
        self, call: _Call, text: str, number: int, tool_deltas: list[ToolCallDelta]
    ) -> None:
        """Hold the arguments of a call not yet announced until its name comes, then give them out with it."""
        if text:
            call.held.append(text)
            call.held_size += len(text)
        if call.name is None:
            if call.held_size > self._max_held:
                tool_deltas.append(self._nameless_delta(call))
                raise ConverterError(
                    f"event {number}: tool call {call.position} sent more than {self._max_held} "
                    "characters of arguments before its function name",
                    event_number=number,
                )
            return  # wait for the name: the first delta of a call carries its id and name
        call.announced = True
        call.call_id = call.provider_id or self._id_factory(call.position)
        held = "".join(call.held) or None
        call.held = []
        tool_deltas.append(ToolCallDelta(call.position, call.call_id, call.name, held, kind=call.kind))

    def _finish(
        self,
        reason: str,
        native_reason: str | None,
        number: int,
        pieces: _Pieces,
        tool_deltas: list[ToolCallDelta],
    ) -> None:
        lowered = reason.lower()
        pieces.finish_reason = self._finish_reason = _FINISH_REASONS.get(lowered, lowered)
        pieces.stop_reason = native_reason or reason
        open_calls, self._open = self._open, []
        if not open_calls:
            return
        nameless = _finish_calls(open_calls, tool_deltas)
        if nameless:
            tool_deltas.extend(self._nameless_delta(call) for call in nameless)
            positions = ", ".join(str(call.position) for call in nameless)
            raise ConverterError(
                f"event {number}: tool call {positions} ended without a function name", event_number=number
            )

    def _metadata_changes(self, chunk: ChatChunk) -> dict[str, Any] | None:
        """The response-level facts of ``chunk`` (`_METADATA_KEYS`) that are new."""
        seen = _metadata(chunk)
        if seen == _metadata(self._metadata_chunk):
            return None
        self._metadata_chunk = chunk
        changes: dict[str, Any] = {}
        known = self._metadata
        for key, value in zip(_METADATA_KEYS, seen, strict=True):
            if value and known.get(key) != value:
                known[key] = changes[key] = value
        return changes or None

    def _usage_change(self, chunk: ChatChunk, number: int) -> TokenUsage | None:
        """The chunk's usage (or Groq's ``x_groq.usage``) if it differs from the last one given out."""
        raw = chunk.usage
        if raw is None and chunk.x_groq is not None:
            raw = chunk.x_groq.usage
        if raw is None:
            return None
        usage = chat_usage(raw, number)
        if usage == self._usage:
            return None
        self._usage = usage
        return usage


def _finish_calls(open_calls: list[_Call], tool_deltas: list[ToolCallDelta]) -> list[_Call]:
    """Mark the announced calls finished, on their last delta in this chunk or on a new one; return the
    calls that never got a name."""
    # The last delta of each call in this chunk, by position: one pass, whatever the number of calls.
    in_chunk = {delta.index: position for position, delta in enumerate(tool_deltas)}
    nameless: list[_Call] = []
    for call in open_calls:
        if call.finished:
            continue
        if not call.announced:
            nameless.append(call)
            continue
        call.finished = True
        position = in_chunk.get(call.position)
        if position is not None:
            tool_deltas[position] = msgspec.structs.replace(tool_deltas[position], finished=True)
        else:
            tool_deltas.append(ToolCallDelta(call.position, finished=True, kind=call.kind))
    return nameless


def _metadata(chunk: ChatChunk) -> tuple[object, ...]:
    """The response-level facts of a chunk, in `_METADATA_KEYS` order."""
    return (chunk.id, chunk.model, chunk.created, chunk.system_fingerprint, chunk.service_tier)


def _from_mapping(event: object, number: int) -> ChatChunk | None:
    """A chunk dict (or an event of openai-python's ``.stream()`` helper) as the typed chunk; ``None`` for
    the helper's derived events, which repeat what its chunk events said."""
    if not is_mapping(event):
        raise ConverterError(
            f"event {number}: expected a chunk object, got {type(event).__name__}", event_number=number
        )
    if "choices" not in event:
        kind = event.get("type")
        if kind == "chunk":  # the helper's ChunkEvent carries the raw chunk
            inner = event.get("chunk")
            if not is_mapping(inner):
                raise field_error(number, "chunk", "an object", inner)
            return _decode_chunk(inner, number)
        if type(kind) is str and kind in _HELPER_EVENTS:
            return None
    return _decode_chunk(event, number)


def _provider_error(error: Any, item: Payload | Mapping[str, Any], number: int) -> ProviderError:
    """The `ProviderError` for the in-band ``error`` of event ``number``, carrying its payload."""
    payload: Any = msgspec.json.decode(item.data) if type(item) is Payload else item
    if is_mapping(payload) and "choices" not in payload and payload.get("type") == "chunk":
        payload = payload["chunk"]
    details = error if is_mapping(error) else {"message": str(error)}
    return ProviderError.from_payload(details, payload, f"event {number}")


def _joined(pieces: list[str] | None) -> str | None:
    """The pieces of one kind of text as one string, or ``None`` when there is no text."""
    return ("".join(pieces) or None) if pieces else None


def _add(into: list[Any] | None, piece: Any) -> list[Any]:
    """``into`` with ``piece`` appended (a new list when there is none yet)."""
    if into is None:
        return [piece]
    into.append(piece)
    return into


def _arguments(value: Arguments) -> str:
    """Arguments text; an object or array (some servers send parsed arguments) becomes its JSON text."""
    if value is None or type(value) is str:
        return value or ""
    return msgspec.json.encode(value).decode()


def _text_fields(delta: ChatDelta, pieces: _Pieces) -> None:
    """Content, refusal, reasoning and images of a delta, into ``pieces``."""
    content = delta.content
    if content:
        if type(content) is str:
            pieces.content = _add(pieces.content, content)
        else:
            _content_parts(content, pieces)  # type: ignore[arg-type]
    reasoning = delta.reasoning_content or delta.reasoning
    if reasoning:
        pieces.reasoning = _add(pieces.reasoning, reasoning)
    if delta.refusal:
        pieces.refusal = _add(pieces.refusal, delta.refusal)
    if delta.reasoning_details:
        _reasoning_details(delta.reasoning_details, pieces, with_text=not reasoning)
    if delta.images:
        _images(delta.images, pieces)


def _content_parts(parts: list[ContentPart], pieces: _Pieces) -> None:
    """``content`` as a list of typed parts: ``text`` parts are content, ``thinking`` parts reasoning."""
    for part in parts:
        if part.type == "text":
            if part.text:
                pieces.content = _add(pieces.content, part.text)
        elif part.type == "thinking":
            thinking = part.thinking
            if isinstance(thinking, str):
                pieces.reasoning = _add(pieces.reasoning, thinking)
            elif thinking:
                for inner in thinking:
                    if inner.type == "text" and inner.text:
                        pieces.reasoning = _add(pieces.reasoning, inner.text)


def _reasoning_details(details: list[ReasoningDetail], pieces: _Pieces, *, with_text: bool) -> None:
    """OpenRouter's ``reasoning_details``; their text is taken only when no plain reasoning field had it."""
    for detail in details:
        kind = detail.type
        if kind == "reasoning.encrypted":
            if detail.data:
                pieces.encrypted = _add(pieces.encrypted, detail.data)
            continue
        if with_text and kind in ("reasoning.text", "reasoning.summary"):
            text = detail.text if kind == "reasoning.text" else detail.summary
            if text:
                pieces.reasoning = _add(pieces.reasoning, text)
        if detail.signature:
            pieces.signatures = _add(pieces.signatures, detail.signature)


def _images(images: list[ImageOutput], pieces: _Pieces) -> None:
    """OpenRouter's image outputs: ``[{"type": "image_url", "image_url": {"url": ...}}]``."""
    for image in images:
        url = image.image_url
        if type(url) is ImageURL:
            url = url.url
        if url:
            pieces.images = _add(pieces.images, url)


def _executed_result(raw: ExecutedTool) -> dict[str, Any]:
    """The result fields of a Groq executed tool that are there (none until it has run)."""
    fields = {
        "output": raw.output,
        "search_results": raw.search_results,
        "code_results": raw.code_results,
        "browser_results": raw.browser_results,
    }
    return {key: value for key, value in fields.items() if value is not None}


@pipable_operator
def convert_openai_chat(
    source: AsyncIterable[Payload | Mapping[str, Any]],
    *,
    id_factory: IdFactory | None = None,
    choice: int = 0,
) -> AsyncIterator[ChunkResponse]:
    """OpenAI Chat Completions (or compatible) chunks, as payloads or dicts, to `ChunkResponse`s.

    Args:
        source: the provider's chunks, as `Payload`s from a framer or as dicts.
        id_factory: makes the ids of calls the stream sends without one (`new_call_id` by default).
        choice: the ``index`` of the choice of an ``n > 1`` request that becomes the stream.

    Raises:
        StreamDecodeError: a chunk's bytes are not JSON (naming the byte offset).
        ConverterError: a chunk does not fit the schema, or a call never gets a name (see
            `OpenAIChatConverter`).
        ProviderError: the stream carries an in-band error.
    """
    return operator_stream(source, OpenAIChatConverter(id_factory=id_factory, choice=choice))

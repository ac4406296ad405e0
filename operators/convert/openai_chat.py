"""OpenAI Chat Completions chunks (and OpenAI-compatible servers' variants) -> :class:`ChunkResponse`.

One ``ChunkResponse`` per chunk that carries something, then a last ``is_complete=True`` chunk from
:meth:`~OpenAIChatConverter.finish`. What compatible servers do differently, and what is made of it:

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
- an ``error`` object in a chunk (OpenRouter mid-stream errors, with or without ``choices``) raises
  :class:`ProviderError` after everything before it was returned;
- Groq's ``executed_tools`` (compound models: tools Groq ran itself, listed in a delta once when called and
  again, at the same ``index``, with their ``output``): a ``server`` call named after the tool's ``type``
  with its ``arguments``, finished with a :class:`ToolResult` holding the result fields Groq sent;
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

from operators.convert._base import IdFactory, field_error, new_call_id
from pipeline._options import check_count
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta, ToolCallKind, ToolResult
from pipeline.stage import operator_stream

__all__ = ["DEFAULT_MAX_HELD_ARGUMENTS", "OpenAIChatConverter", "convert_openai_chat"]

DEFAULT_MAX_HELD_ARGUMENTS: Final = 32 * 1024 * 1024
"""Characters of arguments held for a call whose name has not arrived yet (the splitter's default cap on
one call's arguments): past it the stream fails with a :class:`ConverterError`."""

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
_EXECUTED_RESULT_KEYS = ("output", "search_results", "code_results", "browser_results")
"""The fields of a Groq executed tool that carry its result."""


class _LiveFunction(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    arguments: str | None = None
    name: str | None = None


class _LiveToolCall(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    index: int
    function: _LiveFunction
    type: str | None = None
    id: str | None = None


class _LiveDelta(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    content: str | None = None
    tool_calls: list[_LiveToolCall] | None = None
    role: str | None = None
    refusal: None = None
    reasoning_content: None = None
    reasoning: None = None
    function_call: None = None


class _LiveChoice(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    delta: _LiveDelta
    index: int = 0
    finish_reason: None = None
    logprobs: None = None


class _LiveChunk(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The shape of nearly every chunk of a live stream (the next text, or the next arguments of a call),
    for :meth:`OpenAIChatConverter.feed_json`. Any other field, or a value this schema does not allow
    (a ``finish_reason``, usage, an error, a name), fails the decoding, and the chunk takes the general
    path."""

    choices: tuple[_LiveChoice]
    """Exactly one choice (several, or none, fail the decoding)."""
    id: str | None = None
    object: str | None = None
    created: int | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    service_tier: str | None = None
    usage: None = None
    obfuscation: str | None = None


_live_decode = msgspec.json.Decoder(_LiveChunk).decode


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


class _Pieces:
    """What one chunk carries for the selected choice, gathered before the ChunkResponse is built."""

    __slots__ = (
        "content",
        "encrypted",
        "finish_reason",
        "images",
        "reasoning",
        "refusal",
        "results",
        "signatures",
        "stop_reason",
    )

    def __init__(self) -> None:
        self.content: list[str] = []
        self.results: list[ToolResult] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.signatures: list[str] = []
        self.encrypted: list[str] = []
        self.images: list[str] = []
        self.finish_reason: str | None = None
        self.stop_reason: str | None = None


class OpenAIChatConverter:
    """Chat Completions chunk dicts -> :class:`ChunkResponse` (sans-IO core of :func:`convert_openai_chat`).

    ``choice`` selects which choice of an ``n > 1`` request becomes the stream (by its ``index``); the
    deltas of the other choices are ignored. Usage is the request's, all choices together. Tool calls get
    ``finished=True`` on the chunk with the choice's ``finish_reason`` (any reason: a call cut by
    ``length`` is over too); ids missing from the stream come from ``id_factory(position)``.
    A stream that ends without a ``finish_reason`` leaves its calls unfinished (the provider never said):
    the stages after close them (``truncated`` when their arguments are cut off).

    A call's arguments are held until its name arrives (the name decides what the call is), at most
    ``max_held_arguments`` characters. A call that has no name when its arguments pass that cap, at its
    ``finish_reason`` or at the end of the stream raises :class:`ConverterError`, after its id and held
    arguments were given out in a delta without a name: nothing received is lost, and the pipeline folds
    it into an invocation carrying the error.
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
        "_open",
        "_salvage",
        "_seen_metadata",
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
        self._seen_metadata: tuple[object, ...] = ()
        self._usage: TokenUsage | None = None
        self._calls: list[_Call] = []
        self._open: list[_Call] = []
        """Calls not yet finished, in order of position: the ones a ``finish_reason`` finishes."""
        self._by_index: dict[int, _Call] = {}
        """The call last seen at each provider ``index``."""
        self._by_index_id: dict[tuple[int, str], _Call] = {}
        """Calls by provider ``index`` and ``id``: servers that number every call 0 tell calls apart by id."""
        self._executed: dict[int, _Call] = {}
        """Groq's executed tools by their ``index``."""
        self._salvage: _Pieces | None = None
        """What the selected choice had gathered when a field of its delta turned out wrong."""
        self._last_call: _Call | None = None
        self._legacy_call: _Call | None = None
        self._finish_reason: str | None = None
        self._emitted_finish: str | None = None

    def feed(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        number = self._event_number
        self._event_number = number + 1
        if type(event) is dict:
            fast = self._fast(event)
            if fast is not None:
                return fast
        # Events are usually dicts from a JSON decoder: checking the exact type first skips the slow
        # Mapping ABC check (here and below).
        if type(event) is not dict and not isinstance(event, Mapping):
            raise ConverterError(
                f"event {number}: expected a chunk object, got {type(event).__name__}", event_number=number
            )
        if "choices" not in event:
            kind = event.get("type")
            if kind == "chunk":  # openai-python's .stream() helper: its ChunkEvent carries the raw chunk
                inner = event.get("chunk")
                if type(inner) is not dict and not isinstance(inner, Mapping):
                    raise _field_error(number, "chunk", "an object", inner)
                event = inner
            elif kind in _HELPER_EVENTS:
                return []  # derived by the helper from the chunks, which were read already
        error = event.get("error")
        if error is not None:
            details = error if isinstance(error, Mapping) else {"message": str(error)}
            raise ProviderError.from_payload(details, event, f"event {number}")

        metadata = self._metadata_changes(event)
        usage = self._usage_change(event, number) if "usage" in event or "x_groq" in event else None
        pieces: _Pieces | None = None
        tool_deltas: list[ToolCallDelta] = []
        choices = event.get("choices")
        try:
            if choices:
                if not isinstance(choices, list):
                    raise _field_error(number, "choices", "a list", choices)
                for choice in choices:
                    if type(choice) is not dict and not isinstance(choice, Mapping):
                        raise _field_error(number, "choices[]", "an object", choice)
                    index = choice.get("index", 0)
                    if type(index) is not int and index is not None:
                        raise _field_error(number, "choices[].index", "an integer", index)
                    if index == self._choice or (index is None and self._choice == 0):
                        pieces = self._choice_delta(choice, number, pieces, tool_deltas)
        except ConverterError as exc:
            # What this chunk carried before the wrong field goes out first (calls may have been announced).
            salvaged, self._salvage = self._salvage or pieces or _Pieces(), None
            chunks = self._chunks(salvaged, tool_deltas, usage, metadata)
            exc.partial_outputs = chunks + exc.partial_outputs
            raise
        if pieces is not None:
            return self._chunks(pieces, tool_deltas, usage, metadata)
        if not (tool_deltas or usage or metadata):
            return []
        return [ChunkResponse(tool_calls=tool_deltas or None, usage=usage, metadata=metadata)]

    def _fast(self, event: dict[str, Any]) -> list[ChunkResponse] | None:
        """The fast path for the two chunks of nearly every stream, or ``None`` for the general path.

        A chunk of one choice (the selected one, no ``finish_reason``, no usage, no error) whose delta is
        only text ``content``, or only the next ``arguments`` of one announced call, gives exactly the
        chunk the general path gives (a property test compares the two), without gathering ``_Pieces``.
        """
        choices = event.get("choices")
        if type(choices) is not list or len(choices) != 1:
            return None
        choice = choices[0]
        if (
            type(choice) is not dict
            or choice.get("finish_reason")
            or event.get("error") is not None
            or event.get("usage") is not None
            or "x_groq" in event
        ):
            return None
        index = choice.get("index", 0)
        delta = choice.get("delta")
        if type(index) is not int or index != self._choice or type(delta) is not dict:
            return None
        content = delta.get("content")
        if type(content) is str:
            if not content or not (len(delta) == 1 or _only_content(delta)):
                return None
            return [ChunkResponse(content=content, metadata=self._metadata_changes(event))]
        tool_calls = delta.get("tool_calls")
        if type(tool_calls) is not list or len(tool_calls) != 1 or len(delta) != 1:
            return None
        raw = tool_calls[0]
        if type(raw) is not dict or raw.get("id"):
            return None
        index = raw.get("index")
        function = raw.get("function")
        if type(index) is not int or type(function) is not dict:
            return None
        call = self._by_index.get(index)
        if call is None or not call.announced or call.finished:
            return None
        arguments = function.get("arguments")
        if type(arguments) is not str or not arguments or function.get("name"):
            return None
        self._last_call = call
        metadata = self._metadata_changes(event)
        delta_ = ToolCallDelta(call.position, None, None, arguments, False, call.kind)
        return [ChunkResponse(tool_calls=[delta_], metadata=metadata)]

    def feed_json(self, data: bytes) -> list[ChunkResponse] | None:
        """The chunks of the event whose JSON is ``data``, if it has the shape of :meth:`_fast`'s chunks;
        else ``None``, and nothing is consumed: decode ``data`` and :meth:`feed` the object instead.

        For an SSE adapter fused with this converter: a typed decode straight from the bytes into the
        live chunk's schema, instead of building the event's dicts and reading them back (measured:
        about half the decoding and a third of the converting). A property test keeps it equal to
        :meth:`feed` of the decoded object."""
        try:
            event = _live_decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return None  # not the live shape (a ValidationError), or not JSON: the general path says why
        choice = event.choices[0]  # the only one: the schema says so
        if choice.index != self._choice:
            return None
        delta = choice.delta
        content = delta.content
        tool_calls = delta.tool_calls
        # The metadata fields, compared here and read only when they change (most events repeat them).
        seen = (event.id, event.model, event.created, event.system_fingerprint, event.service_tier)
        if tool_calls is None:
            if not content:
                return None
            self._event_number += 1
            if seen == self._seen_metadata:
                return [ChunkResponse(content=content)]
            return [ChunkResponse(content=content, metadata=self._live_metadata(seen))]
        if content or len(tool_calls) != 1:
            return None
        raw = tool_calls[0]
        function = raw.function
        arguments = function.arguments
        if raw.id or function.name or not arguments:
            return None
        call = self._by_index.get(raw.index)
        if call is None or not call.announced or call.finished:
            return None
        self._event_number += 1
        self._last_call = call
        delta_ = ToolCallDelta(call.position, None, None, arguments, False, call.kind)
        if seen == self._seen_metadata:
            return [ChunkResponse(tool_calls=[delta_])]
        return [ChunkResponse(tool_calls=[delta_], metadata=self._live_metadata(seen))]

    def _live_metadata(self, seen: tuple[Any, ...]) -> dict[str, Any] | None:
        """:meth:`_metadata_changes` of a typed live chunk's metadata fields (in ``_METADATA_KEYS`` order)."""
        return self._metadata_changes(
            {key: value for key, value in zip(_METADATA_KEYS, seen, strict=True) if value is not None}
        )

    def finish(self) -> list[ChunkResponse]:
        """The last chunk, ``is_complete=True`` with the finish reason (none if the stream was empty).

        A call still without a name raises :class:`ConverterError` instead, after a chunk with its id and
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

    def _chunks(
        self,
        pieces: _Pieces,
        tool_deltas: list[ToolCallDelta],
        usage: TokenUsage | None,
        metadata: dict[str, Any] | None,
    ) -> list[ChunkResponse]:
        finish_reason = pieces.finish_reason
        if finish_reason is not None and finish_reason == self._emitted_finish and not tool_deltas:
            finish_reason = None  # a repeated finish chunk (OpenRouter, Avian) says nothing new
        if finish_reason is not None:
            self._emitted_finish = finish_reason
            metadata = metadata or {}
            metadata["stop_reason"] = pieces.stop_reason
        content = "".join(pieces.content)
        reasoning = "".join(pieces.reasoning) or None
        refusal = "".join(pieces.refusal) or None
        signature = pieces.signatures[0] if pieces.signatures else None
        encrypted = pieces.encrypted[0] if pieces.encrypted else None
        if not (
            content
            or reasoning
            or refusal
            or tool_deltas
            or finish_reason
            or usage
            or metadata
            or signature
            or encrypted
            or pieces.images
            or pieces.results
        ):
            return []
        chunks = [
            ChunkResponse(
                content=content,
                reasoning=reasoning,
                refusal=refusal,
                tool_calls=tool_deltas or None,
                tool_results=pieces.results or None,
                finish_reason=finish_reason,
                usage=usage,
                metadata=metadata or None,
                reasoning_signature=signature,
                encrypted_reasoning=encrypted,
                image_urls=pieces.images,
            )
        ]
        # Several signatures or encrypted blobs in one delta stay separate: opaque values cannot be joined.
        chunks.extend(ChunkResponse(reasoning_signature=extra) for extra in pieces.signatures[1:])
        chunks.extend(ChunkResponse(encrypted_reasoning=extra) for extra in pieces.encrypted[1:])
        return chunks

    def _choice_delta(
        self,
        choice: Mapping[str, Any],
        number: int,
        pieces: _Pieces | None,
        tool_deltas: list[ToolCallDelta],
    ) -> _Pieces | None:
        """Gather the choice's delta: tool calls into ``tool_deltas``, the rest into ``pieces``, which is
        made only when there is something for it (the deltas of a streaming tool call need none).

        If a field is wrong, what ``pieces`` holds is kept in ``_salvage`` for :meth:`feed` to give out."""
        try:
            delta = choice.get("delta")
            if delta:
                if type(delta) is not dict and not isinstance(delta, Mapping):
                    raise _field_error(number, "choices[].delta", "an object", delta)
                tool_calls = delta.get("tool_calls")
                # Most deltas of a streaming tool call carry nothing else: skip looking for other fields.
                other_fields = tool_calls is None or len(delta) > 1
                if other_fields:
                    pieces = _text_fields(delta, number, pieces)
                if tool_calls:
                    if not isinstance(tool_calls, list):
                        raise _field_error(number, "delta.tool_calls", "a list", tool_calls)
                    for raw in tool_calls:
                        if type(raw) is not dict and not isinstance(raw, Mapping):
                            raise _field_error(number, "delta.tool_calls[]", "an object", raw)
                        self._tool_delta(raw, number, tool_deltas)
                if other_fields:
                    function_call = delta.get("function_call")
                    if function_call:
                        if not isinstance(function_call, Mapping):
                            raise _field_error(number, "delta.function_call", "an object", function_call)
                        self._legacy_function_call(function_call, number, tool_deltas)
                    executed = delta.get("executed_tools")
                    if executed:
                        pieces = pieces or _Pieces()
                        self._executed_tools(executed, number, pieces, tool_deltas)
            reason = choice.get("finish_reason")
            if reason:
                if not isinstance(reason, str):
                    raise _field_error(number, "choices[].finish_reason", "a string", reason)
                pieces = pieces or _Pieces()
                self._finish(reason, choice.get("native_finish_reason"), number, pieces, tool_deltas)
        except ConverterError:
            self._salvage = pieces
            raise
        return pieces

    def _tool_delta(self, raw: Mapping[str, Any], number: int, tool_deltas: list[ToolCallDelta]) -> None:
        index = raw.get("index")
        provider_id = raw.get("id") or None
        function = raw.get("function")
        if provider_id is None and type(index) is int and type(function) is dict:
            # Fast path for most deltas of a streaming call: the next arguments of a call already announced.
            call = self._by_index.get(index)
            if call is not None and call.announced and not call.finished:
                arguments = function.get("arguments")
                if type(arguments) is str:
                    self._last_call = call
                    if arguments:
                        tool_deltas.append(
                            ToolCallDelta(call.position, None, None, arguments, False, call.kind)
                        )
                    return
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise _field_error(number, "delta.tool_calls[].index", "an integer", index)
        if provider_id is not None and not isinstance(provider_id, str):
            raise _field_error(number, "delta.tool_calls[].id", "a string", provider_id)
        kind: ToolCallKind = "function"
        if function is None and isinstance(raw.get("custom"), Mapping):
            kind = "custom"
            function = raw["custom"]
            arguments = function.get("input")
        elif function is None:
            arguments = None
        elif type(function) is dict or isinstance(function, Mapping):
            arguments = function.get("arguments")
        else:
            raise _field_error(number, "delta.tool_calls[].function", "an object", function)
        name = function.get("name") if function is not None else None
        call = self._find_call(index, provider_id)
        self._call_delta(call, name, arguments, kind, number, tool_deltas)

    def _legacy_function_call(
        self, function_call: Mapping[str, Any], number: int, tool_deltas: list[ToolCallDelta]
    ) -> None:
        """The deprecated ``delta.function_call``: one call per response, with no id (one is generated)."""
        call = self._legacy_call
        if call is None:
            call = self._legacy_call = self._new_call()
        self._call_delta(
            call, function_call.get("name"), function_call.get("arguments"), "function", number, tool_deltas
        )

    def _find_call(self, index: int | None, provider_id: str | None) -> _Call:
        """The call a delta belongs to. An ``index`` names the call; an ``id`` only tells apart calls that
        share an index. Without an index, an id continues the last call only if it is that call's id."""
        call: _Call | None
        if index is not None:
            call = self._by_index.get(index)
            if call is not None and provider_id is not None and call.provider_id not in (None, provider_id):
                # Another id at a taken index: another call (servers that number every call 0).
                call = self._by_index_id.get((index, provider_id))
            if call is None:
                call = self._new_call()
            self._by_index[index] = call
            if provider_id is not None:
                self._by_index_id[(index, provider_id)] = call
        else:
            call = self._last_call
            if call is None or (provider_id is not None and call.provider_id not in (None, provider_id)):
                call = self._new_call()
        if provider_id is not None and call.provider_id is None:
            call.provider_id = provider_id
        self._last_call = call
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
        self, executed: object, number: int, pieces: _Pieces, tool_deltas: list[ToolCallDelta]
    ) -> None:
        """Groq's ``executed_tools``: each a server call, finished with a result once its output is there."""
        if not isinstance(executed, list):
            raise _field_error(number, "delta.executed_tools", "a list", executed)
        for raw in executed:
            if type(raw) is not dict and not isinstance(raw, Mapping):
                raise _field_error(number, "delta.executed_tools[]", "an object", raw)
            index = raw.get("index")
            if type(index) is not int:
                raise _field_error(number, "delta.executed_tools[].index", "an integer", index)
            call = self._executed.get(index)
            if call is None:
                call = self._executed[index] = self._new_call()
                call.kind = "server"
                call.name = _text(raw.get("type"), number, "delta.executed_tools[].type")
                provider_id = raw.get("id")
                call.call_id = provider_id if isinstance(provider_id, str) and provider_id else ""
                call.call_id = call.call_id or self._id_factory(call.position)
                call.announced = True
                arguments = raw.get("arguments")
                text = _arguments(arguments, number) if arguments is not None else None
                tool_deltas.append(
                    ToolCallDelta(call.position, call.call_id, call.name, text or None, kind="server")
                )
            if call.finished:
                continue
            result = {key: raw[key] for key in _EXECUTED_RESULT_KEYS if raw.get(key) is not None}
            if result:
                call.finished = True
                tool_deltas.append(ToolCallDelta(call.position, finished=True, kind="server"))
                pieces.results.append(ToolResult(call_id=call.call_id, name=call.name, content=result))

    def _call_delta(
        self,
        call: _Call,
        name: object,
        arguments: object,
        kind: ToolCallKind,
        number: int,
        tool_deltas: list[ToolCallDelta],
    ) -> None:
        if name and call.name is None:
            call.name = _text(name, number, "delta.tool_calls[].function.name")
        if kind != "function":
            call.kind = kind
        if type(arguments) is str:
            text = arguments
        else:
            text = _arguments(arguments, number) if arguments is not None else ""
        if text and call.finished:
            raise ConverterError(
                f"event {number}: tool call {call.position} received arguments after its finish_reason",
                event_number=number,
            )
        if not call.announced:
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
        elif text:
            tool_deltas.append(ToolCallDelta(call.position, None, None, text, False, call.kind))

    def _finish(
        self,
        reason: str,
        native_reason: object,
        number: int,
        pieces: _Pieces,
        tool_deltas: list[ToolCallDelta],
    ) -> None:
        lowered = reason.lower()
        pieces.finish_reason = self._finish_reason = _FINISH_REASONS.get(lowered, lowered)
        stop_reason = native_reason if isinstance(native_reason, str) and native_reason else reason
        pieces.stop_reason = stop_reason
        open_calls, self._open = self._open, []
        if not open_calls:
            return
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
        if nameless:
            tool_deltas.extend(self._nameless_delta(call) for call in nameless)
            positions = ", ".join(str(call.position) for call in nameless)
            raise ConverterError(
                f"event {number}: tool call {positions} ended without a function name", event_number=number
            )

    def _metadata_changes(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        """The response-level facts of ``event`` that are new, or ``None``."""
        get = event.get
        seen = (get("id"), get("model"), get("created"), get("system_fingerprint"), get("service_tier"))
        if seen == self._seen_metadata:
            return None  # the same as in the previous chunk, which recorded them
        self._seen_metadata = seen
        changes: dict[str, Any] = {}
        known = self._metadata
        for key, value in zip(_METADATA_KEYS, seen, strict=True):
            if value and known.get(key) != value:
                known[key] = changes[key] = value
        return changes or None

    def _usage_change(self, event: Mapping[str, Any], number: int) -> TokenUsage | None:
        raw = event.get("usage")
        if raw is None:
            extra = event.get("x_groq")
            if extra is None:
                return None
            raw = extra.get("usage") if isinstance(extra, Mapping) else None
            if raw is None:
                return None
        if not isinstance(raw, Mapping):
            raise _field_error(number, "usage", "an object", raw)
        usage = _usage(raw, number)
        if usage == self._usage:
            return None
        self._usage = usage
        return usage


_TEXT_FIELDS = frozenset(
    {
        "content",
        "refusal",
        "reasoning_content",
        "reasoning",
        "reasoning_details",
        "images",
        "tool_calls",
        "function_call",
        "executed_tools",
    }
)
"""The delta fields the converter reads (any other, such as ``role``, is ignored)."""


def _only_content(delta: dict[str, Any]) -> bool:
    """Whether ``content`` is the only field of ``delta`` the converter reads that is set (not empty)."""
    return not any(value for key, value in delta.items() if key != "content" and key in _TEXT_FIELDS)


def _field_error(number: int, field: str, expected: str, value: object) -> ConverterError:
    return field_error(number, field, expected, value)


def _text(value: object, number: int, field: str) -> str:
    if not isinstance(value, str):
        raise _field_error(number, field, "a string", value)
    return value


def _append_text(into: list[str], value: object, number: int, field: str) -> None:
    """Append ``value`` to ``into`` unless it is absent or empty; anything else than a string is an error."""
    if value:
        into.append(_text(value, number, field))


def _arguments(value: object, number: int) -> str:
    """Arguments text; an object or array (some servers send parsed arguments) becomes its JSON text."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list):
        return msgspec.json.encode(value).decode()
    raise _field_error(number, "delta.tool_calls[].function.arguments", "a string", value)


def _text_fields(delta: Mapping[str, Any], number: int, pieces: _Pieces | None) -> _Pieces | None:
    """Content, refusal, reasoning and images of a delta, into ``pieces`` (made when one is present)."""
    get = delta.get
    content = get("content")
    refusal = get("refusal")
    reasoning = get("reasoning_content") or get("reasoning")
    details = get("reasoning_details")
    images = get("images")
    if not (content or refusal or reasoning or details or images):
        return pieces
    pieces = pieces or _Pieces()
    if content:
        if isinstance(content, str):
            pieces.content.append(content)
        elif isinstance(content, list):
            _content_parts(content, number, pieces)
        else:
            raise _field_error(number, "delta.content", "a string or a list of parts", content)
    if refusal:
        pieces.refusal.append(_text(refusal, number, "delta.refusal"))
    if reasoning:
        pieces.reasoning.append(_text(reasoning, number, "delta.reasoning_content"))
    if details:
        _reasoning_details(details, number, pieces, with_text=not reasoning)
    if images:
        _images(images, number, pieces)
    return pieces


def _content_parts(parts: list[Any], number: int, pieces: _Pieces) -> None:
    """``content`` as a list of typed parts: ``text`` parts are content, ``thinking`` parts reasoning."""
    for part in parts:
        if not isinstance(part, Mapping):
            raise _field_error(number, "delta.content[]", "an object", part)
        kind = part.get("type")
        if kind == "text":
            _append_text(pieces.content, part.get("text"), number, "delta.content[].text")
        elif kind == "thinking":
            thinking = part.get("thinking")
            if isinstance(thinking, str):
                pieces.reasoning.append(thinking)
            elif isinstance(thinking, list):
                for inner in thinking:
                    if isinstance(inner, Mapping) and inner.get("type") == "text":
                        _append_text(
                            pieces.reasoning, inner.get("text"), number, "delta.content[].thinking[].text"
                        )
            elif thinking is not None:
                raise _field_error(number, "delta.content[].thinking", "a string or a list", thinking)


def _reasoning_details(details: object, number: int, pieces: _Pieces, *, with_text: bool) -> None:
    """OpenRouter's ``reasoning_details``; their text is taken only when no plain reasoning field had it."""
    if not isinstance(details, list):
        raise _field_error(number, "delta.reasoning_details", "a list", details)
    for detail in details:
        if not isinstance(detail, Mapping):
            raise _field_error(number, "delta.reasoning_details[]", "an object", detail)
        kind = detail.get("type")
        if kind == "reasoning.encrypted":
            _append_text(pieces.encrypted, detail.get("data"), number, "delta.reasoning_details[].data")
            continue
        if with_text and kind in ("reasoning.text", "reasoning.summary"):
            text = detail.get("text") if kind == "reasoning.text" else detail.get("summary")
            _append_text(pieces.reasoning, text, number, f"delta.reasoning_details[] ({kind})")
        _append_text(
            pieces.signatures, detail.get("signature"), number, "delta.reasoning_details[].signature"
        )


def _images(images: object, number: int, pieces: _Pieces) -> None:
    """OpenRouter's image outputs: ``[{"type": "image_url", "image_url": {"url": ...}}]``."""
    if not isinstance(images, list):
        raise _field_error(number, "delta.images", "a list", images)
    for image in images:
        url = image.get("image_url") if isinstance(image, Mapping) else None
        url = url.get("url") if isinstance(url, Mapping) else url
        _append_text(pieces.images, url, number, "delta.images[].image_url.url")


def _count(raw: Mapping[str, Any], key: str, number: int, field: str = "usage") -> int | None:
    value = raw.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _field_error(number, f"{field}.{key}", "an integer", value)


def _usage(raw: Mapping[str, Any], number: int) -> TokenUsage:
    """OpenAI's usage object (and compatible servers' variants) as :class:`TokenUsage`."""
    prompt = _count(raw, "prompt_tokens", number)
    if prompt is None:
        prompt = _count(raw, "input_tokens", number) or 0
    completion = _count(raw, "completion_tokens", number)
    if completion is None:
        completion = _count(raw, "output_tokens", number) or 0
    total = _count(raw, "total_tokens", number)
    cached = cache_creation = reasoning = None
    prompt_details = raw.get("prompt_tokens_details")
    if isinstance(prompt_details, Mapping):
        field = "usage.prompt_tokens_details"
        cached = _count(prompt_details, "cached_tokens", number, field)
        cache_creation = _count(prompt_details, "cache_write_tokens", number, field)
    if cached is None:
        cached = _count(raw, "prompt_cache_hit_tokens", number)  # DeepSeek
    completion_details = raw.get("completion_tokens_details")
    if isinstance(completion_details, Mapping):
        field = "usage.completion_tokens_details"
        reasoning = _count(completion_details, "reasoning_tokens", number, field)
    if reasoning and total == prompt + completion + reasoning:
        completion += reasoning  # xAI counts reasoning apart from completion tokens
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total if total is not None else prompt + completion,
        cached_tokens=cached,
        cache_creation_tokens=cache_creation,
        reasoning_tokens=reasoning,
    )


@pipable_operator
def convert_openai_chat(
    source: AsyncIterable[Mapping[str, Any]], *, id_factory: IdFactory | None = None, choice: int = 0
) -> AsyncIterator[ChunkResponse]:
    """OpenAI Chat Completions (or compatible) chunk dicts to :class:`ChunkResponse`\\ s."""
    return operator_stream(source, OpenAIChatConverter(id_factory=id_factory, choice=choice))

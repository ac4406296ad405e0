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
  :class:`ProviderError` after everything before it was returned.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

import msgspec
from aiostream import pipable_operator

from operators.providers._common import IdFactory, new_call_id
from operators.sse import provider_error
from pipeline._driver import drive
from pipeline._options import check_count
from pipeline.errors import ConverterError
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta, ToolCallKind

__all__ = ["OpenAIChatConverter", "convert_openai_chat"]

_METADATA_KEYS = ("id", "model", "created", "system_fingerprint", "service_tier")
_FINISH_REASONS = {"function_call": "tool_calls"}


class _Call:
    """One tool call of the selected choice, from its first delta to its ``finished`` delta."""

    __slots__ = ("announced", "call_id", "finished", "held", "kind", "name", "position", "provider_id")

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


class _Pieces:
    """What one chunk carries for the selected choice, gathered before the ChunkResponse is built."""

    __slots__ = (
        "content",
        "encrypted",
        "finish_reason",
        "images",
        "reasoning",
        "refusal",
        "signatures",
        "stop_reason",
    )

    def __init__(self) -> None:
        self.content: list[str] = []
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
    A stream that ends without a ``finish_reason`` leaves its calls unfinished (the provider never said).
    """

    __slots__ = (
        "_by_id",
        "_by_index",
        "_calls",
        "_choice",
        "_emitted_finish",
        "_event_number",
        "_finish_reason",
        "_id_factory",
        "_last_call",
        "_legacy_call",
        "_metadata",
        "_seen_metadata",
        "_usage",
    )

    def __init__(self, *, id_factory: IdFactory | None = None, choice: int = 0) -> None:
        self._id_factory = id_factory or new_call_id
        self._choice = check_count("choice", choice, minimum=0)
        self._event_number = 0
        self._metadata: dict[str, Any] = {}
        self._seen_metadata: tuple[object, ...] = ()
        self._usage: TokenUsage | None = None
        self._calls: list[_Call] = []
        self._by_index: dict[int, _Call] = {}
        self._by_id: dict[str, _Call] = {}
        self._last_call: _Call | None = None
        self._legacy_call: _Call | None = None
        self._finish_reason: str | None = None
        self._emitted_finish: str | None = None

    def feed(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        number = self._event_number
        self._event_number = number + 1
        # Events are usually dicts from a JSON decoder: checking the exact type first skips the slow
        # Mapping ABC check (here and below).
        if type(event) is not dict and not isinstance(event, Mapping):
            raise ConverterError(
                f"event {number}: expected a chunk object, got {type(event).__name__}", event_number=number
            )
        error = event.get("error")
        if error is not None:
            details = error if isinstance(error, Mapping) else {"message": str(error)}
            raise provider_error(details, event, f"event {number}")

        metadata = self._metadata_changes(event)
        usage = self._usage_change(event, number) if "usage" in event or "x_groq" in event else None
        pieces: _Pieces | None = None
        tool_deltas: list[ToolCallDelta] = []
        choices = event.get("choices")
        if choices:
            if not isinstance(choices, list):
                raise _field_error(number, "choices", "a list", choices)
            for choice in choices:
                if type(choice) is not dict and not isinstance(choice, Mapping):
                    raise _field_error(number, "choices[]", "an object", choice)
                index = choice.get("index", 0)
                if index == self._choice or (index is None and self._choice == 0):
                    pieces = self._choice_delta(choice, number, pieces, tool_deltas)
        if pieces is not None:
            return self._chunks(pieces, tool_deltas, usage, metadata)
        if not (tool_deltas or usage or metadata):
            return []
        return [ChunkResponse(tool_calls=tool_deltas or None, usage=usage, metadata=metadata)]

    def finish(self) -> list[ChunkResponse]:
        """The last chunk, ``is_complete=True`` with the finish reason (none if the stream was empty)."""
        if self._event_number == 0:
            return []
        self._event_number = 0
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
        ):
            return []
        chunks = [
            ChunkResponse(
                content=content,
                reasoning=reasoning,
                refusal=refusal,
                tool_calls=tool_deltas or None,
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
        made only when there is something for it (the deltas of a streaming tool call need none)."""
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
        reason = choice.get("finish_reason")
        if reason:
            if not isinstance(reason, str):
                raise _field_error(number, "choices[].finish_reason", "a string", reason)
            pieces = pieces or _Pieces()
            self._finish(reason, choice.get("native_finish_reason"), number, pieces, tool_deltas)
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
        if provider_id is None and index is not None:
            call = self._by_index.get(index)
            if call is not None:  # a later delta of a known call: nothing to record
                self._last_call = call
                return call
        call = None
        if index is not None:
            call = self._by_index.get(index)
            if call is not None and provider_id is not None and call.provider_id not in (None, provider_id):
                call = None  # another id at a taken index: another call (servers that number every call 0)
        elif provider_id is None:
            call = self._last_call
        if call is None and provider_id is not None:
            call = self._by_id.get(provider_id)
        if call is None:
            call = self._new_call()
        if index is not None:
            self._by_index[index] = call
        if provider_id is not None:
            self._by_id[provider_id] = call
            if call.provider_id is None:
                call.provider_id = provider_id
        self._last_call = call
        return call

    def _new_call(self) -> _Call:
        call = _Call(len(self._calls))
        self._calls.append(call)
        return call

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
            if call.name is None:
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
        for call in self._calls:
            if call.finished:
                continue
            if not call.announced:
                raise ConverterError(
                    f"event {number}: tool call {call.position} ended without a function name",
                    event_number=number,
                )
            call.finished = True
            for position, delta in enumerate(tool_deltas):
                if delta.index == call.position:
                    tool_deltas[position] = msgspec.structs.replace(delta, finished=True)
                    break
            else:
                tool_deltas.append(ToolCallDelta(call.position, finished=True, kind=call.kind))

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


def _field_error(number: int, field: str, expected: str, value: object) -> ConverterError:
    return ConverterError(
        f"event {number}: field {field!r} should be {expected}, got {type(value).__name__}: {value!r:.60}",
        event_number=number,
    )


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
    return drive(source, OpenAIChatConverter(id_factory=id_factory, choice=choice))

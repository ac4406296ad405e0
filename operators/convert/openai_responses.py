"""OpenAI Responses API stream events -> `ChunkResponse`.

The Responses API streams typed events addressed to output items by ``output_index`` and ``item_id``.
`OpenAIResponsesConverter` turns them into the normalised chunks of CONTRIBUTING.md:

- ``response.output_text.delta`` -> ``content``; ``response.refusal.delta`` -> ``refusal``.
- ``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta`` -> ``reasoning``. Each
  reasoning item is its own block: every reasoning chunk carries the item's id (``reasoning_id``, the
  ``rs_...`` id a stateless ``store=false`` agent sends back; the id the item was announced with, when a
  proxy rotates ids), ``output_item.added`` opens it and ``output_item.done`` closes it
  (``reasoning_done``). Separate parts of one item (summary parts, reasoning-text parts) are joined with a
  blank line (``"\\n\\n"``) put in front of the first text of each part after the first: every recorded
  summary part starts with a bold title and ends without a newline, so plain concatenation would glue a
  title onto the previous paragraph. No reasoning text is dropped or changed otherwise.
- A reasoning item's ``encrypted_content`` -> ``encrypted_reasoning``, once per item, at its
  ``output_item.done`` (the value in ``output_item.added`` is not final; it is the fallback when ``done``
  has none).
- ``function_call`` items -> ``kind="function"`` calls whose id is the item's ``call_id`` (the item ``id``
  only addresses events); arguments from ``response.function_call_arguments.delta``, else from
  ``.done`` or the finished item. ``custom_tool_call`` items -> ``kind="custom"`` with the free-text input,
  unless the response lists its ``tools`` (in ``response.created``) and none has the call's name: then the
  provider runs it (xAI's server-side ``x_search`` steps, ``x_keyword_search``, ``view_x_video``, ...) and
  it is a ``kind="server"`` call whose arguments are its input (JSON in every recorded xAI step).
  Client-executed built-ins (``local_shell_call``, ``shell_call``, ``computer_call``, ``apply_patch_call``,
  and ``tool_search_call`` with ``execution: "client"``) -> ``kind="function"`` calls named after the item
  type without ``_call``, whose arguments are the JSON of the finished item's ``action`` (or ``operation``,
  ``{"actions": [...]}`` or ``arguments``). ``mcp_call`` items -> ``kind="server"`` (the provider runs them).
  Every call is ``finished`` at its ``output_item.done``.
- A hosted ``shell_call`` (its item names a container ``environment``, any type but ``local``) runs in
  OpenAI's container: a ``kind="server"`` call named ``shell`` (id: its ``call_id``, arguments: its
  ``action``); the ``shell_call_output`` item of the same response that answers it (by ``call_id``) gives
  its `ToolResult` (the ``output`` list) at that item's ``output_item.done``. A
  ``shell_call_output`` that answers no hosted call of this response is skipped.
- Provider-executed built-ins ``web_search_call``, ``file_search_call`` and ``code_interpreter_call`` ->
  ``kind="server"`` calls named ``web_search``, ``file_search``, ``code_interpreter`` whose id is the item
  id and whose arguments are the JSON of the search ``action`` (without its ``sources``), ``{"queries":
  [...]}`` or ``{"code": ..., "container_id": ...}`` (the code streams from
  ``response.code_interpreter_call_code.delta``). At the item's ``output_item.done`` these and ``mcp_call``
  give a `ToolResult`: the search's ``sources``, the file search ``results``, the
  code interpreter ``outputs``, the MCP ``output`` (or its ``error``); ``is_error`` when the item failed.
- Other provider-side items (``image_generation_call``, server-side ``tool_search_call``,
  ``mcp_list_tools``, ``mcp_approval_request``, ...) make no tool call: the client neither runs nor
  answers them.
- ``response.output_text.annotation.added`` -> ``citations`` (``url_citation``, ``file_citation``, ...,
  as sent); annotations of a finished message that no such event carried come with its ``output_item.done``.
- ``response.output_item.added`` for an item already announced (the same id at the same ``output_index``,
  or another id at the ``output_index`` of an unfinished item of the same type: ids may rotate) is a
  duplicate and ignored; the same id at another ``output_index`` or with another type, or another type at
  the ``output_index`` of an unfinished item, raises `ConverterError`.
- ``created`` (``created_at``) is an integer: SDK objects give it as a float, raw JSON as an int.
- ``response.completed`` / ``response.incomplete`` -> the last chunk (``is_complete``), with usage in OpenAI
  Chat terms, ``finish_reason`` and ``metadata["stop_reason"]``; ``response.failed`` and ``error`` raise
  `ProviderError`.

Items are found by ``item_id`` first and by ``output_index`` when the id is unknown: the GitHub Copilot proxy
sends a different ``item_id`` on every event of the same item. Text that arrives only in a ``.done`` event or
in the finished item (servers that do not stream some parts) is emitted there, so nothing is lost; text that
was streamed is never repeated. Sequence numbers are ignored; event types not listed are skipped.

A stream that ends without ``response.completed`` / ``incomplete`` / ``failed`` ends without an
``is_complete`` chunk: calls left unfinished are reported as truncated by the later stages.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from typing import Any, Final, TypeAlias

import msgspec
from aiostream import pipable_operator
from msgspec import UNSET, UnsetType

from operators.convert._base import MISSING, CallIndexer, IdFactory, field_error, is_mapping, new_call_id
from operators.convert._responses_calls import (
    RESULT_IN_ITEM,
    SERVER_BUILTIN_CALLS,
    builtin_arguments,
    call_shape,
    server_arguments,
)
from operators.convert._responses_items import OutputItem, PartKey
from operators.convert._typed_feed import TypedFeed, event_mapping
from pipeline._jsonenc import encode_json
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, Payload, TokenUsage, ToolCallDelta, ToolResult
from pipeline.stage import operator_stream

__all__ = ["OpenAIResponsesConverter", "convert_openai_responses"]

_REASONING_PART_SEPARATOR: Final = "\n\n"
"""Put between two separate parts of one reasoning item's text (summary parts, reasoning-text parts)."""

_INCOMPLETE_FINISH_REASONS: Final[Mapping[str, str]] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


Chunks: TypeAlias = list[ChunkResponse]


def _object_json(value: object) -> str:
    """JSON text of arguments built from a provider object, keys sorted: SDK objects list an item's fields
    in their model's order, raw JSON in the wire's, and both must give the same text. Lone surrogates are
    escaped rather than raising."""
    try:
        return msgspec.json.encode(value, order="sorted").decode()
    except UnicodeEncodeError:
        return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"))


class _ResponsesResponse(msgspec.Struct, gc=False):
    """The ``response`` of a lifecycle event: what the converter reads of it (not its ``output``)."""

    id: Any = None
    model: Any = None
    created_at: Any = None
    service_tier: Any = None
    tools: Any = None
    usage: Any = None
    incomplete_details: Any = None
    error: Any = None


class _ResponsesEvent(msgspec.Struct, gc=False):
    """One Responses stream event, every type in one flat Struct: an event type this version does not
    know decodes too, and gives nothing.

    The addressing fields mean one thing in every event type and are typed; the others stay loose and
    are checked where they are read: ``delta`` is an object in ``response.shell_call_output_content.delta``,
    ``input`` in ``response.steer``, and an output ``item`` varies by its type.
    """

    type: str | UnsetType = UNSET
    item_id: str | None = None
    output_index: int | None = None
    content_index: int = 0
    summary_index: int = 0
    delta: Any = UNSET
    text: Any = UNSET
    refusal: Any = UNSET
    arguments: Any = UNSET
    input: Any = UNSET
    item: Any = UNSET
    annotation: Any = UNSET
    response: _ResponsesResponse | UnsetType | None = UNSET
    error: Any = None


class OpenAIResponsesConverter(TypedFeed[_ResponsesEvent]):
    """Sans-IO converter of OpenAI Responses stream events (a `Payload` or a dict each) into
    `ChunkResponse`.

    ``id_factory(index)`` makes the id of a call the server sent without a ``call_id``.
    """

    def __init__(self, *, id_factory: IdFactory | None = None) -> None:
        super().__init__(
            _ResponsesEvent,
            {
                "response.created": self._on_response_started,
                "response.queued": self._on_response_started,
                "response.in_progress": self._on_response_started,
                "response.output_item.added": self._on_item_added,
                "response.output_item.done": self._on_item_done,
                "response.output_text.delta": self._on_text_delta,
                "response.output_text.done": self._on_text_done,
                "response.refusal.delta": self._on_refusal_delta,
                "response.refusal.done": self._on_refusal_done,
                "response.reasoning_summary_text.delta": self._reasoning_deltas("summary"),
                "response.reasoning_summary_text.done": self._on_summary_done,
                "response.reasoning_text.delta": self._reasoning_deltas("reasoning"),
                "response.reasoning_text.done": self._on_reasoning_text_done,
                "response.function_call_arguments.delta": self._on_arguments_delta,
                "response.custom_tool_call_input.delta": self._on_arguments_delta,
                "response.mcp_call_arguments.delta": self._on_arguments_delta,
                "response.function_call_arguments.done": self._on_arguments_done,
                "response.custom_tool_call_input.done": self._on_custom_input_done,
                "response.mcp_call_arguments.done": self._on_arguments_done,
                "response.code_interpreter_call_code.delta": self._on_code_delta,
                "response.output_text.annotation.added": self._on_annotation,
                "response.completed": self._on_response_completed,
                "response.incomplete": self._on_response_incomplete,
            },
        )
        self._new_call_id: IdFactory = id_factory or new_call_id
        self._start_response()

    def _start_response(self) -> None:
        self._calls = CallIndexer()
        self._items_by_id: dict[str | None, OutputItem] = {}
        """Items by id (never ``None``: the type lets an event without an id look up at once)."""
        self._items_by_position: dict[int, OutputItem] = {}
        self._item_count = 0
        self._metadata: dict[str, Any] = {}
        self._offered_names: frozenset[str] | None = None
        """The names of the tools the response lists (``response.tools``); ``None`` until it lists them."""
        self._hosted_shell_calls: dict[str, OutputItem] = {}
        """``call_id`` -> hosted ``shell_call`` item whose ``shell_call_output`` has not come yet."""
        self._client_call_made = False
        self._complete = False

    def finish(self) -> Chunks:
        """Nothing is held back; a response without its terminal event stays without ``is_complete``."""
        return []

    # -- response lifecycle --------------------------------------------------------------------------

    def _on_response_started(self, event: _ResponsesEvent) -> Chunks:
        if self._complete:
            self._start_response()
        response = self._response(event)
        self._note_offered_tools(response.tools)
        facts = self._new_facts(response)
        return [ChunkResponse(metadata=facts)] if facts else []

    def _note_offered_tools(self, tools: object) -> None:
        """Remember the names of the tools the response lists: a custom call to none of them is the
        provider's own step. Tools without a name (built-ins) name nothing."""
        if isinstance(tools, list):
            self._offered_names = frozenset(
                tool["name"] for tool in tools if is_mapping(tool) and isinstance(tool.get("name"), str)
            )

    def _on_response_completed(self, event: _ResponsesEvent) -> Chunks:
        return self._end("tool_calls" if self._client_call_made else "stop", "completed", event)

    def _on_response_incomplete(self, event: _ResponsesEvent) -> Chunks:
        details = self._response(event).incomplete_details
        reason = details.get("reason") if is_mapping(details) else None
        if not isinstance(reason, str) or not reason:
            return self._end("incomplete", "incomplete", event)
        return self._end(_INCOMPLETE_FINISH_REASONS.get(reason, reason.lower()), reason, event)

    def _end(self, finish_reason: str, stop_reason: str, event: _ResponsesEvent) -> Chunks:
        response = self._response(event)
        facts = self._new_facts(response)
        facts["stop_reason"] = stop_reason
        self._metadata["stop_reason"] = stop_reason
        self._complete = True
        return [
            ChunkResponse(
                is_complete=True,
                usage=self._usage(response.usage),
                finish_reason=finish_reason,
                metadata=facts,
            )
        ]

    def _unhandled(self, item: Payload | Mapping[str, Any], event: _ResponsesEvent) -> Chunks:
        """``response.failed`` raises the response's error; the rest as every typed converter does."""
        if event.type != "response.failed":
            return super()._unhandled(item, event)
        error = self._response(event).error
        details: Mapping[str, Any] = error if is_mapping(error) else {"message": "the response failed"}
        self._complete = True
        where = f"event {self._event_number} (response.failed)"
        raise ProviderError.from_payload(details, event_mapping(item), where)

    def _new_facts(self, response: _ResponsesResponse) -> dict[str, Any]:
        """The response-level facts that are new or changed since the last report."""
        facts: dict[str, Any] = {}
        created = response.created_at
        if isinstance(created, float) and created.is_integer():
            created = int(created)  # SDK objects declare created_at a float
        reported = (
            ("id", response.id),
            ("model", response.model),
            ("created", created),
            ("service_tier", response.service_tier),
        )
        for key, value in reported:
            if value is not None and self._metadata.get(key) != value:
                facts[key] = value
        self._metadata.update(facts)
        return facts

    def _usage(self, raw: object) -> TokenUsage | None:
        if raw is None:
            return None
        if not is_mapping(raw):
            raise self._field_error("response.usage", "an object", raw)
        prompt = self._count(raw, "input_tokens") or 0
        completion = self._count(raw, "output_tokens") or 0
        total = self._count(raw, "total_tokens")
        input_details = raw.get("input_tokens_details")
        output_details = raw.get("output_tokens_details")
        return TokenUsage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion if total is None else total,
            cached_tokens=self._count(input_details, "cached_tokens"),
            cache_creation_tokens=self._count(input_details, "cache_write_tokens"),
            reasoning_tokens=self._count(output_details, "reasoning_tokens"),
        )

    def _count(self, container: object, key: str) -> int | None:
        if not is_mapping(container):
            return None
        value = container.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._field_error(f"response.usage.{key}", "an integer", value)
        return value

    # -- output items --------------------------------------------------------------------------------

    def _on_item_added(self, event: _ResponsesEvent) -> Chunks:
        raw = self._item(event)
        if self._announced_again(event, raw):
            return []
        item = self._register(event, raw)
        item.announced = True
        if item.item_type == "reasoning":
            encrypted = raw.get("encrypted_content")
            item.encrypted_at_added = encrypted if isinstance(encrypted, str) and encrypted else None
            return [ChunkResponse(reasoning_id=item.item_id)] if item.item_id else []
        call = self._call_start(item, raw)
        return [ChunkResponse(tool_calls=[call])] if call is not None else []

    def _announced_again(self, event: _ResponsesEvent, raw: Mapping[str, Any]) -> bool:
        """Whether ``output_item.added`` repeats an item already announced (then it is ignored).

        The same id at the same position, or another id at the position of an unfinished item of the same
        type (ids may rotate), is the same item; the same id elsewhere or as another type, or another type
        at an unfinished item's position, is an error.
        """
        item_id, item_type, position = raw.get("id"), raw.get("type"), event.output_index
        known = self._items_by_id.get(item_id) if isinstance(item_id, str) and item_id else None
        if known is not None and known.announced:
            self._check_same_item(known, item_id, item_type, position)
            return True
        occupant = None if position is None else self._items_by_position.get(position)
        if occupant is None or not occupant.announced or occupant.done:
            return False
        if occupant.item_type != item_type:
            raise ConverterError(
                f"event {self._event_number} (response.output_item.added): output_index {position} "
                f"already holds the unfinished {occupant.item_type} item {occupant.item_id!r}",
                event_number=self._event_number,
            )
        return True

    def _check_same_item(
        self, known: OutputItem, item_id: object, item_type: object, position: int | None
    ) -> None:
        """Raise unless an item announced again by its id keeps its type and its output_index."""
        moved = position is not None and self._items_by_position.get(position) is not known
        if known.item_type != item_type or moved:
            raise ConverterError(
                f"event {self._event_number} (response.output_item.added): item {item_id!r} was "
                f"announced before as a {known.item_type} at another output_index or of another type",
                event_number=self._event_number,
            )

    def _call_start(self, item: OutputItem, raw: Mapping[str, Any]) -> ToolCallDelta | None:
        """Start the tool call of a call item (with whatever arguments it already carries), else ``None``."""
        item_type = item.item_type
        shape = call_shape(item_type, raw, self._offered_names)
        if shape is None:
            return None
        kind, name, initial, call_id = shape
        if not isinstance(name, str) or not name:
            raise self._field_error("item.name", "a non-empty string", raw.get("name", MISSING))
        index = item.call_index = self._calls.position(item.serial)
        item.call_kind = kind
        if kind != "server":
            self._client_call_made = True
        arguments = initial if isinstance(initial, str) and initial else None
        item.arguments_sent = arguments is not None
        if not isinstance(call_id, str) or not call_id:
            call_id = self._new_call_id(index)
        item.call_id, item.call_name = call_id, name
        if item_type == "shell_call" and kind == "server":
            self._hosted_shell_calls[call_id] = item
        return ToolCallDelta(index, call_id, name, arguments, kind=kind)

    def _on_item_done(self, event: _ResponsesEvent) -> Chunks:
        raw = self._item(event)
        item = self._find(event, raw.get("id")) or self._register(event, raw)
        item.done = True
        if item.item_type is None:  # known only from text events so far
            item_type = raw.get("type")
            item.item_type = item_type if isinstance(item_type, str) else None
        item_type = item.item_type
        if item_type == "message":
            return self._message_rest(item, raw)
        if item_type == "reasoning":
            return self._reasoning_rest(item, raw)
        if item_type == "shell_call_output":
            return self._shell_output(raw)
        return self._finish_call(item, raw)

    def _finish_call(self, item: OutputItem, raw: Mapping[str, Any]) -> Chunks:
        """The last delta of a finished call item (with the provider's result if it ran the call)."""
        # An item first seen here (no output_item.added) starts and finishes its call in one delta.
        start = None if item.call_index is not None else self._call_start(item, raw)
        if item.call_index is None or item.finished:
            return []
        item.finished = True
        arguments = self._arguments_rest(item, raw, start)
        item.arguments_sent = True
        if start is None:
            call = ToolCallDelta(
                item.call_index, arguments_delta=arguments, finished=True, kind=item.call_kind
            )
        else:
            call = msgspec.structs.replace(start, arguments_delta=arguments, finished=True)
        result = self._server_result(item, raw) if item.item_type in RESULT_IN_ITEM else None
        return [ChunkResponse(tool_calls=[call], tool_results=None if result is None else [result])]

    def _arguments_rest(
        self, item: OutputItem, raw: Mapping[str, Any], start: ToolCallDelta | None
    ) -> str | None:
        """The arguments a finished call item adds to those its deltas (or its start) already sent."""
        if item.code_streamed:
            return self._code_end(raw)
        if item.arguments_sent:
            return None if start is None else start.arguments_delta
        return self._final_arguments(item.item_type, raw)

    def _shell_output(self, raw: Mapping[str, Any]) -> Chunks:
        """The output of a hosted shell call of this response, as its result."""
        call_id = raw.get("call_id")
        item = self._hosted_shell_calls.pop(call_id, None) if isinstance(call_id, str) else None
        if item is None or item.call_id is None:
            return []
        result = ToolResult(
            call_id=item.call_id,
            name=item.call_name,
            content=raw.get("output"),
            is_error=raw.get("status") == "failed",
            result_type="shell_call_output",
        )
        return [ChunkResponse(tool_results=[result])]

    def _server_result(self, item: OutputItem, raw: Mapping[str, Any]) -> ToolResult:
        """What a provider-executed call item returned, from its finished item."""
        item_type = item.item_type
        failed = raw.get("status") == "failed"
        content: object = None
        if item_type == "mcp_call":
            error = raw.get("error")
            failed = failed or error is not None
            content = raw.get("output") if error is None else error
        elif item_type == "web_search_call":
            action = raw.get("action")
            content = action.get("sources") if is_mapping(action) else None
        elif item_type == "file_search_call":
            content = raw.get("results")
        elif item_type == "code_interpreter_call":
            content = raw.get("outputs")
        assert item.call_id is not None  # set with call_index
        return ToolResult(
            call_id=item.call_id, name=item.call_name, content=content, is_error=failed, result_type=item_type
        )

    def _code_end(self, raw: Mapping[str, Any]) -> str:
        """The rest of a code interpreter call's arguments after its streamed code."""
        container = raw.get("container_id")
        if isinstance(container, str):
            return '","container_id":' + encode_json(container).decode() + "}"
        return '"}'

    def _on_code_delta(self, event: _ResponsesEvent) -> Chunks:
        """Code interpreter code streams as the ``code`` string of the call's JSON arguments."""
        text = self._string(event.delta, "delta")
        item = self._call_item(event)
        if not text or item.finished or item.call_index is None or item.arguments_sent != item.code_streamed:
            return []
        piece = encode_json(text).decode()[1:-1]
        if not item.code_streamed:
            piece = '{"code":"' + piece
        item.code_streamed = item.arguments_sent = True
        return [
            ChunkResponse(tool_calls=[ToolCallDelta(item.call_index, arguments_delta=piece, kind="server")])
        ]

    def _final_arguments(self, item_type: str | None, raw: Mapping[str, Any]) -> str | None:
        """The whole arguments text of a finished call item whose arguments were not streamed."""
        if item_type in ("function_call", "mcp_call"):
            text = raw.get("arguments")
        elif item_type is not None and item_type in SERVER_BUILTIN_CALLS:
            text = _object_json(server_arguments(item_type, raw))
        elif item_type == "custom_tool_call":
            text = raw.get("input")
        else:
            text = _object_json(builtin_arguments(raw))
        if text is None:
            return None
        if not isinstance(text, str):
            raise self._field_error("item.arguments", "a string", text)
        return text or None

    def _message_rest(self, item: OutputItem, raw: Mapping[str, Any]) -> Chunks:
        """Text and refusal parts of a finished message that no delta or ``.done`` event carried."""
        content: list[str] = []
        refusal: list[str] = []
        citations: list[Mapping[str, Any]] = []
        for position, part in enumerate(self._parts(raw, "content")):
            part_type = part.get("type")
            if part_type == "output_text":
                citations += self._parts(part, "annotations")[item.annotations.get(position, 0) :]
                self._collect(item, ("text", position), part.get("text"), content)
            elif part_type == "refusal":
                self._collect(item, ("refusal", position), part.get("refusal"), refusal)
        if not content and not refusal and not citations:
            return []
        return [
            ChunkResponse(
                content="".join(content), refusal="".join(refusal) or None, citations=citations or None
            )
        ]

    def _reasoning_rest(self, item: OutputItem, raw: Mapping[str, Any]) -> Chunks:
        """The encrypted reasoning of a finished reasoning item, and any of its text not yet emitted."""
        pieces: list[str] = []
        for position, part in enumerate(self._parts(raw, "summary")):
            self._collect_reasoning(item, ("summary", position), part.get("text"), pieces)
        for position, part in enumerate(self._parts(raw, "content")):
            if part.get("type") == "reasoning_text":
                self._collect_reasoning(item, ("reasoning", position), part.get("text"), pieces)
        encrypted = raw.get("encrypted_content")
        if not isinstance(encrypted, str) or not encrypted:
            encrypted = item.encrypted_at_added
        item.encrypted_at_added = None
        if item.finished:
            if not pieces:
                return []
            encrypted = None
        item.finished = True
        return [
            ChunkResponse(
                reasoning="".join(pieces) or None,
                encrypted_reasoning=encrypted,
                reasoning_id=item.item_id,
                reasoning_done=True,
            )
        ]

    def _parts(self, raw: Mapping[str, Any], field: str) -> list[Mapping[str, Any]]:
        parts = raw.get(field)
        if parts is None:
            return []
        if not isinstance(parts, list) or not all(is_mapping(part) for part in parts):
            raise self._field_error(f"item.{field}", "a list of objects", parts)
        return parts

    def _register(self, event: _ResponsesEvent, raw: Mapping[str, Any]) -> OutputItem:
        """Remember the output item ``raw`` (of an ``output_item`` event) at its position and id."""
        item_type = raw.get("type")
        if not isinstance(item_type, str):
            raise self._field_error("item.type", "a string", raw.get("type", MISSING))
        return self._remember(item_type, event, raw.get("id"))

    def _remember(self, item_type: str | None, event: _ResponsesEvent, item_id: object) -> OutputItem:
        if not isinstance(item_id, str) or not item_id:
            item_id = None
        item = OutputItem(self._item_count, item_type, item_id)
        self._item_count += 1
        position = event.output_index
        if position is not None:
            self._items_by_position[position] = item
        if item_id is not None:
            self._items_by_id[item_id] = item
        return item

    def _find(self, event: _ResponsesEvent, item_id: object) -> OutputItem | None:
        """The item an event addresses: by its id, else by its ``output_index`` (ids may rotate)."""
        if item_id is not None:
            if not isinstance(item_id, str):
                raise self._field_error("item.id", "a string", item_id)
            found = self._items_by_id.get(item_id)
            if found is not None:
                return found
        position = event.output_index
        return None if position is None else self._items_by_position.get(position)

    def _text_item(self, event: _ResponsesEvent) -> OutputItem:
        """The item a text event addresses; one not announced by ``output_item.added`` is registered."""
        item_id = event.item_id
        found = self._items_by_id.get(item_id) if item_id else None  # the common case, at once
        return found or self._find(event, item_id) or self._remember(None, event, item_id)

    # -- text, refusal and reasoning -----------------------------------------------------------------

    def _on_text_delta(self, event: _ResponsesEvent) -> Chunks:
        text = event.delta
        if type(text) is not str:
            text = self._string(text, "delta")
        if not text:
            return []
        item = self._items_by_id.get(event.item_id) or self._text_item(event)
        if item.last_text_index != event.content_index:
            item.last_text_index = event.content_index
            item.text_parts.add(("text", event.content_index))
        return [ChunkResponse(content=text)]

    def _on_text_done(self, event: _ResponsesEvent) -> Chunks:
        pieces: list[str] = []
        text = self._string(event.text, "text")
        self._collect(self._text_item(event), ("text", event.content_index), text, pieces)
        return [ChunkResponse(content=pieces[0])] if pieces else []

    def _on_refusal_delta(self, event: _ResponsesEvent) -> Chunks:
        text = self._string(event.delta, "delta")
        if not text:
            return []
        self._text_item(event).text_parts.add(("refusal", event.content_index))
        return [ChunkResponse(refusal=text)]

    def _on_refusal_done(self, event: _ResponsesEvent) -> Chunks:
        pieces: list[str] = []
        text = self._string(event.refusal, "refusal")
        self._collect(self._text_item(event), ("refusal", event.content_index), text, pieces)
        return [ChunkResponse(refusal=pieces[0])] if pieces else []

    def _on_summary_done(self, event: _ResponsesEvent) -> Chunks:
        return self._reasoning_done(event, ("summary", event.summary_index))

    def _on_reasoning_text_done(self, event: _ResponsesEvent) -> Chunks:
        return self._reasoning_done(event, ("reasoning", event.content_index))

    def _reasoning_deltas(self, channel: str) -> Callable[[_ResponsesEvent], Chunks]:
        """The handler of the reasoning text deltas of ``channel``: ``summary`` parts (numbered by
        ``summary_index``) or ``reasoning`` text parts (numbered by ``content_index``). One handler per
        channel, so that a delta is one call from the feed loop."""
        by_summary_index = channel == "summary"

        def on_delta(event: _ResponsesEvent) -> Chunks:
            text = event.delta
            if type(text) is not str:
                text = self._string(text, "delta")
            if not text:
                return []
            item = self._items_by_id.get(event.item_id) or self._text_item(event)
            index = event.summary_index if by_summary_index else event.content_index
            last = item.last_reasoning_part  # read by its fields: a delta of the same part makes no tuple
            if last is None or last[1] != index or last[0] != channel:
                part = (channel, index)
                item.text_parts.add(part)
                text = self._separated(item, part, text)
            return [ChunkResponse(reasoning=text, reasoning_id=item.item_id)]

        return on_delta

    def _reasoning_done(self, event: _ResponsesEvent, part: PartKey) -> Chunks:
        pieces: list[str] = []
        text = self._string(event.text, "text")
        item = self._text_item(event)
        self._collect_reasoning(item, part, text, pieces)
        return [ChunkResponse(reasoning=pieces[0], reasoning_id=item.item_id)] if pieces else []

    def _separated(self, item: OutputItem, part: PartKey, text: str) -> str:
        """``text`` of reasoning part ``part``, after a separator when it starts a new part of its item."""
        previous = item.last_reasoning_part
        item.last_reasoning_part = part
        if previous is None or previous == part:
            return text
        return _REASONING_PART_SEPARATOR + text

    def _collect(self, item: OutputItem, part: PartKey, text: object, into: list[str]) -> None:
        """Append the whole ``text`` of a part to ``into`` unless the part already gave text."""
        if part in item.text_parts or not isinstance(text, str) or not text:
            return
        item.text_parts.add(part)
        into.append(text)

    def _collect_reasoning(self, item: OutputItem, part: PartKey, text: object, into: list[str]) -> None:
        if part in item.text_parts or not isinstance(text, str) or not text:
            return
        item.text_parts.add(part)
        into.append(self._separated(item, part, text))

    # -- call arguments ------------------------------------------------------------------------------

    def _on_arguments_delta(self, event: _ResponsesEvent) -> Chunks:
        text = self._string(event.delta, "delta")
        item = self._call_item(event)
        if not text or item.finished or item.call_index is None:
            return []
        item.arguments_sent = True
        return [
            ChunkResponse(tool_calls=[ToolCallDelta(item.call_index, None, None, text, kind=item.call_kind)])
        ]

    def _on_annotation(self, event: _ResponsesEvent) -> Chunks:
        annotation = event.annotation
        if not is_mapping(annotation):
            raise self._field_error("annotation", "an object", annotation)
        item = self._text_item(event)
        position = event.content_index
        item.annotations[position] = item.annotations.get(position, 0) + 1
        return [ChunkResponse(citations=[annotation])]

    def _on_arguments_done(self, event: _ResponsesEvent) -> Chunks:
        return self._whole_arguments(event, self._string(event.arguments, "arguments"))

    def _on_custom_input_done(self, event: _ResponsesEvent) -> Chunks:
        return self._whole_arguments(event, self._string(event.input, "input"))

    def _whole_arguments(self, event: _ResponsesEvent, text: str) -> Chunks:
        """The complete arguments of a ``.done`` event, used only when no delta streamed them."""
        item = self._call_item(event)
        if item.arguments_sent or item.finished or item.call_index is None or not text:
            return []
        item.arguments_sent = True
        return [
            ChunkResponse(tool_calls=[ToolCallDelta(item.call_index, None, None, text, kind=item.call_kind)])
        ]

    def _call_item(self, event: _ResponsesEvent) -> OutputItem:
        item = self._find(event, event.item_id)
        if item is None or item.call_index is None:
            raise ConverterError(
                f"event {self._event_number} ({event.type}): item_id={event.item_id!r} "
                f"output_index={event.output_index!r} is not a call announced by "
                "response.output_item.added",
                event_number=self._event_number,
            )
        return item

    # -- field checks --------------------------------------------------------------------------------

    def _response(self, event: _ResponsesEvent) -> _ResponsesResponse:
        response = event.response
        if response is UNSET or response is None:
            raise self._field_error("response", "an object", MISSING if response is UNSET else response)
        return response

    def _item(self, event: _ResponsesEvent) -> Mapping[str, Any]:
        item = event.item
        if not is_mapping(item):
            raise self._field_error("item", "an object", MISSING if item is UNSET else item)
        return item

    def _string(self, value: object, field: str) -> str:
        """``value``, the event's field ``field``, which must be a string."""
        if not isinstance(value, str):
            raise self._field_error(field, "a string", MISSING if value is UNSET else value)
        return value

    def _field_error(self, field: str, expected: str, value: object) -> ConverterError:
        """The error for a ``field`` of the event being converted that is not what it should be (the
        feed loop adds the event's type)."""
        return field_error(self._event_number, field, expected, value)


@pipable_operator
def convert_openai_responses(
    source: AsyncIterable[Payload | Mapping[str, Any]], *, id_factory: IdFactory | None = None
) -> AsyncIterator[ChunkResponse]:
    """Convert OpenAI Responses stream events (Payloads or dicts) into `ChunkResponse` items.

    Args:
        source: the provider's events, as `Payload`s from a framer or as dicts.
        id_factory: makes the ids of calls the stream sends without one (`new_call_id` by default).

    Raises:
        StreamDecodeError: an event's bytes are not JSON (naming the byte offset).
        ConverterError: an event does not fit the provider's schema (naming the event and field).
        ProviderError: the stream carries an in-band error.
    """
    return operator_stream(source, OpenAIResponsesConverter(id_factory=id_factory))

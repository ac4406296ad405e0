"""Chunks to the OpenAI Responses API stream: what ``streamfold proxy`` answers on ``/v1/responses``.

`ResponsesEncoder` turns `ChunkResponse`s (after the delimiter rewriter)
into Responses stream events, each a dict with ``type`` and a ``sequence_number`` counting from 0:

- ``response.created`` and ``response.in_progress`` first;
- text as a ``message`` item (``output_item.added``, ``content_part.added``, ``output_text.delta``s,
  then ``output_text.done``, ``content_part.done``, ``output_item.done``);
- reasoning as a ``reasoning`` item whose ``content`` is one ``reasoning_text`` part
  (``reasoning_text.delta``/``done``; ``summary`` stays empty: an open model writes no summary);
- each tool call as a ``function_call`` item (``function_call_arguments.delta``/``done``), ``completed``
  when its arguments are whole JSON and the call was finished (by the upstream, or by a response that
  finished cleanly), else ``incomplete`` (cut off by a failure, ``length``, or the model stopping inside it);
- ``response.completed`` with the usage; ``response.incomplete`` for ``length`` (``max_output_tokens``) or
  ``content_filter``; ``response.failed`` (`fail`) on a failure or a stream that
  ended without a finish reason, carrying everything output so far; its ``error.code`` is
  ``server_error`` (the Responses API's codes are a closed set) and its message starts with the proxy's
  own code (``upstream_disconnected: ...``).

A new kind of output (text after reasoning, text after a call) closes the open text or reasoning item
and opens a new one, so the output items keep the model's order. Call items stay open until the call is
finished or the response ends. `response` is the Response object at any time,
the whole answer of a non-streamed request once the stream ends. Pieces of text are joined once, when
their item closes (linear).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from pipeline._jsonenc import arguments_complete
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta

__all__ = ["ResponsesEncoder", "responses_usage"]

_INCOMPLETE: Final = {"length": "max_output_tokens", "content_filter": "content_filter"}


def _new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex


def responses_usage(usage: TokenUsage | None) -> dict[str, Any] | None:
    """`TokenUsage` in the Responses shape (``input_tokens``, ``output_tokens``, details)."""
    if usage is None:
        return None
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cached_tokens or 0,
            "cache_write_tokens": usage.cache_creation_tokens or 0,
        },
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
        "total_tokens": usage.total_tokens or usage.prompt_tokens + usage.completion_tokens,
    }


class _Item:
    """One output item being written: its dict (as sent at the end) and its text pieces."""

    __slots__ = ("free_text", "item", "output_index", "pieces")

    def __init__(self, item: dict[str, Any], output_index: int) -> None:
        self.item = item
        self.output_index = output_index
        self.pieces: list[str] = []
        self.free_text = False
        """A call whose input is free text (a ``custom`` call), not JSON."""


class ResponsesEncoder:
    """Sans-IO core: `ChunkResponse` -> Responses stream event dicts (see the module doc).

    Args:
        request: the client's Responses request: its ``model``, ``instructions``, ``tools``,
            ``tool_choice``, ``parallel_tool_calls``, ``temperature``, ``top_p``, ``max_output_tokens`` and
            ``metadata`` are echoed in the Response object, as OpenAI does.
        response_id: supplies the response's ``id``.
        clock: supplies ``created_at``.
        item_ids: names output items from a prefix (``msg_``, ``rs_``, ``fc_``).
    """

    __slots__ = (
        "_calls",
        "_finish_reason",
        "_item_ids",
        "_open",
        "_output",
        "_response",
        "_sequence",
        "_started",
        "_usage",
        "ended",
    )

    def __init__(
        self,
        request: Mapping[str, Any],
        *,
        response_id: Callable[[], str] = lambda: _new_id("resp_"),
        clock: Callable[[], float] = time.time,
        item_ids: Callable[[str], str] = _new_id,
    ) -> None:
        self._item_ids = item_ids
        self._sequence = 0
        self._started = False
        self._open: _Item | None = None
        self._calls: dict[int, _Item] = {}
        self._output: list[dict[str, Any]] = []
        self._finish_reason: str | None = None
        self._usage: TokenUsage | None = None
        self.ended = False
        """The response is over (completed, incomplete or failed): the encoder takes no more input."""
        tools = request.get("tools")
        parallel = request.get("parallel_tool_calls")
        self._response: dict[str, Any] = {
            "id": response_id(),
            "object": "response",
            "created_at": int(clock()),
            "status": "in_progress",
            "error": None,
            "incomplete_details": None,
            "instructions": request.get("instructions"),
            "max_output_tokens": request.get("max_output_tokens"),
            "model": request.get("model") or "",
            "output": self._output,
            "parallel_tool_calls": parallel if isinstance(parallel, bool) else True,
            "temperature": request.get("temperature"),
            "tool_choice": request.get("tool_choice") or "auto",
            "tools": tools if isinstance(tools, list) else [],
            "top_p": request.get("top_p"),
            "metadata": request.get("metadata") or {},
            "usage": None,
        }

    @property
    def response(self) -> dict[str, Any]:
        """The Response object as it stands (its ``output`` holds the items closed so far)."""
        return self._response

    def feed(self, chunk: ChunkResponse) -> list[dict[str, Any]]:
        """Events for one chunk (the first call also gives ``response.created`` and ``in_progress``)."""
        if self.ended:
            return []
        if chunk.metadata is not None:
            _take_model(self._response, chunk.metadata)
        events = self._start()
        if chunk.usage is not None:
            self._usage = chunk.usage
        if chunk.finish_reason:
            self._finish_reason = chunk.finish_reason
        if chunk.reasoning:
            self._text(events, "reasoning", chunk.reasoning)
        if chunk.content:
            self._text(events, "message", chunk.content)
        if chunk.refusal:
            self._text(events, "message", chunk.refusal)
        for delta in chunk.tool_calls or ():
            self._call(events, delta)
        return events

    def finish(self) -> list[dict[str, Any]]:
        """The stream ended: close every item, then ``response.completed`` (or ``incomplete``); a stream
        without a finish reason was cut off and fails (``upstream_truncated``)."""
        if self.ended:
            return []
        if self._finish_reason is None:
            return self.fail("the upstream stream ended without a finish_reason", code="upstream_truncated")
        events = self._start()
        reason = _INCOMPLETE.get(self._finish_reason)
        self._close_all(events, cut_off=reason is not None)
        response = self._response
        response["usage"] = responses_usage(self._usage)
        if reason is None:
            response["status"] = "completed"
            events.append(self._event("response.completed", response=response))
        else:
            response["status"] = "incomplete"
            response["incomplete_details"] = {"reason": reason}
            events.append(self._event("response.incomplete", response=response))
        self.ended = True
        return events

    def fail(self, message: str, *, code: str | None = "upstream_error") -> list[dict[str, Any]]:
        """The stream failed: close what is open, then ``response.failed`` with ``error``.

        Args:
            message: what went wrong.
            code: leads the error's message (its ``code`` is always ``server_error``); None: nothing.

        Returns:
            The events to send; nothing once the response ended.
        """
        if self.ended:
            return []
        events = self._start()
        self._close_all(events, cut_off=True)
        response = self._response
        response["status"] = "failed"
        # The Response's error code is a closed set; the proxy's own code leads the message.
        response["error"] = {"code": "server_error", "message": f"{code}: {message}" if code else message}
        response["usage"] = responses_usage(self._usage)
        events.append(self._event("response.failed", response=response))
        self.ended = True
        return events

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _start(self) -> list[dict[str, Any]]:
        if self._started:
            return []
        self._started = True
        snapshot = dict(self._response, output=[])
        return [
            self._event("response.created", response=snapshot),
            self._event("response.in_progress", response=snapshot),
        ]

    def _text(self, events: list[dict[str, Any]], kind: str, text: str) -> None:
        open_item = self._open
        if open_item is None or open_item.item["type"] != kind:
            self._close_open(events)
            open_item = self._open = self._add_item(events, kind)
            part = _part(kind, "")
            events.append(
                self._event(
                    "response.content_part.added",
                    item_id=open_item.item["id"],
                    output_index=open_item.output_index,
                    content_index=0,
                    part=part,
                )
            )
        open_item.pieces.append(text)
        fields: dict[str, Any] = {
            "item_id": open_item.item["id"],
            "output_index": open_item.output_index,
            "content_index": 0,
            "delta": text,
        }
        if kind == "message":
            events.append(self._event("response.output_text.delta", **fields, logprobs=[]))
        else:
            events.append(self._event("response.reasoning_text.delta", **fields))

    def _add_item(self, events: list[dict[str, Any]], kind: str, **fields: Any) -> _Item:
        prefix = {"message": "msg_", "reasoning": "rs_", "function_call": "fc_"}[kind]
        item: dict[str, Any] = {"id": self._item_ids(prefix), "type": kind}
        if kind == "message":
            item |= {"status": "in_progress", "role": "assistant", "content": []}
        elif kind == "reasoning":
            item |= {"summary": [], "content": []}
        else:
            item |= {"status": "in_progress", "arguments": "", **fields}
        index = len(self._output)
        self._output.append(item)
        events.append(self._event("response.output_item.added", output_index=index, item=dict(item)))
        return _Item(item, index)

    def _close_open(self, events: list[dict[str, Any]]) -> None:
        open_item = self._open
        if open_item is None:
            return
        self._open = None
        item = open_item.item
        text = "".join(open_item.pieces)
        fields = {"item_id": item["id"], "output_index": open_item.output_index, "content_index": 0}
        if item["type"] == "message":
            events.append(self._event("response.output_text.done", **fields, text=text, logprobs=[]))
        else:
            events.append(self._event("response.reasoning_text.done", **fields, text=text))
        part = _part(item["type"], text)
        events.append(self._event("response.content_part.done", **fields, part=part))
        item["content"] = [part]
        if item["type"] == "message":
            item["status"] = "completed"
        events.append(
            self._event("response.output_item.done", output_index=open_item.output_index, item=item)
        )

    def _call(self, events: list[dict[str, Any]], delta: ToolCallDelta) -> None:
        call = self._calls.get(delta.index)
        if call is None:
            self._close_open(events)
            call = self._calls[delta.index] = self._add_item(
                events,
                "function_call",
                call_id=delta.call_id or self._item_ids("call_"),
                name=delta.name or "",
            )
            call.free_text = delta.kind == "custom"
        if delta.arguments_delta:
            call.pieces.append(delta.arguments_delta)
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=call.item["id"],
                    output_index=call.output_index,
                    delta=delta.arguments_delta,
                )
            )
        if delta.finished:
            self._close_call(events, delta.index, cut_off=False)

    def _close_call(self, events: list[dict[str, Any]], index: int, *, cut_off: bool) -> None:
        """Write call ``index``'s last events: ``incomplete`` when ``cut_off`` or its arguments are not
        whole JSON."""
        call = self._calls[index]
        item = call.item
        if item["status"] != "in_progress":
            return
        item["arguments"] = arguments = "".join(call.pieces)
        whole = call.free_text or arguments_complete(arguments)
        item["status"] = "completed" if whole and not cut_off else "incomplete"
        events.append(
            self._event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=call.output_index,
                name=item["name"],
                arguments=item["arguments"],
            )
        )
        events.append(self._event("response.output_item.done", output_index=call.output_index, item=item))

    def _close_all(self, events: list[dict[str, Any]], *, cut_off: bool) -> None:
        """Close every item: the calls still open are ``cut_off`` when the response did not finish
        cleanly."""
        self._close_open(events)
        for index in sorted(self._calls, key=lambda key: self._calls[key].output_index):
            self._close_call(events, index, cut_off=cut_off)


def _part(kind: str, text: str) -> dict[str, Any]:
    if kind == "message":
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "reasoning_text", "text": text}


def _take_model(target: dict[str, Any], metadata: Mapping[str, Any]) -> None:
    """The model the upstream says it served, in place of the one asked for."""
    model = metadata.get("model")
    if isinstance(model, str) and model:
        target["model"] = model

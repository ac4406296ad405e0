"""Chunks to the Anthropic Messages stream: what ``streamfold proxy`` answers on ``/v1/messages``.

`MessagesEncoder` turns `ChunkResponse`s (after the delimiter rewriter)
into ``(event name, data)`` pairs as Anthropic sends them:

- ``message_start`` (the message with empty ``content``), held until a chunk brings the usage or output,
  so that it carries the input tokens when the upstream reports them early (vLLM's and SGLang's
  ``continuous_usage_stats``), zero otherwise; ``model`` is the upstream's when its chunks name one;
- per block ``content_block_start``, ``content_block_delta``s, ``content_block_stop``: ``text`` blocks
  (``text_delta``), ``thinking`` blocks (``thinking_delta``) and ``tool_use`` blocks (``input_json_delta``,
  the arguments JSON as the model writes it);
- ``message_delta`` (``stop_reason``: ``end_turn``, ``tool_use``, ``max_tokens``, ``refusal``; the usage),
  then ``message_stop``; an upstream ``stop`` with calls is ``tool_use`` only when each call's input is
  whole JSON (a call cut off, its input ``{"_raw_arguments": text}``, is never presented as one to run);
- on a failure, ``error`` with ``{"type": "error", "error": {"type", "message"}}`` (what Anthropic sends
  and its SDK raises), after everything output before it.

Thinking from an open model has no signature: a thinking block starts with ``"signature": ""`` and no
``signature_delta`` is sent (an empty one would claim a signature that does not exist). A new kind of
output closes the open block, so blocks keep the model's order; a tool_use block closes when the call is
finished or the message ends. `message` is the Message object (with ``input``
parsed from each call's JSON), the whole answer of a non-streamed request.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any, Final

import msgspec

from pipeline._jsonenc import JSON_ERRORS
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta

__all__ = ["MessagesEncoder", "anthropic_error", "stop_reason"]

_STOP_REASONS: Final = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

Event = tuple[str, dict[str, Any]]


def stop_reason(finish_reason: str, called: bool) -> str:
    """An OpenAI finish reason in Anthropic's words (``stop`` with calls made is ``tool_use``)."""
    if finish_reason == "stop" and called:
        return "tool_use"
    return _STOP_REASONS.get(finish_reason, "end_turn")


def _tool_input(text: str) -> dict[str, Any] | None:
    """A ``tool_use`` block's input from a call's arguments text; None when that is not whole JSON."""
    if not text or text.isspace():
        return {}
    try:
        try:
            value = msgspec.json.decode(text)
        except UnicodeEncodeError:  # a lone surrogate from a dict or SDK source, which msgspec refuses
            value = json.loads(text)
    except (*JSON_ERRORS, ValueError):
        return None
    return value if isinstance(value, dict) else {"_value": value}


def anthropic_error(message: str, kind: str = "api_error") -> dict[str, Any]:
    """An Anthropic error body ``{"type": "error", "error": {"type", "message"}}``."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def _usage(usage: TokenUsage | None) -> dict[str, Any]:
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    result: dict[str, Any] = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}
    if usage.cached_tokens is not None:
        result["cache_read_input_tokens"] = usage.cached_tokens
    return result


def _starts(chunk: ChunkResponse) -> bool:
    """Whether ``chunk`` lets ``message_start`` go out: it carries the usage (the input tokens, which
    Claude Code reads there) or output. A first chunk with neither (the role) is held for the next."""
    return bool(
        chunk.usage is not None
        or chunk.content
        or chunk.reasoning
        or chunk.refusal
        or chunk.tool_calls
        or chunk.finish_reason
        or chunk.is_complete
    )


class _Block:
    __slots__ = ("block", "closed", "free_text", "index", "pieces")

    def __init__(self, block: dict[str, Any], index: int) -> None:
        self.block = block
        self.index = index
        self.pieces: list[str] = []
        self.closed = False
        self.free_text = False
        """A call whose input is free text (a ``custom`` call), not JSON."""


class MessagesEncoder:
    """Sans-IO core: `ChunkResponse` -> Messages ``(event, data)`` pairs (see the module doc).

    Args:
        model: echoed in the message (the client's model name).
        message_id: names the message.
    """

    __slots__ = (
        "_blocks",
        "_calls",
        "_cut_off",
        "_finish_reason",
        "_message",
        "_open",
        "_started",
        "_usage",
        "ended",
    )

    def __init__(
        self, model: str, *, message_id: Callable[[], str] = lambda: "msg_" + uuid.uuid4().hex
    ) -> None:
        self._message: dict[str, Any] = {
            "id": message_id(),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        self._blocks: list[_Block] = []
        self._open: _Block | None = None
        self._calls: dict[int, _Block] = {}
        self._cut_off = False
        """A call's input was not whole JSON."""
        self._started = False
        self._finish_reason: str | None = None
        self._usage: TokenUsage | None = None
        self.ended = False
        """The message is over (``message_stop`` or an error was written)."""

    @property
    def message(self) -> dict[str, Any]:
        """The Message object as it stands (complete once the stream ended)."""
        return self._message

    def feed(self, chunk: ChunkResponse) -> list[Event]:
        """Events for one chunk (the first call also gives ``message_start``)."""
        if self.ended:
            return []
        self._note(chunk)
        events = self._start() if self._started or _starts(chunk) else []
        if chunk.reasoning:
            self._text(events, "thinking", chunk.reasoning)
        if chunk.content:
            self._text(events, "text", chunk.content)
        if chunk.refusal:
            self._text(events, "text", chunk.refusal)
        for delta in chunk.tool_calls or ():
            self._call(events, delta)
        return events

    def _note(self, chunk: ChunkResponse) -> None:
        """Keep what the message's start and end say: the model, the usage, the finish reason."""
        model = chunk.metadata.get("model") if chunk.metadata is not None else None
        if isinstance(model, str) and model:
            self._message["model"] = model
        if chunk.usage is not None:
            self._usage = chunk.usage
        if chunk.finish_reason:
            self._finish_reason = chunk.finish_reason

    def finish(self) -> list[Event]:
        """The stream ended: close the blocks, ``message_delta``, ``message_stop``; a stream without a
        finish reason was cut off: an ``error`` event instead."""
        if self.ended:
            return []
        if self._finish_reason is None:
            return self.fail("the upstream stream ended without a finish_reason")
        events = self._start()
        self._close_all(events)
        reason = stop_reason(self._finish_reason, bool(self._calls) and not self._cut_off)
        message = self._message
        message["stop_reason"] = reason
        message["usage"] = _usage(self._usage)
        usage = {"output_tokens": message["usage"]["output_tokens"]}
        if self._usage is not None:
            usage["input_tokens"] = self._usage.prompt_tokens
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": reason, "stop_sequence": None},
                    "usage": usage,
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        self.ended = True
        return events

    def fail(self, message: str, kind: str = "api_error") -> list[Event]:
        """The stream failed: close the open blocks, then an ``error`` event.

        Args:
            message: the error's ``message``.
            kind: the error's ``type``, one of Anthropic's (``api_error``, ``overloaded_error``, ...).

        Returns:
            The events to send; nothing once the message ended.
        """
        if self.ended:
            return []
        events = self._start()
        self._close_all(events)
        events.append(("error", anthropic_error(message, kind)))
        self.ended = True
        return events

    def _start(self) -> list[Event]:
        if self._started:
            return []
        self._started = True
        message = dict(self._message, content=[])
        if self._usage is not None:
            message["usage"] = _usage(self._usage)
        return [("message_start", {"type": "message_start", "message": message})]

    def _add(self, events: list[Event], block: dict[str, Any]) -> _Block:
        entry = _Block(block, len(self._blocks))
        self._blocks.append(entry)
        self._message["content"].append(block)
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": entry.index, "content_block": dict(block)},
            )
        )
        return entry

    def _text(self, events: list[Event], kind: str, text: str) -> None:
        block = self._open
        if block is None or block.block["type"] != kind:
            self._close_open(events)
            initial: dict[str, Any] = {"type": "text", "text": ""}
            if kind == "thinking":
                initial = {"type": "thinking", "thinking": "", "signature": ""}
            block = self._open = self._add(events, initial)
        block.pieces.append(text)
        delta = (
            {"type": "text_delta", "text": text}
            if kind == "text"
            else {"type": "thinking_delta", "thinking": text}
        )
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": block.index, "delta": delta})
        )

    def _close_open(self, events: list[Event]) -> None:
        block = self._open
        if block is None:
            return
        self._open = None
        field = "text" if block.block["type"] == "text" else "thinking"
        block.block[field] = "".join(block.pieces)
        events.append(("content_block_stop", {"type": "content_block_stop", "index": block.index}))

    def _call(self, events: list[Event], delta: ToolCallDelta) -> None:
        call = self._calls.get(delta.index)
        if call is None:
            self._close_open(events)
            call_id = delta.call_id or "toolu_" + uuid.uuid4().hex
            call = self._calls[delta.index] = self._add(
                events, {"type": "tool_use", "id": call_id, "name": delta.name or "", "input": {}}
            )
            call.free_text = delta.kind == "custom"
        if delta.arguments_delta:
            call.pieces.append(delta.arguments_delta)
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": call.index,
                        "delta": {"type": "input_json_delta", "partial_json": delta.arguments_delta},
                    },
                )
            )
        if delta.finished:
            self._close_call(events, call)

    def _close_call(self, events: list[Event], call: _Block) -> None:
        if call.closed:
            return
        call.closed = True
        text = "".join(call.pieces)
        value = _tool_input(text)
        if value is None:
            value = {"_raw_arguments": text}
            self._cut_off = self._cut_off or not call.free_text
        call.block["input"] = value
        events.append(("content_block_stop", {"type": "content_block_stop", "index": call.index}))

    def _close_all(self, events: list[Event]) -> None:
        self._close_open(events)
        for call in sorted(self._calls.values(), key=lambda block: block.index):
            self._close_call(events, call)

"""What the UI protocol encoders share: items from their wire dicts, SSE frames, the tool-call bookkeeping.

A served response's log holds each item as the JSON of its ``to_dict()``; the encoders take either the
typed item or that dict (`as_item`), so a route can re-encode a log in any protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from pipeline._jsonenc import encode_json
from pipeline.errors import StreamfoldError
from pipeline.models import (
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    TokenUsage,
    ToolApprovalRequest,
    ToolCallError,
    ToolInvocation,
    ToolOutput,
)

__all__ = ["ToolCallState", "UIItem", "argument_data", "as_item", "error_text", "sse_data"]

UIItem = SegmentEvent | ToolInvocation | ToolOutput | ToolApprovalRequest | ResponseEnd
"""What the UI encoders understand; any other item is passed on as an extension event (or dropped)."""

TOOL_SEGMENTS: Final = frozenset({SegmentType.TOOL_CALL, SegmentType.WRITE_FILE, SegmentType.PATCH_FILE})
FILE_SEGMENTS: Final = frozenset({SegmentType.WRITE_FILE, SegmentType.PATCH_FILE})
_SEGMENT_TYPES: Final = {member.value: member for member in SegmentEventType}


def sse_data(value: Any) -> bytes:
    """One SSE event: ``data: <compact JSON>`` and the blank line."""
    return b"data: " + encode_json(value) + b"\n\n"


def error_text(error: BaseException) -> str:
    """What a browser may read of ``error``: a streamfold error's message, else the class name only."""
    if isinstance(error, StreamfoldError):
        return str(error)
    return f"the response stream failed ({type(error).__name__})"


def as_item(item: Any) -> Any:
    """``item`` typed: a pipeline item as it is, its ``to_dict()`` wire form back to the item; anything
    else unchanged (the encoders pass it on as an extension event)."""
    if not isinstance(item, Mapping):
        return item
    try:
        read = _ITEM_READERS.get(item.get("type"))
        return item if read is None else read(item)
    except (KeyError, TypeError, ValueError):
        return item


def _segment_event(item: Mapping[str, Any]) -> SegmentEvent:
    """A `SegmentEvent` from its wire dict."""
    segment_type = item.get("segment_type")
    return SegmentEvent(
        _SEGMENT_TYPES[item["type"]],
        item["segment_id"],
        SegmentType(segment_type) if segment_type else None,
        dict(item.get("payload") or {}),
    )


def _tool_invocation(item: Mapping[str, Any]) -> ToolInvocation:
    """A `ToolInvocation` from its wire dict."""
    error = item.get("error")
    return ToolInvocation(
        item["id"],
        item["name"],
        dict(item.get("arguments") or {}),
        ToolCallError(error["kind"], error["message"], error.get("raw", ""), error.get("offset"))
        if error
        else None,
        bool(item.get("provider_executed", False)),
    )


def _tool_output(item: Mapping[str, Any]) -> ToolOutput:
    """A `ToolOutput` from its wire dict."""
    return ToolOutput(
        call_id=item["call_id"],
        output=item.get("output"),
        name=item.get("name") or "",
        status=item.get("status") or "ok",
    )


def _approval_request(item: Mapping[str, Any]) -> ToolApprovalRequest:
    """A `ToolApprovalRequest` from its wire dict."""
    return ToolApprovalRequest(
        call_id=item["call_id"],
        name=item.get("name") or "",
        arguments=dict(item.get("arguments") or {}),
        expires_at=item.get("expires_at"),
    )


def _response_end(item: Mapping[str, Any]) -> ResponseEnd:
    """A `ResponseEnd` from its wire dict."""
    usage = item.get("usage")
    return ResponseEnd(
        finish_reason=item.get("finish_reason"),
        usage=TokenUsage(**usage) if usage else None,
        metadata=dict(item.get("metadata") or {}),
    )


_ITEM_READERS: Final[dict[Any, Callable[[Mapping[str, Any]], UIItem]]] = {
    **dict.fromkeys(_SEGMENT_TYPES, _segment_event),
    "TOOL_INVOCATION": _tool_invocation,
    "TOOL_OUTPUT": _tool_output,
    "TOOL_APPROVAL_REQUEST": _approval_request,
    "RESPONSE_END": _response_end,
}
"""The wire ``type`` of each pipeline item -> how to read it back."""


class ToolCallState:
    """One tool segment as an encoder follows it: its name, whether raw argument text was sent, whether
    its input was announced, and its END's arguments (for a stream without the invocation folder)."""

    __slots__ = ("announced", "args_sent", "end", "kind", "name", "provider_executed", "raw")

    def __init__(self, name: str, kind: SegmentType, *, provider_executed: bool, raw: bool) -> None:
        self.name = name
        self.kind = kind
        self.provider_executed = provider_executed
        self.raw = raw
        """Its CONTENT is the arguments' JSON text (not a file's decoded text nor a custom tool's input)."""
        self.args_sent = False
        self.announced = False
        self.end: SegmentEvent | None = None

    @classmethod
    def starting(cls, event: SegmentEvent, segment_type: SegmentType) -> ToolCallState:
        """The state of a tool segment from its START: a plain call's CONTENT is its arguments' text."""
        metadata = event.metadata
        raw = segment_type is SegmentType.TOOL_CALL and not metadata.get("custom")
        executed = bool(metadata.get("provider_executed"))
        return cls(event.tool_name or "", segment_type, provider_executed=executed, raw=raw)


def argument_data(event: SegmentEvent) -> dict[str, Any]:
    """The extension payload of an ARGUMENT event: the call, the path, and the value or the text piece."""
    data: dict[str, Any] = {"toolCallId": event.segment_id, "path": event.payload.get("path", [])}
    if "value" in event.payload:
        data["value"] = event.payload["value"]
    else:
        data["delta"] = event.payload.get("delta", "")
    return data


def invocation_from_end(end: SegmentEvent, call: ToolCallState) -> ToolInvocation:
    """The invocation a tool segment's END describes (when no `ToolInvocation` follows it)."""
    arguments = end.arguments
    return ToolInvocation(
        end.segment_id,
        end.tool_name or call.name,
        arguments if isinstance(arguments, dict) else {},
        end.error,
        call.provider_executed,
    )

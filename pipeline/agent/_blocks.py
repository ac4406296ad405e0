"""The content blocks an Anthropic or Bedrock Converse assistant turn is built from, one builder per
segment kind, and the call facts every wire format reads (a call's tool name, its folded arguments)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from pipeline.agent._portable import Segment as _Segment
from pipeline.errors import TurnError
from pipeline.models import SegmentType, ToolInvocation

__all__ = ["Message", "anthropic_block", "call_name", "converse_block", "folded_arguments"]

Message: TypeAlias = dict[str, Any]


def call_name(segment: _Segment) -> str:
    name = segment.start.get("tool_name") or (segment.end or {}).get("tool_name")
    if not isinstance(name, str):
        raise TurnError(f"tool call segment {segment.id!r} has no tool name")
    return name


def folded_arguments(segment: _Segment, calls: Mapping[str, ToolInvocation]) -> Any:
    """A call's folded arguments; without its invocation, what its segment's end holds."""
    call = calls.get(segment.id)
    return call.arguments if call is not None else (segment.end or {}).get("arguments", {})


_BlockBuilder: TypeAlias = Callable[
    [_Segment, dict[str, Any], Mapping[str, ToolInvocation]], "Message | None"
]
"""Builds the block of one segment from the segment, its end metadata and the folded calls; None for what
the provider does not take back."""


def anthropic_block(
    segment: _Segment, end: dict[str, Any], calls: Mapping[str, ToolInvocation]
) -> Message | None:
    """The Anthropic content block of one segment; None for what Anthropic does not take back."""
    build = _ANTHROPIC_BLOCKS.get(segment.kind)
    return None if build is None else build(segment, end, calls)


def _anthropic_thinking(
    segment: _Segment, end: dict[str, Any], _: Mapping[str, ToolInvocation]
) -> Message | None:
    """A ``redacted_thinking`` block, or a signed ``thinking`` one; unsigned thinking is not taken back."""
    if end.get("encrypted_content"):
        return {"type": "redacted_thinking", "data": end["encrypted_content"]}
    if end.get("signature"):
        return {"type": "thinking", "thinking": segment.text, "signature": end["signature"]}
    return None


def _anthropic_text(
    segment: _Segment, end: dict[str, Any], _: Mapping[str, ToolInvocation]
) -> Message | None:
    if not segment.text:
        return None
    block: Message = {"type": "text", "text": segment.text}
    citations = end.get("citations")
    if citations:
        block["citations"] = [entry["citation"] for entry in citations]
    return block


def _anthropic_call(segment: _Segment, _: dict[str, Any], calls: Mapping[str, ToolInvocation]) -> Message:
    """A ``tool_use`` block, or a ``server_tool_use`` / ``mcp_tool_use`` one for a provider-executed call."""
    name = call_name(segment)
    arguments = folded_arguments(segment, calls)
    if not segment.start.get("provider_executed"):
        return {"type": "tool_use", "id": segment.id, "name": name, "input": arguments}
    server_name = segment.start.get("server_name")
    mcp = server_name is not None or segment.id.startswith("mcptoolu_")
    block: Message = {
        "type": "mcp_tool_use" if mcp else "server_tool_use",
        "id": segment.id,
        "name": name,
        "input": arguments,
    }
    if server_name is not None:
        block["server_name"] = server_name
    return block


def _anthropic_result(segment: _Segment, end: dict[str, Any], _: Mapping[str, ToolInvocation]) -> Message:
    meta = {**segment.start, **end}
    result: Message = {
        "type": meta.get("result_type") or "tool_result",
        "tool_use_id": meta["call_id"],
        "content": meta.get("result"),
    }
    if meta.get("is_error") and result["type"] == "mcp_tool_result":
        result["is_error"] = True
    return result


def converse_block(
    segment: _Segment, end: dict[str, Any], calls: Mapping[str, ToolInvocation]
) -> Message | None:
    """The Converse content block of one segment; None for what Converse does not take back."""
    build = _CONVERSE_BLOCKS.get(segment.kind)
    return None if build is None else build(segment, end, calls)


def _converse_reasoning(
    segment: _Segment, end: dict[str, Any], _: Mapping[str, ToolInvocation]
) -> Message | None:
    """A ``reasoningContent`` block: redacted, or text with its signature if it has one."""
    if end.get("encrypted_content"):
        return {"reasoningContent": {"redactedContent": end["encrypted_content"]}}
    if not segment.text and not end.get("signature"):
        return None
    reasoning: Message = {"text": segment.text}
    if end.get("signature"):
        reasoning["signature"] = end["signature"]
    return {"reasoningContent": {"reasoningText": reasoning}}


def _converse_text(segment: _Segment, _: dict[str, Any], __: Mapping[str, ToolInvocation]) -> Message | None:
    return {"text": segment.text} if segment.text else None


def _converse_result(segment: _Segment, end: dict[str, Any], _: Mapping[str, ToolInvocation]) -> Message:
    meta = {**segment.start, **end}
    result: Message = {
        "toolUseId": meta["call_id"],
        "content": meta.get("result") or [],
        "status": "error" if meta.get("is_error") else "success",
    }
    if meta.get("result_type"):
        result["type"] = meta["result_type"]
    return {"toolResult": result}


def _converse_call(segment: _Segment, _: dict[str, Any], calls: Mapping[str, ToolInvocation]) -> Message:
    tool_use: Message = {
        "toolUseId": segment.id,
        "name": call_name(segment),
        "input": folded_arguments(segment, calls),
    }
    if segment.start.get("provider_executed"):
        tool_use["type"] = "server_tool_use"
    return {"toolUse": tool_use}


_ANTHROPIC_BLOCKS: dict[SegmentType, _BlockBuilder] = {
    SegmentType.REASONING: _anthropic_thinking,
    SegmentType.TEXT: _anthropic_text,
    SegmentType.TOOL_RESULT: _anthropic_result,
    SegmentType.TOOL_CALL: _anthropic_call,
    SegmentType.WRITE_FILE: _anthropic_call,
    SegmentType.PATCH_FILE: _anthropic_call,
}

_CONVERSE_BLOCKS: dict[SegmentType, _BlockBuilder] = {
    SegmentType.REASONING: _converse_reasoning,
    SegmentType.TEXT: _converse_text,
    SegmentType.TOOL_RESULT: _converse_result,
    SegmentType.TOOL_CALL: _converse_call,
    SegmentType.WRITE_FILE: _converse_call,
    SegmentType.PATCH_FILE: _converse_call,
}

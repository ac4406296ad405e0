"""Next-turn builders: a response's events folded into the messages to send back, for each wire format.

An agent loop sends the model's own answer back with the tool results. What must go back is strict and
differs per provider: Anthropic thinking blocks with their signatures, in their original order, redacted
thinking as opaque data, server tool calls followed by their result blocks; OpenAI Responses reasoning
items with their ids and encrypted content; Gemini ``thoughtSignature`` on the part it came with. A
`TurnBuilder` folds the `PipelineEvent`s of ``process()`` (as they
stream, or afterwards) into an `AssistantTurn`, which also builds the tool-result messages::

    builder = TurnBuilder("anthropic")
    async with process(response).stream() as events:
        async for event in events:
            builder.feed(event)
    turn = builder.finish()
    outputs = [(call.id, run(call)) for call in turn.invocations]
    messages += [*turn.messages, *turn.tool_results(outputs)]

The messages are plain dicts in the provider's request JSON (what the official SDKs accept as their
``...Param`` types). Policies where the provider leaves a choice:

- An empty response gives no message at all (every provider rejects an empty assistant message).
- Anthropic: a thinking block that never got its signature (a response cut off inside it) is dropped,
  since the API rejects an unsigned thinking block; empty text blocks are dropped.
- OpenAI Chat and Responses: a call's arguments go back as the exact text the model wrote (cache-friendly;
  a file tool's segment streams the file instead, so its folded arguments are encoded); Anthropic and
  Gemini take the parsed object (what was complete when the arguments were cut off).
- OpenAI Responses: reasoning segments with the same id are one item, where the id first appeared.
- OpenAI Responses: text goes back as an assistant message with string content (the output message's
  ``msg_`` id is not part of the events); reasoning text as one ``summary_text``; a reasoning block without
  an id is dropped (the API requires one). Provider-executed calls go back whole where the events hold the
  item (``web_search_call``, ``file_search_call``, ``code_interpreter_call``, a hosted ``shell_call`` with
  its ``shell_call_output``), else as an ``item_reference`` to their id (which needs ``store=true``).
- Gemini: code execution goes back as ``executableCode`` / ``codeExecutionResult`` parts; the parts of
  other built-in tools (``toolCall``, ``toolResponse``) are left out. A call id goes back
  (``functionCall.id``, ``functionResponse.id``) only when the provider minted it: models before Gemini 3
  and Vertex reject an ``id`` they did not send. Ids made up by the converter's ``id_factory`` are
  recognised by ``is_generated_id`` (default: the default factory's shape, ``call_`` + 24 hex).
- Bedrock Converse: reasoning goes back as ``reasoningContent`` (``reasoningText`` with its signature
  when it has one, a reasoning block without signature as text alone, redacted reasoning as
  ``redactedContent`` in base64 text, as the HTTP JSON carries it: boto3 wants the bytes,
  ``base64.b64decode`` it); citations are left out of text blocks; a provider-executed call goes back as
  its ``toolUse`` (``type: server_tool_use``) followed by its ``toolResult``. Tool outputs are
  ``toolResult`` blocks of one user message: an object as ``{"json": ...}``, anything else as text,
  ``status: error`` for a failed tool.
- Tool outputs that are not strings are sent as compact JSON; Gemini gets ``{"output": ...}`` or
  ``{"error": ...}``. Every client call of the turn must be answered, and only those:
  `AssistantTurn.tool_results` raises `TurnError` otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, get_args

from pipeline._jsonenc import encode_json
from pipeline.agent._blocks import Message, anthropic_block, call_name, converse_block, folded_arguments
from pipeline.agent._portable import Dropped, portable_segments
from pipeline.agent._portable import Segment as _Segment
from pipeline.agent.checks import ReasoningContentRule, Violation, check_conversation
from pipeline.errors import ConfigurationError, TurnError
from pipeline.models import (
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    ToolInvocation,
    ToolOutput,
)

__all__ = [
    "WIRE_FORMATS",
    "AssistantTurn",
    "Dropped",
    "TurnBuilder",
    "TurnError",
    "WireFormat",
    "assistant_message",
    "assistant_turn",
    "is_default_generated_id",
]

WireFormat: TypeAlias = Literal["openai_chat", "openai_responses", "anthropic", "gemini", "bedrock_converse"]
WIRE_FORMATS: tuple[str, ...] = get_args(WireFormat)


_DEFAULT_ID = re.compile(r"call_[0-9a-f]{24}")


def _always(call_id: str) -> bool:
    """Every id counts as made up: the ids of another provider's calls are not Gemini's."""
    del call_id
    return True


def is_default_generated_id(call_id: str) -> bool:
    """Whether ``call_id`` has the shape of the converters' default id factory (``call_`` + 24 hex)."""
    return _DEFAULT_ID.fullmatch(call_id) is not None


@dataclass(frozen=True, slots=True)
class AssistantTurn:
    """The assistant side of one response, in one wire format, and how to answer its tool calls."""

    format: WireFormat
    """The wire format of the next request, which ``messages`` are in."""
    messages: list[Message]
    """What to append to the conversation: one assistant message (Responses: the input items), or none
    for an empty response."""
    invocations: tuple[ToolInvocation, ...]
    """The client calls to run, in call order (provider-executed calls are already in ``messages``)."""
    end: ResponseEnd | None = None
    """How the response ended; None when its events stopped before the end."""
    custom_calls: frozenset[str] = frozenset()
    """Ids of the calls to custom (free-form) tools, answered as such in Responses."""
    call_names: Mapping[str, str] = field(default_factory=dict)
    """Call id -> tool name, for formats that answer a call by its name (Gemini)."""
    provider_ids: frozenset[str] = frozenset()
    """Ids the provider gave (not made by the converter), which Gemini's answers carry back."""
    dropped: tuple[Dropped, ...] = ()
    """What of the response the messages leave out, each with why (see `TurnBuilder`'s
    ``source``)."""

    def tool_results(
        self, outputs: Iterable[ToolOutput | tuple[str, Any]] | Mapping[str, Any]
    ) -> list[Message]:
        """The messages answering this turn's client calls, in call order.

        ``outputs``: `ToolOutput`s, ``(call id, output)`` pairs or a mapping call id -> output.

        Raises:
            TurnError: an output for an id that is not a client call of this turn, two for one id, or a
                client call left without one (every provider rejects the next request then).
        """
        by_id = self._outputs_by_id(outputs)
        ordered = [by_id[call.id] for call in self.invocations]
        return _RESULT_MESSAGES[self.format](self, ordered)

    def _chat_results(self, ordered: list[ToolOutput]) -> list[Message]:
        """OpenAI Chat: one ``tool`` message per output."""
        return [
            {"role": "tool", "tool_call_id": out.call_id, "content": _as_text(out.output)} for out in ordered
        ]

    def _responses_results(self, ordered: list[ToolOutput]) -> list[Message]:
        """OpenAI Responses: one output item per call, of the call's kind (function or custom)."""
        return [
            {
                "type": "custom_tool_call_output"
                if out.call_id in self.custom_calls
                else "function_call_output",
                "call_id": out.call_id,
                "output": _as_text(out.output),
            }
            for out in ordered
        ]

    def _anthropic_results(self, ordered: list[ToolOutput]) -> list[Message]:
        """Anthropic: ``tool_result`` blocks in one user message."""
        return _user_message("content", [_anthropic_tool_result(out) for out in ordered])

    def _converse_results(self, ordered: list[ToolOutput]) -> list[Message]:
        """Bedrock Converse: ``toolResult`` blocks in one user message."""
        return _user_message("content", [_converse_tool_result(out) for out in ordered])

    def _gemini_results(self, ordered: list[ToolOutput]) -> list[Message]:
        """Gemini: ``functionResponse`` parts in one user message, with the id only where Gemini minted it."""
        parts: list[Message] = []
        for out in ordered:
            response: Message = {"name": self.call_names[out.call_id]}
            if out.call_id in self.provider_ids:
                response["id"] = out.call_id
            response["response"] = {"error" if out.is_error else "output": out.output}
            parts.append({"functionResponse": response})
        return _user_message("parts", parts)

    def _outputs_by_id(
        self, outputs: Iterable[ToolOutput | tuple[str, Any]] | Mapping[str, Any]
    ) -> dict[str, ToolOutput]:
        items: Iterable[Any] = outputs.items() if isinstance(outputs, Mapping) else outputs
        expected = {call.id for call in self.invocations}
        by_id: dict[str, ToolOutput] = {}
        for number, item in enumerate(items):
            out = _as_tool_output(number, item)
            if out.call_id not in expected:
                raise TurnError(
                    f"tool output {number} answers {out.call_id!r}, which is not a client call of this turn"
                )
            if out.call_id in by_id:
                raise TurnError(f"tool output {number} answers {out.call_id!r} a second time")
            by_id[out.call_id] = out
        missing = [call.id for call in self.invocations if call.id not in by_id]
        if missing:
            raise TurnError(
                f"no tool output for the calls {missing} (every call of the turn must be answered)"
            )
        return by_id


_RESULT_MESSAGES = {
    "openai_chat": AssistantTurn._chat_results,
    "openai_responses": AssistantTurn._responses_results,
    "anthropic": AssistantTurn._anthropic_results,
    "bedrock_converse": AssistantTurn._converse_results,
    "gemini": AssistantTurn._gemini_results,
}


def _as_tool_output(number: int, item: Any) -> ToolOutput:
    """One of the outputs given to `AssistantTurn.tool_results` as a `ToolOutput`."""
    if isinstance(item, ToolOutput):
        return item
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return ToolOutput(call_id=item[0], output=item[1])
    raise TurnError(
        f"tool output {number} is a {type(item).__name__}: give a ToolOutput or a (call id, output) pair"
    )


def _user_message(key: str, blocks: list[Message]) -> list[Message]:
    """One user message holding ``blocks`` under ``key``; none when there are no blocks."""
    return [{"role": "user", key: blocks}] if blocks else []


def _anthropic_tool_result(out: ToolOutput) -> Message:
    """A ``tool_result`` block answering one client call."""
    block: Message = {"type": "tool_result", "tool_use_id": out.call_id, "content": _as_text(out.output)}
    if out.is_error:
        block["is_error"] = True
    return block


class TurnBuilder:
    """Sans-IO fold of one response's pipeline events into an `AssistantTurn`.

    ``feed`` each `PipelineEvent` (segment events, invocations, the response end),
    then ``finish``. Memory: the text of each segment is kept (as received pieces, joined once at the end).
    A segment that starts twice, an invocation folded twice or a second ``ResponseEnd`` (the same events
    fed twice) raises `TurnError` and leaves the turn as it was: a provider rejects repeated
    tool-call ids.

    Args:
        format: the wire format of the next request.
        reasoning_key: OpenAI Chat only: send the reasoning back under this key (``"reasoning_content"`` for
            DeepSeek and other compatible servers that want it back); None (default) leaves it out.
        is_generated_id: Gemini only: whether a call id was made up by the converter (then it is not sent).
        source: the wire format of the provider that answered, when it differs from ``format`` (switching
            models mid-conversation): what is bound to that provider (signatures, encrypted reasoning,
            reasoning ids, provider-executed calls and their results, its citations) is left out, and
            `AssistantTurn.dropped` says what and why. None (default): the same provider.

    Raises:
        ConfigurationError: ``format`` or ``source`` is not a wire format, or ``is_generated_id`` is not
            callable.
    """

    __slots__ = (
        "_end",
        "_format",
        "_invocation_ids",
        "_invocations",
        "_is_generated_id",
        "_open",
        "_reasoning_key",
        "_segments",
        "_source",
        "_started",
    )

    def __init__(
        self,
        format: WireFormat | str,
        *,
        reasoning_key: str | None = None,
        is_generated_id: Any = is_default_generated_id,
        source: WireFormat | str | None = None,
    ) -> None:
        for option, value in (("format", format), ("source", format if source is None else source)):
            if value not in WIRE_FORMATS:
                raise ConfigurationError(f"{option} must be one of {', '.join(WIRE_FORMATS)}; got {value!r}")
        if not callable(is_generated_id):
            raise ConfigurationError(f"is_generated_id must be callable; got {is_generated_id!r}")
        self._format: WireFormat = format  # type: ignore[assignment]
        self._reasoning_key = reasoning_key
        self._source = source if source != format else None
        self._is_generated_id = _always if self._source not in (None, "gemini") else is_generated_id
        self._segments: list[_Segment] = []
        self._open: dict[str, _Segment] = {}
        self._started: set[str] = set()
        self._invocations: list[ToolInvocation] = []
        self._invocation_ids: set[str] = set()
        self._end: ResponseEnd | None = None

    def feed(self, event: Any) -> None:
        """Fold one pipeline event.

        Raises:
            TurnError: a segment event out of order, an invocation or ``ResponseEnd`` fed twice, or an
                item that is not a pipeline event; the turn is left as it was.
        """
        if isinstance(event, SegmentEvent):
            self._fold_segment_event(event)
        elif isinstance(event, ToolInvocation):
            self._fold_invocation(event)
        elif isinstance(event, ResponseEnd):
            if self._end is not None:
                raise TurnError("a second ResponseEnd (the same events fed twice?)")
            self._end = event
        else:
            raise TurnError(
                f"a {type(event).__name__} is not a pipeline event "
                "(SegmentEvent, ToolInvocation, ResponseEnd)"
            )

    def _fold_segment_event(self, event: SegmentEvent) -> None:
        """A segment's start, a piece of its content, or its end."""
        kind = event.event_type
        if kind is SegmentEventType.START:
            self._start(event)
        elif kind is SegmentEventType.CONTENT:
            self._segment(event).pieces.append(event.payload["delta"])
        elif kind is SegmentEventType.END:
            self._segment(event).end = dict(event.metadata)
            del self._open[event.segment_id]

    def _fold_invocation(self, event: ToolInvocation) -> None:
        """A folded call, refused when its id was folded before."""
        if event.id in self._invocation_ids:
            raise TurnError(f"invocation {event.id!r} folded a second time (the same events fed twice?)")
        self._invocation_ids.add(event.id)
        self._invocations.append(event)

    def check(
        self,
        messages: Iterable[Any],
        *,
        thinking: bool = False,
        store: bool = True,
        reasoning_content: ReasoningContentRule = None,
        thought_signatures: bool = False,
    ) -> list[Violation]:
        """The rules of this builder's format that the next request's conversation breaks, each named
        with its position: `pipeline.agent.check_conversation`, whose doc lists the rules;
        `pipeline.agent.repair_conversation` fixes what is safe to fix.

        Args:
            messages: the conversation, as the request body lists it.
            thinking: as `pipeline.agent.check_conversation` takes it.
            store: as `pipeline.agent.check_conversation` takes it.
            reasoning_content: as `pipeline.agent.check_conversation` takes it.
            thought_signatures: as `pipeline.agent.check_conversation` takes it.
        """
        return check_conversation(
            messages,
            self._format,
            thinking=thinking,
            store=store,
            reasoning_content=reasoning_content,
            thought_signatures=thought_signatures,
        )

    def _start(self, event: SegmentEvent) -> None:
        segment_type = event.segment_type
        if segment_type is None:
            raise TurnError(f"segment {event.segment_id!r} starts without a segment type")
        if event.segment_id in self._started:
            raise TurnError(f"segment {event.segment_id!r} starts a second time (the same events fed twice?)")
        segment = _Segment(segment_type, event.segment_id, dict(event.metadata))
        self._segments.append(segment)
        self._started.add(event.segment_id)
        self._open[event.segment_id] = segment

    def _segment(self, event: SegmentEvent) -> _Segment:
        segment = self._open.get(event.segment_id)
        if segment is None:
            raise TurnError(f"{event.event_type.value} for segment {event.segment_id!r}, which is not open")
        return segment

    def finish(self) -> AssistantTurn:
        """The turn. Segments still open (events cut short) count with what they received."""
        client = tuple(call for call in self._invocations if not call.provider_executed)
        custom = frozenset(
            s.id for s in self._segments if s.kind is SegmentType.TOOL_CALL and s.start.get("custom")
        )
        names = {call.id: call.name for call in client}
        provider_ids = frozenset(call.id for call in client if not self._is_generated_id(call.id))
        segments, dropped = portable_segments(self._segments, self._format, self._source, self._reasoning_key)
        messages = _BUILDERS[self._format](self, segments)
        return AssistantTurn(
            format=self._format,
            messages=messages,
            invocations=client,
            end=self._end,
            custom_calls=custom,
            call_names=names,
            provider_ids=provider_ids if self._format == "gemini" else frozenset(names),
            dropped=tuple(dropped),
        )

    # per format

    def _calls(self) -> dict[str, ToolInvocation]:
        return {call.id: call for call in self._invocations}

    def _openai_chat(self, segments: list[_Segment]) -> list[Message]:
        text: list[str] = []
        refusal: list[str] = []
        reasoning: list[str] = []
        tool_calls: list[Message] = []
        calls = self._calls()
        for segment in segments:
            if segment.kind is SegmentType.TEXT:
                (refusal if segment.start.get("refusal") else text).append(segment.text)
            elif segment.kind is SegmentType.REASONING:
                reasoning.append(segment.text)
            elif _is_client_call(segment):
                tool_calls.append(_chat_tool_call(segment, calls))
        return self._chat_message("".join(text), refusal, reasoning, tool_calls)

    def _chat_message(
        self, content: str, refusal: list[str], reasoning: list[str], tool_calls: list[Message]
    ) -> list[Message]:
        """The Chat assistant message; none for a turn without text, refusal or calls."""
        if not content and not refusal and not tool_calls:
            return []
        message: Message = {"role": "assistant", "content": content or None}
        if refusal:
            message["refusal"] = "".join(refusal)
        if self._reasoning_key is not None and any(reasoning):
            message[self._reasoning_key] = "".join(reasoning)
        if tool_calls:
            message["tool_calls"] = tool_calls
        return [message]

    def _openai_responses(self, segments: list[_Segment]) -> list[Message]:
        items: list[Message] = []
        reasoning_items: dict[str, Message] = {}
        results = _results_by_call(segments)
        calls = self._calls()
        for segment in segments:
            if segment.kind is SegmentType.REASONING:
                _add_reasoning_item(items, reasoning_items, segment)
            elif segment.kind is SegmentType.TEXT:
                if segment.text:
                    items.append({"type": "message", "role": "assistant", "content": segment.text})
            elif _is_client_call(segment):
                items.append(_responses_call_item(segment, calls))
            elif segment.kind is SegmentType.TOOL_CALL:
                result = results.get(segment.id)
                if result is not None and result.start.get("result_type") == "shell_call_output":
                    items += _hosted_shell_items(segment, result)
                else:
                    items.append(_responses_server_item(segment, result))
        return items

    def _anthropic(self, segments: list[_Segment]) -> list[Message]:
        calls = self._calls()
        blocks: list[Message] = []
        for segment in segments:
            block = anthropic_block(segment, segment.end or {}, calls)
            if block is not None:
                blocks.append(block)
        return [{"role": "assistant", "content": blocks}] if blocks else []

    def _bedrock_converse(self, segments: list[_Segment]) -> list[Message]:
        calls = self._calls()
        blocks = [
            block
            for segment in segments
            if (block := converse_block(segment, segment.end or {}, calls)) is not None
        ]
        return [{"role": "assistant", "content": blocks}] if blocks else []

    def _gemini(self, segments: list[_Segment]) -> list[Message]:
        calls = self._calls()
        parts: list[Message] = []
        for segment in segments:
            end = segment.end or {}
            part = self._gemini_part(segment, end, calls)
            if part is None:
                continue
            if end.get("signature"):
                part["thoughtSignature"] = end["signature"]
            parts.append(part)
        return [{"role": "model", "parts": parts}] if parts else []

    def _gemini_part(
        self, segment: _Segment, end: dict[str, Any], calls: Mapping[str, ToolInvocation]
    ) -> Message | None:
        """The Gemini part of one segment, without its signature; None for what Gemini does not take back."""
        build = _GEMINI_PARTS.get(segment.kind)
        return None if build is None else build(self, segment, end, calls)

    def _gemini_thought(
        self, segment: _Segment, end: dict[str, Any], _: Mapping[str, ToolInvocation]
    ) -> Message:
        return {"text": segment.text, "thought": True}

    def _gemini_text(
        self, segment: _Segment, end: dict[str, Any], _: Mapping[str, ToolInvocation]
    ) -> Message | None:
        return {"text": segment.text} if segment.text or end.get("signature") else None

    def _gemini_result(
        self, segment: _Segment, end: dict[str, Any], _: Mapping[str, ToolInvocation]
    ) -> Message | None:
        """A code execution result; Gemini takes no other result back."""
        result = end.get("result")
        if end.get("result_type") != "code_execution_result" or not isinstance(result, dict):
            return None
        return {"codeExecutionResult": dict(result)}

    def _gemini_call(
        self, segment: _Segment, end: dict[str, Any], calls: Mapping[str, ToolInvocation]
    ) -> Message | None:
        """A client call's ``functionCall`` part; a provider-executed call's ``executableCode`` part."""
        if segment.start.get("provider_executed"):
            return self._gemini_code(segment, end)
        return self._gemini_function_call(segment, end, calls)

    def _gemini_function_call(
        self, segment: _Segment, _: dict[str, Any], calls: Mapping[str, ToolInvocation]
    ) -> Message:
        function_call: Message = {"name": call_name(segment), "args": folded_arguments(segment, calls)}
        if not self._is_generated_id(segment.id):
            function_call["id"] = segment.id
        return {"functionCall": function_call}

    def _gemini_code(self, segment: _Segment, end: dict[str, Any]) -> Message | None:
        """A provider-executed call as Gemini's ``executableCode`` part: code execution only (other
        built-in tools' parts are not in the events whole)."""
        arguments = end.get("arguments")
        if call_name(segment) != "code_execution" or not isinstance(arguments, dict):
            return None
        code: Message = dict(arguments)
        if not self._is_generated_id(segment.id):
            code["id"] = segment.id
        return {"executableCode": code}


_FILE_SEGMENTS = frozenset({SegmentType.WRITE_FILE, SegmentType.PATCH_FILE})

_GEMINI_PARTS = {
    SegmentType.REASONING: TurnBuilder._gemini_thought,
    SegmentType.TEXT: TurnBuilder._gemini_text,
    SegmentType.TOOL_RESULT: TurnBuilder._gemini_result,
    SegmentType.TOOL_CALL: TurnBuilder._gemini_call,
    SegmentType.WRITE_FILE: TurnBuilder._gemini_function_call,
    SegmentType.PATCH_FILE: TurnBuilder._gemini_function_call,
}

_BUILDERS = {
    "openai_chat": TurnBuilder._openai_chat,
    "openai_responses": TurnBuilder._openai_responses,
    "anthropic": TurnBuilder._anthropic,
    "gemini": TurnBuilder._gemini,
    "bedrock_converse": TurnBuilder._bedrock_converse,
}


def _converse_tool_result(out: ToolOutput) -> Message:
    """A ``toolResult`` block answering one client call: an object as JSON, anything else as text."""
    content = {"json": out.output} if isinstance(out.output, Mapping) else {"text": _as_text(out.output)}
    result = {
        "toolUseId": out.call_id,
        "content": [content],
        "status": "error" if out.is_error else "success",
    }
    return {"toolResult": result}


def _is_client_call(segment: _Segment) -> bool:
    return (
        segment.kind is SegmentType.TOOL_CALL or segment.kind in _FILE_SEGMENTS
    ) and not segment.start.get("provider_executed")


def _arguments_text(segment: _Segment, calls: Mapping[str, ToolInvocation]) -> str:
    """The arguments text as the model wrote it; a file segment's CONTENT is the file, so its arguments
    are the folded ones, encoded."""
    if segment.kind in _FILE_SEGMENTS:
        return encode_json(folded_arguments(segment, calls)).decode()
    return segment.text


def _chat_tool_call(segment: _Segment, calls: Mapping[str, ToolInvocation]) -> Message:
    """A client call as an OpenAI Chat ``tool_calls`` entry: a custom tool's input or a function's."""
    name = call_name(segment)
    if segment.start.get("custom"):
        return {"id": segment.id, "type": "custom", "custom": {"name": name, "input": segment.text}}
    function = {"name": name, "arguments": _arguments_text(segment, calls)}
    return {"id": segment.id, "type": "function", "function": function}


def _responses_call_item(segment: _Segment, calls: Mapping[str, ToolInvocation]) -> Message:
    """A client call as an OpenAI Responses ``custom_tool_call`` or ``function_call`` item."""
    if segment.start.get("custom"):
        kind, key, value = "custom_tool_call", "input", segment.text
    else:
        kind, key, value = "function_call", "arguments", _arguments_text(segment, calls)
    return {"type": kind, "call_id": segment.id, "name": call_name(segment), key: value}


def _add_reasoning_item(items: list[Message], by_id: dict[str, Message], segment: _Segment) -> None:
    """Add a reasoning segment to the Responses item of its id; a segment without an id is dropped."""
    meta = {**segment.start, **(segment.end or {})}
    reasoning_id = meta.get("reasoning_id")
    if not reasoning_id:
        return
    item = by_id.get(reasoning_id)
    if item is None:
        # One item per id, where it first appeared (its done event may come after later items).
        item = by_id[reasoning_id] = {"type": "reasoning", "id": reasoning_id, "summary": []}
        items.append(item)
    if segment.text:
        item["summary"].append({"type": "summary_text", "text": segment.text})
    if meta.get("encrypted_content"):
        item["encrypted_content"] = meta["encrypted_content"]


def _results_by_call(segments: list[_Segment]) -> dict[str, _Segment]:
    return {
        str(segment.start.get("call_id")): segment
        for segment in segments
        if segment.kind is SegmentType.TOOL_RESULT
    }


def _responses_server_item(segment: _Segment, result: _Segment | None) -> Message:
    """A provider-executed Responses item, whole where the events hold it, else a reference to its id."""
    reference: Message = {"type": "item_reference", "id": segment.id}
    if result is None:
        return reference
    arguments: Any = (segment.end or {}).get("arguments") or {}
    item_type = result.start.get("result_type", "")
    whole = _SERVER_ITEMS.get(item_type)
    if whole is None or not isinstance(arguments, dict) or whole[0] not in arguments:
        return reference
    base: Message = {"type": item_type, "id": segment.id, "status": "completed"}
    return {**base, **whole[1](arguments, (result.end or {}).get("result"))}


def _web_search_fields(arguments: dict[str, Any], output: Any) -> Message:
    """A ``web_search_call``'s action, with the sources of a search that found some."""
    action = dict(arguments)
    if output and action.get("type") == "search":
        action["sources"] = output
    return {"action": action}


def _file_search_fields(arguments: dict[str, Any], output: Any) -> Message:
    """A ``file_search_call``'s queries and results."""
    return {"queries": arguments["queries"], "results": output}


def _code_interpreter_fields(arguments: dict[str, Any], output: Any) -> Message:
    """A ``code_interpreter_call``'s code, container and outputs."""
    return {"code": arguments.get("code"), "container_id": arguments["container_id"], "outputs": output}


_SERVER_ITEMS: dict[str, tuple[str, Callable[[dict[str, Any], Any], Message]]] = {
    # item type: (the argument that shows the events hold the item whole, the item's own fields)
    "web_search_call": ("type", _web_search_fields),
    "file_search_call": ("queries", _file_search_fields),
    "code_interpreter_call": ("container_id", _code_interpreter_fields),
}


def _hosted_shell_items(segment: _Segment, result: _Segment) -> list[Message]:
    """A shell call OpenAI ran in its container, and its output: both items whole, by their call id."""
    action = (segment.end or {}).get("arguments") or {}
    output = (result.end or {}).get("result") or []
    return [
        {"type": "shell_call", "call_id": segment.id, "action": action, "status": "completed"},
        {"type": "shell_call_output", "call_id": segment.id, "output": output},
    ]


def _as_text(output: Any) -> str:
    return output if isinstance(output, str) else encode_json(output).decode()


def assistant_turn(events: Iterable[Any], format: WireFormat | str, **options: Any) -> AssistantTurn:
    """Fold a whole response's pipeline events (a list, say) into an `AssistantTurn`.

    Args:
        events: the response's events.
        format: the wire format of the next request.
        **options: more options of `TurnBuilder`.
    """
    builder = TurnBuilder(format, **options)
    for event in events:
        builder.feed(event)
    return builder.finish()


def assistant_message(events: Iterable[Any], format: WireFormat | str, **options: Any) -> list[Message]:
    """The assistant side of a response to append to the conversation (Responses: its input items).

    Args:
        events: the response's events.
        format: the wire format of the next request.
        **options: more options of `TurnBuilder`.
    """
    return assistant_turn(events, format, **options).messages

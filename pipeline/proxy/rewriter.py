"""The proxy's sans-IO core: a streamed Chat Completions answer's SSE bytes in, the client's SSE bytes out.

`ChatStreamRewriter` is the stages chained with `pipeline.stage.chain`: the upstream body
(SSE, or a whole JSON completion), the OpenAI converter, the delimiter rewriter of ``tool_format``, the
OpenAI encoder. It knows nothing of HTTP: `pipeline.proxy.app` feeds it each upstream read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from contextlib import suppress
from typing import Any, Final

from operators.convert.openai_chat import OpenAIChatConverter
from operators.delimiters import DelimiterRewriter
from operators.encode.openai_chat import OpenAIChunkEncoder, sse_line
from operators.registry import AUTO_FORMAT, resolve_tool_format
from pipeline.errors import StreamfoldError
from pipeline.models import ChunkResponse, IdFactory, ToolCallDelta
from pipeline.proxy._shared import Releasing, UpstreamBody, error_body, stream_error
from pipeline.proxy.policy import ToolPolicy, ToolPolicyFilter
from pipeline.stage import Core, chain

__all__ = [
    "AUTO",
    "DEFAULT_MAX_EVENT_SIZE",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "ChatStreamRewriter",
    "error_body",
    "fold_openai_completion",
    "proxy_tool_format",
]

DEFAULT_MAX_RESPONSE_BYTES: Final = 64 * 1024 * 1024
"""Cap on a whole (non-streamed) upstream answer that the proxy reads before answering (502 beyond)."""
DEFAULT_MAX_EVENT_SIZE: Final = 8 * 1024 * 1024
"""Cap on one upstream SSE event (the stream ends with an error beyond)."""

_DONE: Final = b"data: [DONE]\n\n"
AUTO: Final = AUTO_FORMAT
"""The tool format told from the model's markers (`operators.delimiters.auto`)."""

proxy_tool_format = resolve_tool_format
"""The proxy's name of `resolve_tool_format` (which accepts ``auto``)."""


class ChatStreamRewriter:
    """Sans-IO core of a streamed answer: the upstream's SSE bytes in, the client's SSE bytes out.

    Each event runs through the OpenAI converter, the delimiter rewriter of ``tool_format`` and
    `OpenAIChunkEncoder`, one event at a time, so an error at event *k* comes after everything events
    before it produced. Nothing raises: a failure releases what the rewriter held, then ends the output
    with one ``data: {"error": ...}`` event (`error` tells which), after which the core takes no more
    input. A clean end gives ``data: [DONE]``.

    An upstream that answers the streamed request with a whole ``chat.completion`` JSON body instead of
    SSE (the body's first non-blank byte is ``{``) is read whole and answered as a stream: the message as
    one chunk (its calls rewritten the same way), the finish reason, the usage, ``[DONE]``.

    Args:
        tool_format: the delimiter format of the model's tool calls; ``None``, ``"none"`` or
            ``"api_tool_call"``: no rewriting; ``"auto"``: the format told from the model's markers.
        max_event_size: cap on one upstream event.
        max_response_bytes: cap on a whole ``chat.completion`` body read in place of a stream.
        tool_schemas: tool name -> parameters schema, from the request's ``tools``: it types XML-style
            argument values.
        id_factory: names calls that come without an id.
        policy: the request's tool rules (`pipeline.proxy.policy`), applied to the calls;
            `policy_filter` tells how many it dropped.
        reasoning_tags: ``think``, ``kimi`` or another reasoning format: reasoning written in the text
            moves to ``reasoning_content``, before the rewriter reads it.
        strip_usage: the upstream was asked for the usage chunk and the client was not; the usage is kept
            for `usage` (the access log) and not written to the client.
    """

    __slots__ = ("_core", "_encoder", "_tap", "chunks", "ended", "error", "policy_filter")

    def __init__(
        self,
        tool_format: str | None,
        *,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
        id_factory: IdFactory | None = None,
        policy: ToolPolicy | None = None,
        reasoning_tags: str | None = None,
        strip_usage: bool = False,
    ) -> None:
        options: dict[str, Any] = {"id_factory": id_factory} if id_factory is not None else {}
        rewriting = dict(options)
        if policy is not None and policy.offered_names is not None:
            rewriting["offered_tools"] = policy.offered_names  # calls to other tools stay text
        self._encoder = OpenAIChunkEncoder()
        self._tap = _UsageTap(self._encoder, strip=strip_usage)
        cores: list[Core[Any, Any]] = [
            UpstreamBody(max_event_size, max_response_bytes),
            self._tap,
            OpenAIChatConverter(**options),
        ]
        if reasoning_tags is not None and reasoning_tags != "none":
            from operators.delimiters.reasoning_tags import ReasoningTagSplitter

            cores.append(ReasoningTagSplitter(reasoning_tags))
        tool_format = resolve_tool_format(tool_format)
        if tool_format is not None:
            from operators.delimiters.auto import delimiter_rewriter

            cores.append(Releasing(delimiter_rewriter(tool_format, tool_schemas=tool_schemas, **rewriting)))
        self.policy_filter: ToolPolicyFilter | None = None
        """The stage applying ``policy``, if one was given and it changes anything."""
        if policy is not None and not policy.is_trivial:
            self.policy_filter = ToolPolicyFilter(policy)
            cores.append(self.policy_filter)
        cores.append(self._encoder)
        self._core = chain(*cores)
        self.chunks = 0
        """SSE events written so far (the proxy's metrics)."""
        self.ended = False
        """The output is complete (``[DONE]`` or an error event was written)."""
        self.error: dict[str, Any] | None = None
        """The error object the output ended with, if it did."""

    def feed(self, data: bytes) -> bytes:
        """The next piece of the upstream body; returns the SSE bytes to send now (maybe ``b""``)."""
        if self.ended:
            return b""
        try:
            events = self._core.feed(data)
        except StreamfoldError as exc:
            return self._failed(exc, stream_error(exc))
        if not events:
            return b""
        self.chunks += len(events)
        return b"".join(map(sse_line, events))

    @property
    def usage(self) -> Mapping[str, Any] | None:
        """The upstream's usage object (OpenAI's), once it sent one."""
        return self._tap.usage

    @property
    def calls(self) -> int:
        """Tool calls written so far."""
        return self._encoder.calls_written

    def finish(self) -> bytes:
        """The upstream body ended: the rest of the answer, then ``[DONE]`` or an error event."""
        if self.ended:
            return b""
        try:
            events = self._core.finish()
        except StreamfoldError as exc:
            return self._failed(exc, stream_error(exc))
        self.chunks += len(events) + 1
        out = list(map(sse_line, events))
        self.ended = True
        if self._encoder.finish_reason is None:
            error = error_body("the upstream stream ended without a finish_reason", code="upstream_truncated")
            self.error = dict(error["error"])
            out.append(sse_line(error))
        else:
            out.append(_DONE)
        return b"".join(out)

    def fail(self, error: Mapping[str, Any]) -> bytes:
        """The upstream failed outside the bytes (a cut connection, a timeout): end with ``error``."""
        if self.ended:
            return b""
        failure = StreamfoldError(str(error["error"].get("message", "the upstream failed")))
        abort = getattr(self._core, "abort", None)
        with suppress(StreamfoldError):  # the first failure is the one to report
            failure.partial_outputs = abort(failure) if abort is not None else []
        return self._failed(failure, error)

    def _failed(self, exc: StreamfoldError, error: Mapping[str, Any]) -> bytes:
        """What the chain produced before ``exc``, then the error event ``error``: the output is over."""
        self.ended = True
        self.error = dict(error["error"])
        self.chunks += len(exc.partial_outputs) + 1
        out = [sse_line(chunk) for chunk in exc.partial_outputs]
        exc.partial_outputs = []
        out.append(sse_line(error))
        return b"".join(out)


class _UsageTap:
    """Passes payloads on; the client gets the server's usage as it was sent (the encoder writes it), or,
    with ``strip``, not at all (the proxy asked for it, the client did not); `usage` keeps it."""

    __slots__ = ("_encoder", "_strip", "usage")

    def __init__(self, encoder: OpenAIChunkEncoder, *, strip: bool = False) -> None:
        self._encoder = encoder
        self._strip = strip
        self.usage: Mapping[str, Any] | None = None
        """The upstream's last usage object."""

    def feed(self, payload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        usage = payload.get("usage")
        if isinstance(usage, Mapping):
            self.usage = usage
            if self._strip:
                payload = {key: value for key, value in payload.items() if key != "usage"}
            else:
                self._encoder.upstream_usage = usage
        return [payload]

    def finish(self) -> list[Mapping[str, Any]]:
        return []


_REASONING_FIELDS: Final = ("reasoning_content", "reasoning")


def fold_openai_completion(
    completion: Mapping[str, Any],
    tool_format: str,
    *,
    id_factory: IdFactory | None = None,
    tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
    offered_tools: Collection[str] | None = None,
) -> dict[str, Any]:
    """A whole ``chat.completion`` with the delimiter tool calls of each choice's message moved out.

    ``message.content`` and ``message.reasoning_content`` (or ``reasoning``) lose the calls written in
    them (content becomes ``None`` when nothing else is left), the calls are appended to
    ``message.tool_calls`` after any the server already parsed, and a ``finish_reason`` of ``stop`` becomes
    ``tool_calls`` when calls were found and each of them ended (one the model left open keeps ``stop``,
    as `DelimiterRewriter` says). Everything else (``id``, ``model``, ``usage``, ...) is kept.
    A choice whose content is not a string (a list of parts) is left as it is.

    Args:
        completion: the upstream's answer; not modified.
        tool_format: the delimiter format of the model's tool calls.
        id_factory: names calls that come without an id.
        tool_schemas: tool name -> parameters schema: it types XML-style argument values.
        offered_tools: the tools the request offered: a call to any other tool stays in the text as the
            model wrote it (see `DelimiterRewriter`).

    Returns:
        The completion, with its choices rewritten.
    """
    result = dict(completion)
    choices = completion.get("choices")
    if not isinstance(choices, list):
        return result

    def rewriter() -> DelimiterRewriter:
        return DelimiterRewriter(
            tool_format, id_factory=id_factory, tool_schemas=tool_schemas, offered_tools=offered_tools
        )

    result["choices"] = [_fold_choice(choice, rewriter) for choice in choices]
    return result


def _fold_choice(choice: Any, rewriter: Callable[[], DelimiterRewriter]) -> Any:
    """One choice of `fold_openai_completion`: as it is when its message holds no call."""
    if not isinstance(choice, Mapping) or not isinstance(message := choice.get("message"), Mapping):
        return choice
    texts_of = _texts(message)
    if texts_of is None:
        return choice
    content, reasoning_field, reasoning = texts_of
    finish = choice.get("finish_reason")
    whole = ChunkResponse(
        content=content or "",
        reasoning=reasoning,
        finish_reason=finish if isinstance(finish, str) else None,
        is_complete=True,
    )
    chunks = rewriter().feed(whole)
    texts, reasonings, calls = _gather(chunks)
    if not calls:
        return choice
    new_message = dict(message)
    new_message["content"] = texts or None
    if reasoning_field:
        new_message[reasoning_field] = reasonings or None
    existing = message.get("tool_calls")
    new_message["tool_calls"] = [*(existing if isinstance(existing, list) else ()), *calls]
    new_choice = dict(choice)
    new_choice["message"] = new_message
    if finish == "stop":
        new_choice["finish_reason"] = chunks[-1].finish_reason
    return new_choice


def _texts(message: Mapping[str, Any]) -> tuple[str | None, str | None, str | None] | None:
    """A message's ``content``, the name of its reasoning field and its reasoning; None when either is
    not a string (a list of parts is left as it is)."""
    content = message.get("content")
    reasoning_field = next((key for key in _REASONING_FIELDS if message.get(key)), None)
    reasoning = message[reasoning_field] if reasoning_field else None
    if not isinstance(content, str | None) or not isinstance(reasoning, str | None):
        return None
    return content, reasoning_field, reasoning


def _gather(chunks: list[ChunkResponse]) -> tuple[str, str, list[dict[str, Any]]]:
    """The text, the reasoning and the chat ``tool_calls`` entries of a rewriter's chunks."""
    texts: list[str] = []
    reasonings: list[str] = []
    calls: dict[int, tuple[ToolCallDelta, list[str]]] = {}
    for chunk in chunks:
        texts.append(chunk.content)
        if chunk.reasoning:
            reasonings.append(chunk.reasoning)
        for delta in chunk.tool_calls or ():
            call = calls.get(delta.index)
            if call is None:
                call = calls[delta.index] = (delta, [])
            if delta.arguments_delta:
                call[1].append(delta.arguments_delta)
    return "".join(texts), "".join(reasonings), [_entry(*call) for _, call in sorted(calls.items())]


def _entry(first: ToolCallDelta, pieces: list[str]) -> dict[str, Any]:
    """A chat ``tool_calls`` entry: a ``function`` call's JSON arguments, a ``custom`` call's text input."""
    if first.kind == "custom":
        return {
            "id": first.call_id,
            "type": "custom",
            "custom": {"name": first.name, "input": "".join(pieces)},
        }
    return {
        "id": first.call_id,
        "type": "function",
        "function": {"name": first.name, "arguments": "".join(pieces)},
    }

"""The data model: what flows between the stages.

Hot-path types are frozen ``msgspec.Struct``s: cheaper to build than frozen dataclasses or pydantic
models, with the same immutability and equality. pydantic is kept for the boundaries (tool schemas,
validation of untrusted input).

The flow::

    provider events ─▶ ChunkResponse (with ToolCallDelta) ─▶ SegmentEvent ─▶ ToolInvocation, ResponseEnd
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TypeAlias

import msgspec

__all__ = [
    "ArgumentDelta",
    "ArgumentError",
    "ArgumentErrorKind",
    "ArgumentEvent",
    "ArgumentValue",
    "ChunkResponse",
    "IdFactory",
    "JSONPath",
    "Payload",
    "PipelineEvent",
    "ResponseEnd",
    "SegmentEvent",
    "SegmentEventType",
    "SegmentType",
    "SplitChunk",
    "TextHead",
    "TextJoiner",
    "TokenUsage",
    "ToolApproval",
    "ToolApprovalRequest",
    "ToolCallDelta",
    "ToolCallError",
    "ToolCallErrorKind",
    "ToolCallKind",
    "ToolInvocation",
    "ToolOutput",
    "ToolOutputStatus",
    "ToolResult",
    "approval_id_of",
    "call_id_of_approval",
    "new_call_id",
]

IdFactory: TypeAlias = Callable[[int], str]
"""Makes the id of a tool call the provider sent without one, from the call's position (0, 1, ...)."""


def new_call_id(index: int) -> str:
    """The default `IdFactory`: ``call_`` + 24 hex characters of a uuid4 (``index`` is unused)."""
    del index
    return "call_" + uuid.uuid4().hex[:24]


JSONPath: TypeAlias = tuple[str | int, ...]
"""Keys and array indexes from the root of a tool call's arguments to a value; ``()`` is the root."""

ToolCallKind: TypeAlias = Literal["function", "custom", "server"]
"""``function``: JSON arguments, executed by the client. ``custom``: free-text input (OpenAI custom tools),
folded as ``{"input": text}``. ``server``: executed by the provider itself (Anthropic server tools, MCP)."""

ArgumentErrorKind: TypeAlias = Literal["invalid_json", "truncated", "too_large"]
"""Why the argument splitter stopped parsing a call: bad JSON, cut off, or past the size cap."""

ToolCallErrorKind: TypeAlias = Literal[
    "invalid_json",
    "truncated",
    "too_large",
    "interrupted",
    "not_an_object",
    "invalid_arguments",
    "missing_name",
]
"""Why a call could not be folded: the splitter's kinds, plus ``interrupted`` (the stream failed or ended
mid-call), ``not_an_object`` (valid JSON that is not an object), ``invalid_arguments`` (the tool's schema
rejected them) and ``missing_name`` (the call never got a function name)."""


class Payload(msgspec.Struct, frozen=True, gc=False):
    """One framed event as a framer yields it to a converter: its bytes and where they start in the stream.

    ``data`` is the JSON text of an SSE event's data field, of one JSON line, of one element of a JSON
    array, or the body of one AWS event-stream frame. Each converter decodes it into its provider's typed
    events itself, in one step (`operators.convert.EventDecoder`).
    """

    data: bytes
    offset: int
    """The byte offset of ``data`` in the stream, for errors that name where."""


class TokenUsage(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """Token counts of a response. A later usage in the stream replaces an earlier one."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int | None = None
    """Prompt tokens read from a cache (OpenAI ``cached_tokens``, Anthropic ``cache_read_input_tokens``)."""
    cache_creation_tokens: int | None = None
    """Prompt tokens written to a cache (Anthropic ``cache_creation_input_tokens``)."""
    reasoning_tokens: int | None = None
    """Completion tokens spent on reasoning, where the provider reports them."""

    def to_dict(self) -> dict[str, int]:
        """The wire form: the counts that are set."""
        return {key: value for key, value in msgspec.structs.asdict(self).items() if value is not None}


class ArgumentDelta(msgspec.Struct, frozen=True, gc=False):
    """Decoded text appended to the string value at ``path`` while it streams."""

    path: JSONPath
    delta: str


class ArgumentValue(msgspec.Struct, frozen=True, gc=False):
    """The value at ``path`` is complete. ``path == ()`` is the whole arguments value."""

    path: JSONPath
    value: Any


class ArgumentError(msgspec.Struct, frozen=True, gc=False):
    """The arguments text cannot be parsed (or is cut off, or too large); parsing of this call stops.

    ``kind`` is ``invalid_json``, ``truncated`` or ``too_large``; ``offset`` counts characters of the
    arguments text from its start.
    """

    kind: ArgumentErrorKind
    message: str
    offset: int


ArgumentEvent: TypeAlias = ArgumentDelta | ArgumentValue | ArgumentError


class ToolCallDelta(msgspec.Struct, frozen=True, gc=False):
    """A provider-agnostic piece of one tool call.

    ``index`` is the call's position in this response (0, 1, ...), whatever the provider numbered it;
    ``call_id`` and ``name`` arrive at least once per call (converters generate missing ids);
    ``arguments_delta`` is the next piece of the arguments text (JSON for ``function`` and ``server``
    calls, free text for ``custom``). ``finished`` says the provider declared the call complete: no more
    deltas follow for this index. What the arguments text streamed or completed comes from
    `operators.split_arguments`, on a `SplitChunk`.
    """

    index: int
    call_id: str | None = None
    name: str | None = None
    arguments_delta: str | None = None
    finished: bool = False
    kind: ToolCallKind = "function"
    signature: str | None = None
    """Opaque reasoning signature bound to this call (Gemini ``thoughtSignature``), for multi-turn use."""
    server_name: str | None = None
    """The MCP server that runs a provider-executed MCP call (Anthropic ``mcp_tool_use``), on the call's
    first delta: a next turn that replays the call names it."""


class ToolResult(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """The result of a call the provider executed itself (a server-side tool), as the provider sent it.

    Anthropic ``web_search_tool_result`` / ``code_execution_tool_result`` / ``mcp_tool_result`` blocks, the
    outputs of OpenAI Responses built-in tools, Gemini ``codeExecutionResult`` parts, Groq's executed tools.
    The segment emitter turns each into a ``tool_result`` segment.
    """

    call_id: str
    """The id of the provider-executed call this result answers."""
    name: str | None = None
    """The tool's name, where known."""
    content: Any = None
    """The result as JSON-compatible data, as the provider sent it (a block's ``content``, an output list)."""
    is_error: bool = False
    """The provider reported the tool as failed."""
    result_type: str | None = None
    """The provider's own word for the result (``web_search_tool_result``, ``code_execution_result``, ...)."""


class _NoURLs(list[str]):
    """The shared default of `ChunkResponse`'s ``*_urls`` fields: an empty list that cannot change.

    A plain ``[]`` default costs three new lists per chunk (msgspec copies a mutable default), nearly all
    of them empty; this one is shared. It is a ``list`` equal to ``[]`` that encodes as ``[]``; changing it
    raises `TypeError` (a chunk is frozen: pass a list of your own to carry URLs)."""

    __slots__ = ()

    def _frozen(self, *args: object, **kwargs: object) -> Any:
        raise TypeError("a chunk's default URL list is shared and cannot change; pass a list of your own")

    append = extend = insert = remove = pop = clear = sort = reverse = _frozen
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _frozen

    def __copy__(self) -> _NoURLs:
        return self

    def __deepcopy__(self, memo: object) -> _NoURLs:
        return self

    def __reduce__(self) -> str:
        return "_NO_URLS"


_NO_URLS: list[str] = _NoURLs()
"""The empty ``image_urls`` / ``audio_urls`` / ``video_urls`` of a chunk that carries none (shared)."""


class ChunkResponse(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One normalised piece of a streaming response.

    Fields left at their defaults carry nothing. ``is_complete`` marks the last chunk of a response.
    """

    content: str = ""
    reasoning: str | None = None
    is_complete: bool = False
    usage: TokenUsage | None = None
    image_urls: list[str] = _NO_URLS
    audio_urls: list[str] = _NO_URLS
    video_urls: list[str] = _NO_URLS
    """(The three URL lists default to `_NO_URLS`, one shared empty list that cannot change.)"""
    tool_calls: list[ToolCallDelta] | None = None
    finish_reason: str | None = None
    """Normalised to OpenAI's words: ``stop``, ``length``, ``tool_calls``, ``content_filter``, or the
    provider's own word where none of these fits. The provider's word is in ``metadata['stop_reason']``."""
    refusal: str | None = None
    """Text of a refusal (OpenAI ``delta.refusal``); it streams like content."""
    reasoning_signature: str | None = None
    """Signature of the reasoning so far (Anthropic ``signature_delta``, Gemini ``thoughtSignature``)."""
    encrypted_reasoning: str | None = None
    """Opaque reasoning to send back next turn (OpenAI ``encrypted_content``, Anthropic redacted thinking)."""
    content_signature: str | None = None
    """Signature bound to this chunk's text (Gemini ``thoughtSignature`` on an ordinary text part): kept in
    the text segment's END metadata as ``signature``, never as an empty reasoning segment."""
    reasoning_id: str | None = None
    """The provider's id of the reasoning block this chunk's reasoning belongs to (OpenAI Responses
    ``rs_...``). A different id than the open reasoning segment's starts a new reasoning segment."""
    reasoning_done: bool = False
    """The provider's reasoning block is complete (after this chunk's reasoning): the reasoning segment ends
    here, so that adjacent blocks stay apart, each with its own signature or encrypted content."""
    tool_results: list[ToolResult] | None = None
    """Results of provider-executed calls, each a ``tool_result`` segment."""
    citations: list[Mapping[str, Any]] | None = None
    """Citations of the text (Anthropic ``citations_delta``, Responses ``url_citation`` annotations, ...), as
    the provider sent them; they go into the text segment's END metadata with their offset in its text."""
    metadata: Mapping[str, Any] | None = None
    """Response-level facts as they become known: ``id``, ``model``, ``created``, ``system_fingerprint``,
    ``stop_reason``, ... A later mapping adds to (and overrides) an earlier one."""


class SplitChunk(msgspec.Struct, frozen=True, gc=False):
    """A chunk with tool calls after `operators.split_arguments`: what each call's arguments streamed.

    ``argument_events[i]`` holds the events of ``chunk.tool_calls[i]``: string deltas, complete values, the
    complete root value, or an error. Chunks without tool calls leave the splitter as they came.
    """

    chunk: ChunkResponse
    argument_events: tuple[tuple[ArgumentEvent, ...], ...]


_JOIN_EVERY: Final = 1024


class TextJoiner:
    """The pieces of one growing text, kept compact as they come.

    Every 1024 pieces are joined into one block stored as UTF-8, so that a long text fed in small pieces
    costs about its UTF-8 size while it grows, not an object per piece nor four bytes per character; the
    whole text is decoded once, by `text` or `take`, from one buffer. `TextHead` keeps only the start.
    """

    __slots__ = ("_blocks", "_joined", "_pieces")

    def __init__(self) -> None:
        self._blocks: list[bytes] = []
        self._pieces: list[str] = []
        self._joined = 0
        """Characters in the blocks."""

    def __bool__(self) -> bool:
        return bool(self._pieces) or bool(self._blocks)

    @property
    def length(self) -> int:
        """Characters appended since the start (or the last `take`)."""
        return self._joined + sum(map(len, self._pieces))

    def append(self, piece: str) -> None:
        """Add ``piece`` at the end of the text."""
        pieces = self._pieces
        pieces.append(piece)
        if len(pieces) >= _JOIN_EVERY:
            self._join()

    def text(self) -> str:
        """The text kept so far; it stays as one piece, so asking again costs no new join (and a
        `TextHead` goes on from where it was)."""
        whole = TextJoiner.take(self)
        if whole:
            self._pieces.append(whole)
        return whole

    def take(self) -> str:
        """The text kept so far, forgetting it: the joiner starts again empty."""
        blocks, pieces = self._blocks, self._pieces
        self._joined = 0
        if not blocks:
            whole = pieces[0] if len(pieces) == 1 else "".join(pieces)
            pieces.clear()
            return whole
        if pieces:
            self._join()
        data = b"".join(blocks)
        blocks.clear()  # the blocks go before the text is decoded: the peak is one copy of each
        return data.decode("utf-8", "surrogatepass")

    def _join(self) -> None:
        whole = "".join(self._pieces)
        self._pieces.clear()
        self._joined += len(whole)
        self._blocks.append(whole.encode("utf-8", "surrogatepass"))


class TextHead(TextJoiner):
    """The first ``limit`` characters of a growing text, kept as `TextJoiner` keeps them, and the length
    of all of it: what an error quotes of a text that may be long."""

    __slots__ = ("_limit", "_room", "_seen")

    def __init__(self, limit: int) -> None:
        super().__init__()
        self._limit = limit
        self._room = limit
        """Characters that may still be kept."""
        self._seen = 0

    @property
    def length(self) -> int:
        """Characters appended since the start (or the last `take`), those past the limit included."""
        return self._seen

    def append(self, piece: str) -> None:
        """Add ``piece`` at the end of the text, as much of it as the limit keeps."""
        size = len(piece)
        self._seen += size
        room = self._room
        if size > room:
            if not room:
                return
            piece, size = piece[:room], room
        self._room = room - size
        pieces = self._pieces
        pieces.append(piece)
        if len(pieces) >= _JOIN_EVERY:
            self._join()

    def take(self) -> str:
        """The text kept so far, forgetting it: the head starts again empty."""
        self._room, self._seen = self._limit, 0
        return super().take()


class SegmentType(enum.StrEnum):
    """What a segment holds: text, reasoning, a tool call, a file write or patch, or a tool's result."""

    TEXT = "text"
    REASONING = "reasoning"
    TOOL_CALL = "tool_call"
    WRITE_FILE = "write_file"
    PATCH_FILE = "patch_file"
    TOOL_RESULT = "tool_result"


class SegmentEventType(enum.StrEnum):
    """The four events of a segment's life, as the wire format spells them."""

    START = "SEGMENT_START"
    CONTENT = "SEGMENT_CONTENT"
    ARGUMENT = "SEGMENT_ARGUMENT"
    END = "SEGMENT_END"


class SegmentEvent(msgspec.Struct, frozen=True, gc=False):
    """One event of a segment's life: START, CONTENT, ARGUMENT, END.

    The payload is the wire format of DESIGN.md (see `to_dict`); the properties below read it typed,
    so that code need not index ``payload``:

    - START: `segment_type`, `tool_name`, `call_id` (tool segments).
    - CONTENT: `delta`.
    - ARGUMENT: `path` with `delta` (text appended to the string there) or, when `has_value`, `value`
      (the value there is complete).
    - END: `segment_type`, `tool_name`, `call_id`, `arguments`, `error`, `file_path` (file segments).

    One struct with accessor properties rather than a class per event type: the emitter builds one of
    these per delta, and properties cost nothing until read (no view object, no second allocation).
    """

    event_type: SegmentEventType
    segment_id: str
    segment_type: SegmentType | None = None
    """The segment's type, on START and END (set by the emitter); ``None`` on CONTENT and ARGUMENT.
    `to_dict` writes it for START only, as the wire format says."""
    payload: dict[str, Any] = {}

    @classmethod
    def start(
        cls, segment_id: str, segment_type: SegmentType, metadata: Mapping[str, Any] | None = None
    ) -> SegmentEvent:
        """A START event.

        Args:
            segment_id: the segment's id.
            segment_type: what the segment holds.
            metadata: tool name, call id...: goes in the payload when given.
        """
        payload = {"metadata": dict(metadata)} if metadata else {}
        return cls(SegmentEventType.START, segment_id, segment_type, payload)

    @classmethod
    def content(cls, segment_id: str, delta: str) -> SegmentEvent:
        """A CONTENT event.

        Args:
            segment_id: the segment's id.
            delta: text appended to the segment.
        """
        return cls(SegmentEventType.CONTENT, segment_id, None, {"delta": delta})

    @classmethod
    def argument_delta(cls, segment_id: str, path: JSONPath, delta: str) -> SegmentEvent:
        """An ARGUMENT event: text of a string argument.

        Args:
            segment_id: the tool call's segment id.
            path: where the argument is in the arguments (keys and indexes).
            delta: text appended to the string argument at ``path``.
        """
        return cls(SegmentEventType.ARGUMENT, segment_id, None, {"path": list(path), "delta": delta})

    @classmethod
    def argument_value(cls, segment_id: str, path: JSONPath, value: Any) -> SegmentEvent:
        """An ARGUMENT event: an argument is complete.

        Args:
            segment_id: the tool call's segment id.
            path: where the argument is in the arguments (keys and indexes).
            value: the argument's value.
        """
        return cls(SegmentEventType.ARGUMENT, segment_id, None, {"path": list(path), "value": value})

    @classmethod
    def end(
        cls,
        segment_id: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        segment_type: SegmentType | None = None,
    ) -> SegmentEvent:
        """An END event.

        Args:
            segment_id: the segment's id.
            metadata: arguments, error...: goes in the payload when given.
            segment_type: what the segment held.
        """
        payload = {"metadata": dict(metadata)} if metadata else {}
        return cls(SegmentEventType.END, segment_id, segment_type, payload)

    @property
    def metadata(self) -> dict[str, Any]:
        """START's or END's ``payload['metadata']`` (``{}`` when there is none)."""
        metadata: dict[str, Any] = self.payload.get("metadata", {})
        return metadata

    @property
    def delta(self) -> str | None:
        """CONTENT's text, or an ARGUMENT's decoded text appended to the string at `path`."""
        delta: str | None = self.payload.get("delta")
        return delta

    @property
    def path(self) -> JSONPath | None:
        """An ARGUMENT's place in the arguments: keys and indexes from the root."""
        path: list[str | int] | None = self.payload.get("path")
        return None if path is None else tuple(path)

    @property
    def has_value(self) -> bool:
        """This is an ARGUMENT whose `value` is complete (the value itself may be ``None``)."""
        return "value" in self.payload

    @property
    def value(self) -> Any:
        """An ARGUMENT's complete value at `path` (``None`` when `has_value` is false)."""
        return self.payload.get("value")

    @property
    def tool_name(self) -> str | None:
        """A tool segment's tool name (START and END)."""
        name: str | None = self.metadata.get("tool_name")
        return name

    @property
    def call_id(self) -> str | None:
        """A tool segment's call id (START and END)."""
        call_id: str | None = self.metadata.get("call_id")
        return call_id

    @property
    def arguments(self) -> dict[str, Any] | None:
        """A tool call's parsed arguments, on its END (what was complete, when `error` is set)."""
        arguments: dict[str, Any] | None = self.metadata.get("arguments")
        return arguments

    @property
    def error(self) -> ToolCallError | None:
        """Why a tool call's arguments could not be folded, on its END."""
        fields: dict[str, Any] | None = self.metadata.get("error")
        if fields is None:
            return None
        return ToolCallError(fields["kind"], fields["message"], fields.get("raw", ""), fields.get("offset"))

    @property
    def file_path(self) -> str | None:
        """A file segment's path, on its END (while it streams: the ARGUMENT at the file tool's path key)."""
        path: str | None = self.metadata.get("path")
        return path

    def to_dict(self) -> dict[str, Any]:
        """The wire form: a JSON-ready dict, as DESIGN.md specifies it."""
        result: dict[str, Any] = {"type": self.event_type.value, "segment_id": self.segment_id}
        if self.event_type is SegmentEventType.START:
            result["segment_type"] = self.segment_type.value if self.segment_type else None
        result["payload"] = self.payload
        return result


class ToolCallError(msgspec.Struct, frozen=True, gc=False):
    """Why a call's arguments could not be folded. ``raw`` is the arguments text as received."""

    kind: ToolCallErrorKind
    message: str
    raw: str = ""
    offset: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The wire form: a JSON-ready dict, as DESIGN.md specifies it."""
        result: dict[str, Any] = {"kind": self.kind, "message": self.message, "raw": self.raw}
        if self.offset is not None:
            result["offset"] = self.offset
        return result


class ToolInvocation(msgspec.Struct, frozen=True, gc=False):
    """A finished tool call, ready to execute: exactly one per call, ``id`` = segment id = provider id.

    When the arguments could not be parsed, ``arguments`` holds what was complete and ``error`` says why;
    never a silent ``{}``.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    error: ToolCallError | None = None
    provider_executed: bool = False
    """The provider ran this tool itself (Anthropic server tools, MCP); the client must not."""
    signature: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """The wire form: a JSON-ready dict, as DESIGN.md specifies it."""
        result: dict[str, Any] = {
            "type": "TOOL_INVOCATION",
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "error": self.error.to_dict() if self.error else None,
        }
        if self.provider_executed:
            result["provider_executed"] = True
        return result


class ResponseEnd(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """The last item of a response's event stream: how it ended and what it cost."""

    finish_reason: str | None = None
    """Why the provider ended the response (``stop``, ``tool_calls``, ``length``, ...); ``None``: no finish
    reason came, the stream was cut before its finish (``streamfold replay`` fails with
    ``TruncatedStreamError``)."""
    usage: TokenUsage | None = None
    metadata: Mapping[str, Any] = {}

    def to_dict(self) -> dict[str, Any]:
        """The wire form: a JSON-ready dict, as DESIGN.md specifies it."""
        return {
            "type": "RESPONSE_END",
            "finish_reason": self.finish_reason,
            "usage": self.usage.to_dict() if self.usage else None,
            "metadata": dict(self.metadata),
        }


PipelineEvent: TypeAlias = SegmentEvent | ToolInvocation | ResponseEnd
"""What the full pipeline yields: segment events, each invocation right after its segment's END, and one
`ResponseEnd` last."""


ToolOutputStatus: TypeAlias = Literal[
    "ok", "error", "timeout", "invalid_arguments", "unknown_tool", "not_run", "cancelled", "denied"
]
"""How a client-side tool call ended (see `ToolOutput`)."""


class ToolOutput(msgspec.Struct, frozen=True, kw_only=True):
    """The result of running a client-side tool for a `ToolInvocation` (the tool runner of
    ``pipeline.agent`` puts one in the stream per invocation). Not `ToolResult`, which is what the
    provider sent for a call it executed itself.

    ``output`` is what goes back to the model: the tool's return value when ``status`` is ``ok``, else a
    message saying what failed and where. ``status``: ``ok``; ``error`` (the tool raised, or returned what
    cannot be sent as JSON); ``timeout``; ``invalid_arguments`` (malformed or failing validation; not
    run); ``unknown_tool``; ``not_run`` (cut off, interrupted, the response failed before its turn, or a
    tool held until the finish and the response did not end ``stop`` / ``tool_calls``); ``cancelled``
    (stopped while running, because the response failed under ``on_failure="cancel"``); ``denied`` (a
    tool that needs approval: a person refused it, or no decision came in time; not run).
    """

    call_id: str
    """The invocation's id (the provider's call id)."""
    output: Any = None
    name: str = ""
    status: ToolOutputStatus = "ok"

    @property
    def is_error(self) -> bool:
        return self.status != "ok"

    @property
    def text(self) -> str:
        """``output`` as text for the next turn: a string as it is, other values as compact JSON (a lone
        surrogate written ``\\uXXXX``, as the event log and the wire encoders write it)."""
        if isinstance(self.output, str):
            return self.output
        from pipeline._jsonenc import encode_json  # here: importing the models loads nothing else

        try:
            return encode_json(self.output).decode()
        except (TypeError, msgspec.EncodeError):
            return str(self.output)

    def to_dict(self) -> dict[str, Any]:
        """The wire form: a JSON-ready dict, as DESIGN.md specifies it."""
        return {
            "type": "TOOL_OUTPUT",
            "call_id": self.call_id,
            "name": self.name,
            "status": self.status,
            "output": self.output,
        }


class ToolApprovalRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A call of a tool gated on approval (``start="approval"``) asks a person: the tool runner puts one
    in the stream right after the call's `ToolInvocation`. The UI encoders send it as the Vercel
    AI SDK's ``tool-approval-request`` chunk and as an AG-UI interrupt.

    ``expires_at``: when an undecided request is denied, in seconds since the epoch; None when no one
    waits for it within the run (the decision comes with the next request).
    """

    call_id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    expires_at: float | None = None

    @property
    def approval_id(self) -> str:
        """The request's name on the wire: ``approval_`` + the call id (`approval_id_of`)."""
        return approval_id_of(self.call_id)

    def to_dict(self) -> dict[str, Any]:
        """The wire form: a JSON-ready dict, as DESIGN.md specifies it."""
        return {
            "type": "TOOL_APPROVAL_REQUEST",
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
            "approval_id": self.approval_id,
            "expires_at": self.expires_at,
        }


class ToolApproval(msgspec.Struct, frozen=True, kw_only=True):
    """A person's decision on a `ToolApprovalRequest`, with the call it decides (what a UI sends
    back: the call's id, tool name and arguments, ``approved``, and an optional ``reason``)."""

    call_id: str
    approved: bool
    name: str = ""
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    reason: str | None = None


_APPROVAL_ID_PREFIX = "approval_"


def approval_id_of(call_id: str) -> str:
    """The approval id of a call's request: ``approval_`` + the call id."""
    return _APPROVAL_ID_PREFIX + call_id


def call_id_of_approval(approval_id: str) -> str | None:
    """The call id an approval id names, or None for an id not made by `approval_id_of`."""
    if not approval_id.startswith(_APPROVAL_ID_PREFIX) or len(approval_id) == len(_APPROVAL_ID_PREFIX):
        return None
    return approval_id[len(_APPROVAL_ID_PREFIX) :]

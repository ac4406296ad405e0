"""The delimiter-token rewriter's core: :class:`DelimiterRewriter` runs one lexer per channel and packs what
they report into :class:`~pipeline.models.ChunkResponse`\\ s, in order."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias

import msgspec

from operators.delimiters._guard import UnknownCallGuard
from operators.delimiters._lexer import (
    DEFAULT_MAX_BUFFERED_CHARS,
    Channel,
    FastPath,
    FormatLexer,
    LexerOptions,
)
from operators.delimiters._registry import get_format
from operators.delimiters._scan import escape_json_text
from pipeline.errors import ConfigurationError
from pipeline.models import ChunkResponse, IdFactory, ToolCallDelta, ToolCallKind, new_call_id

__all__ = ["DelimiterRewriter"]


class _Piece(msgspec.Struct, gc=False):
    """A tool-call delta being assembled while one chunk is lexed (mutable; a struct is cheap to build)."""

    index: int
    call_id: str | None
    name: str | None
    kind: ToolCallKind
    args: list[str]
    finished: bool = False

    def delta(self) -> ToolCallDelta:
        args = self.args
        text = (args[0] if len(args) == 1 else "".join(args)) if args else None
        return ToolCallDelta(self.index, self.call_id, self.name, text, self.finished, self.kind)


_Op: TypeAlias = tuple[str, Any]
_replace: Final = msgspec.structs.replace
_RANK: Final = {"reasoning": 0, "content": 1, "tool": 2}


class _Output:
    """Collects, in order, what the lexers emit for one incoming chunk; allocates call positions."""

    __slots__ = (
        "calls_started",
        "id_factory",
        "kinds",
        "next_index",
        "offered",
        "ops",
        "unknown_calls",
        "unknown_ended",
        "unknown_started",
    )

    def __init__(self, id_factory: IdFactory) -> None:
        self.id_factory = id_factory
        self.ops: list[_Op] = []
        self.next_index = 0
        self.calls_started = 0
        self.kinds: dict[int, ToolCallKind] = {}
        """The kind of each call that is not a ``function`` call, repeated on every delta of the call."""
        self.offered: frozenset[str] | None = None
        """The tools calls may name (None: any); a call to another one is kept out of the output."""
        self.unknown_calls = 0
        self.unknown_started = False
        """A call to a tool not offered started (the guard reads and clears it)."""
        self.unknown_ended = False
        """A call to a tool not offered ended (the guard reads and clears it)."""

    def text(self, channel: Channel, text: str) -> None:
        ops = self.ops
        if ops and ops[-1][0] == channel:
            ops[-1][1].append(text)
        else:
            ops.append((channel, [text]))

    def start_call(self, name: str, call_id: str | None, kind: ToolCallKind = "function") -> int:
        offered = self.offered
        if offered is not None and name not in offered:
            # Not numbered and never written: a negative index its lexer reports to, ignored below.
            self.unknown_started = True
            self.unknown_calls += 1
            return -self.unknown_calls
        index = self.next_index
        self.next_index += 1
        self.calls_started += 1
        if call_id is None:
            call_id = self.id_factory(index)
        if kind != "function":
            self.kinds[index] = kind
        self.ops.append(("tool", _Piece(index, call_id, name, kind, [])))
        return index

    def _piece(self, index: int) -> _Piece:
        """The piece of call ``index`` that this chunk is writing: the last op if it is that call's."""
        ops = self.ops
        if ops:
            kind, piece = ops[-1]
            if kind == "tool" and piece.index == index and not piece.finished:
                assert isinstance(piece, _Piece)
                return piece
        piece = _Piece(index, None, None, self.kinds.get(index, "function"), [])
        ops.append(("tool", piece))
        return piece

    def args(self, index: int, text: str) -> None:
        if index >= 0:
            self._piece(index).args.append(text)

    def end_call(self, index: int) -> None:
        if index < 0:
            self.unknown_ended = True
        else:
            self._piece(index).finished = True


class DelimiterRewriter:
    """Sans-IO core: :class:`ChunkResponse` in, chunks with delimiter tool calls moved to ``tool_calls``.

    ``content`` and ``reasoning`` are lexed by two independent lexers of ``format``. Text keeps its channel
    and order; a chunk whose text produced several runs (text, then a call, then text) becomes several
    chunks, each ordered reasoning, content, tool calls. The incoming chunk's other fields (usage,
    ``finish_reason``, metadata, ``is_complete``, tool calls already structured by the server) go on the
    last chunk it produces; a chunk whose text is all held back and that carries nothing else gives ``[]``.

    Call positions count on after the server's own tool calls; those are renumbered only if a delimiter
    call took their position. When delimiter calls were made, a ``finish_reason`` of ``stop`` becomes
    ``tool_calls`` (``metadata["stop_reason"]`` keeps ``stop`` unless already set). A chunk with
    ``is_complete`` ends the response: held text is released and open calls are ended before it.

    ``tool_schemas`` (tool name -> JSON schema of its parameters) types XML-style values;
    ``max_buffered_chars`` caps what one call holds back: a non-string XML-style value is held until its
    end tag to be typed; past the cap the held text is released raw and the rest of the value streams
    raw, so the call goes on and nothing is lost, and a value that is not valid JSON leaves the call
    with arguments text that the argument splitter reports (``invalid_json`` at the offset). JSON
    arguments are never held (they stream as they arrive); headers (ids, names, tags) are capped at
    :data:`~._scan.HEADER_LIMIT`.

    ``offered_tools`` (the names of the tools the request offers; ``None``, the default: any name) gives a
    call to any other tool back as the text the model wrote for it, markers and all, where the call was
    (see :mod:`~._guard` for the cases where it is dropped instead); it is not numbered, so the offered
    calls keep positions 0, 1, ... and a ``finish_reason`` of ``stop`` stays ``stop`` without them.
    """

    __slots__ = (
        "_api_positions",
        "_content",
        "_content_fast",
        "_guards",
        "_lexer_type",
        "_options",
        "_output",
        "_reasoning",
        "_reasoning_fast",
        "_watching",
    )

    def __init__(
        self,
        format: str | type[FormatLexer],
        *,
        id_factory: IdFactory | None = None,
        tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
        max_buffered_chars: int = DEFAULT_MAX_BUFFERED_CHARS,
        offered_tools: Collection[str] | None = None,
    ) -> None:
        if max_buffered_chars < 1:
            raise ConfigurationError(f"max_buffered_chars must be positive, not {max_buffered_chars}")
        if isinstance(offered_tools, str):
            raise ConfigurationError("offered_tools must be a collection of tool names, not one string")
        self._lexer_type = get_format(format) if isinstance(format, str) else format
        self._options = LexerOptions(dict(tool_schemas or {}), max_buffered_chars)
        self._output = _Output(id_factory or new_call_id)
        self._output.offered = None if offered_tools is None else frozenset(offered_tools)
        self._guards: tuple[UnknownCallGuard, UnknownCallGuard] | None = None
        """The content and reasoning lexers' guards, when ``offered_tools`` is given."""
        self._watching = False
        """A guard follows markup (not plain text, an offered call or markup with text of its own): the
        next chunk goes to :meth:`_guarded_feed`. Set after each lexing, where the guards' modes change."""
        self._content: FormatLexer
        self._reasoning: FormatLexer
        self._api_positions: dict[int, int]
        self._content_fast: FastPath | None
        self._reasoning_fast: FastPath | None
        """What the next chunk of each channel does when it holds none of a few characters
        (:meth:`FormatLexer.fast_path`), kept until that channel's lexer runs again."""
        self._reset()

    def _reset(self) -> None:
        output = self._output
        output.next_index = 0
        output.calls_started = 0
        output.kinds.clear()
        self._content = self._lexer_type(output, "content", self._options)
        self._reasoning = self._lexer_type(output, "reasoning", self._options)
        self._api_positions = {}
        self._content_fast = self._content.fast_path()
        self._reasoning_fast = self._reasoning.fast_path()
        self._watching = False
        if output.offered is not None:
            output.unknown_calls = 0
            output.unknown_started = output.unknown_ended = False
            self._guards = (
                UnknownCallGuard(self._content, output),
                UnknownCallGuard(self._reasoning, output),
            )

    def feed(self, item: ChunkResponse) -> list[ChunkResponse]:
        """Rewrite one chunk; see the class doc."""
        if self._watching:
            return self._guarded_feed(item)
        # The fast path: text in one channel that holds none of the characters that could change what the
        # lexer does with it (FormatLexer.fast_path, kept until the lexer runs again).
        reasoning = item.reasoning
        if reasoning is None:
            text = item.content
            fast = self._content_fast
        elif not item.content:
            text = reasoning
            fast = self._reasoning_fast
        else:
            return self._lex(item, _more_than_text(item))
        if fast is None or not text:
            return self._shortcut(item, text, _more_than_text(item))
        json_args = fast.json_args
        taken = True  # the rule takes the chunk, if it carries nothing else
        if json_args is None:  # (the rule for JSON arguments has no stops)
            if fast.common in text:  # (a chunk without it holds no stop)
                for stop in fast.stops:
                    if stop in text:
                        taken = False
                        break
            if taken:
                if text[-1] in fast.tail:
                    taken = False  # perhaps the start of a marker
                elif fast.passes and reasoning is None:
                    if item.tool_calls is None and not item.is_complete and item.finish_reason is None:
                        return [item]  # content that goes on as it is: only those fields would change it
                    return self._lex(item, _more_than_text(item))
        if item.is_complete or item.tool_calls or item.finish_reason:
            return self._lex(item, True)  # (what changes the chunks, not only their text)
        # A piece of a call's arguments goes out as its delta on a copy of the chunk that keeps what else
        # it carries (the states would too); anything else the rule does with a chunk of text alone.
        if not taken:
            if _carries_more(item):
                return self._lex(item, True)
            if fast.stopped_by_states:
                return self._complete(item, text, fast)
            piece = fast.piece
            if piece is None:
                return self._shortcut(item, text, False)
            shortcut = piece(text)  # (the rule stays the rule)
            if shortcut is None:
                return self._pack(item, False) if self._output.ops else []
            if shortcut is False:
                return self._complete(item, text, fast)
            assert shortcut is not True  # (a value's piece is never text)
            return [ChunkResponse(tool_calls=[shortcut])]
        index = fast.index
        if index is None:
            if _carries_more(item):
                return self._lex(item, True)
            collect = fast.collect
            if collect is None:
                route = fast.route  # text of the other channel (a harmony analysis message in content)
                if route is None:
                    return [item]
                return [
                    ChunkResponse(reasoning=text) if route == "reasoning" else ChunkResponse(content=text)
                ]
            collected = collect(text)
            if collected:
                return []
            if collected is None:  # (the held start of a marker became one)
                return self._complete(item, text, fast)
            return self._shortcut(item, text, False)
        if json_args is not None:
            if not json_args.in_string or '"' in text:
                if _carries_more(item):
                    return self._lex(item, True)
                markers = fast.markers
                if markers is None or not markers.cannot_start_in(text):
                    return self._shortcut(item, text, False)
                text = json_args.take(text, markers)  # no end marker can start in it
                if not text:
                    return []
                return [ChunkResponse(tool_calls=[ToolCallDelta(index, None, None, text, False, fast.kind)])]
            # A piece of a string (JsonArgs.take_in_string):
            if json_args.escape or "\\" in text:
                if text[-1] != "\\":
                    json_args.escape = False  # whatever came before, nothing is left to escape
                else:
                    run = len(text) - len(text.rstrip("\\"))
                    json_args.escape = (run + json_args.escape if run == len(text) else run) % 2 == 1
        else:
            xml_args = fast.xml_args
            assert xml_args is not None
            # A piece of a string value, unless it ends with whitespace the value may strip (which a rule
            # with a newline in its tail has ruled out, unless the value strips all whitespace).
            if not xml_args.streaming or (
                not fast.ends_plain and (text[-1] == "\n" or (xml_args.strips_space and text[-1].isspace()))
            ):
                if _carries_more(item):
                    return self._lex(item, True)
                xml_args.value(text)  # held until the value ends, or written by the value's writer
                return self._pack(item, False) if self._output.ops else []
            if not text.isprintable() or '"' in text or "\\" in text:  # (json_escape's test, inline)
                text = escape_json_text(text)
        delta = ToolCallDelta(index, None, None, text, False, fast.kind)
        if reasoning is None:
            return [_replace(item, content="", tool_calls=[delta])]
        return [_replace(item, reasoning=None, tool_calls=[delta])]

    def _complete(self, item: ChunkResponse, text: str, fast: FastPath) -> list[ChunkResponse]:
        """:meth:`feed` when the channel's rule leaves ``text``, all of ``item``, to the states: the
        format's own way past the marker (``fast.complete``), else a run of the states."""
        complete = fast.complete
        if complete is None or not complete(text):
            return self._lex(item, False)
        return self._taken(item, text, None)

    def _shortcut(self, item: ChunkResponse, text: str, more: bool) -> list[ChunkResponse]:
        """:meth:`feed` when the channel's rule does not take ``text``: the lexer's shortcut, else a run
        of its states (``more``: ``item`` carries more than its text)."""
        if more:
            return self._lex(item, True)
        # Text in one channel and nothing else: the common cases need no lexing. (With guards, only in
        # plain text or an offered call: the shortcut never starts or ends a call.)
        shortcut = (self._content if item.reasoning is None else self._reasoning).shortcut(text)
        if shortcut is False:
            return self._lex(item, False)
        return self._taken(item, text, shortcut)

    def _taken(
        self, item: ChunkResponse, text: str, shortcut: ToolCallDelta | Literal[True] | None
    ) -> list[ChunkResponse]:
        """The chunks of ``item``, whose ``text`` its channel's lexer took without running its states
        (``shortcut``: see :meth:`FormatLexer.shortcut`); the channel's rule made again."""
        if item.reasoning is None:
            self._content_fast = self._content.fast_path()
        else:
            self._reasoning_fast = self._reasoning.fast_path()
        if shortcut is True:
            return [item] if text else []  # the chunk goes on as it is
        if shortcut is None:
            return self._pack(item, False) if self._output.ops else []
        return [ChunkResponse(tool_calls=[shortcut])]

    def _guarded_feed(self, item: ChunkResponse) -> list[ChunkResponse]:
        """:meth:`feed` while a guard follows markup: lexed, except the next piece of a marker or header
        that the lexer's rule holds or takes as it is (the guard keeps what it takes as raw text; held
        text is kept when a state takes it)."""
        guards = self._guards
        assert guards is not None
        more = _more_than_text(item)
        if not more and item.reasoning is None and item.content:
            guard, fast, text = guards[0], self._content_fast, item.content
        elif not more and not item.content and item.reasoning:
            guard, fast, text = guards[1], self._reasoning_fast, item.reasoning
        else:
            return self._lex(item, more)
        if (
            fast is not None
            and guard.probing
            and fast.collect is not None
            and fast.index is None
            and not any(stop in text for stop in fast.stops)
            and text[-1] not in fast.tail
            and fast.collect(text)
        ):
            if not fast.holds:
                guard.took(text)
                self._watching = not (guards[0].lexes_as_usual and guards[1].lexes_as_usual)
            return []
        return self._lex(item, more)

    def _lex(self, item: ChunkResponse, more: bool) -> list[ChunkResponse]:
        """Rewrite ``item`` through the lexers' states (``more``: it has more than text)."""
        reasoning = item.reasoning
        content = item.content
        guards = self._guards
        if guards is not None:
            if reasoning:
                guards[1].feed(reasoning)
            if content:
                guards[0].feed(content)
            if item.is_complete:
                guards[1].finish()
                guards[0].finish()
            self._watching = not (guards[0].lexes_as_usual and guards[1].lexes_as_usual)
        else:
            if reasoning:
                self._reasoning.feed(reasoning)
            if content:
                self._content.feed(content)
            if item.is_complete:
                self._reasoning.finish()
                self._content.finish()
        chunks = self._pack(item, more)
        if item.is_complete:
            self._reset()
        else:  # (a lexer that did not run keeps its rule)
            if reasoning:
                self._reasoning_fast = self._reasoning.fast_path()
            if content:
                self._content_fast = self._content.fast_path()
        return chunks

    def finish(self) -> list[ChunkResponse]:
        """The input ended: release held text and end open calls (cut off ones without ``finished``)."""
        guards = self._guards
        if guards is not None:
            guards[1].finish()
            guards[0].finish()
        else:
            self._reasoning.finish()
            self._content.finish()
        chunks = self._pack(None, False)
        self._reset()
        return chunks

    def _pack(self, item: ChunkResponse | None, carries: bool) -> list[ChunkResponse]:
        """The chunks of what the lexers emitted for ``item`` (``carries``: it has more than text)."""
        ops = self._output.ops
        if item is not None and not ops:  # all of it held back or dropped
            return [self._finalise(item, carries, "", None, [])] if carries else []
        if item is not None and len(ops) == 1:
            # The common cases: one run of text, or one piece of one call.
            kind, payload = ops[0]
            ops.clear()
            if kind == "tool":
                if not carries:
                    return [ChunkResponse(tool_calls=[payload.delta()])]
                return [self._finalise(item, carries, "", None, [payload.delta()])]
            text = payload[0] if len(payload) == 1 else "".join(payload)
            if kind == "content":
                return [
                    self._finalise(item, carries, item.content if text == item.content else text, None, [])
                ]
            return [self._finalise(item, carries, "", item.reasoning if text == item.reasoning else text, [])]
        chunks: list[ChunkResponse] = []
        reasoning: list[str] = []
        content: list[str] = []
        calls: list[ToolCallDelta] = []
        rank = -1
        for kind, payload in ops:
            op_rank = _RANK[kind]
            if op_rank < rank:
                chunks.append(_chunk(content, reasoning, calls))
                reasoning, content, calls = [], [], []
            rank = op_rank
            if kind == "tool":
                calls.append(payload.delta())
            elif kind == "content":
                content.extend(payload)
            else:
                reasoning.extend(payload)
        ops.clear()
        if item is None:
            if rank >= 0:
                chunks.append(_chunk(content, reasoning, calls))
            return chunks
        if rank < 0 and not carries:
            return chunks
        chunks.append(
            self._finalise(item, carries, "".join(content), "".join(reasoning) if reasoning else None, calls)
        )
        return chunks

    def _finalise(
        self,
        item: ChunkResponse,
        carries: bool,
        content: str,
        reasoning: str | None,
        calls: list[ToolCallDelta],
    ) -> ChunkResponse:
        """``item`` with the rewritten text and calls, its server calls renumbered, its finish reason."""
        if not carries:
            if content is item.content and reasoning is item.reasoning and not calls:
                return item
            return ChunkResponse(content=content, reasoning=reasoning, tool_calls=calls or None)
        if item.tool_calls:
            calls.extend(self._renumber(item.tool_calls))
        changes: dict[str, Any] = {}
        if content is not item.content:
            changes["content"] = content
        if reasoning is not item.reasoning:
            changes["reasoning"] = reasoning
        new_calls = calls or None
        if new_calls != item.tool_calls:
            changes["tool_calls"] = new_calls
        if item.finish_reason == "stop" and self._output.calls_started:
            changes["finish_reason"] = "tool_calls"
            metadata = item.metadata or {}
            if "stop_reason" not in metadata:
                changes["metadata"] = {**metadata, "stop_reason": "stop"}
        return msgspec.structs.replace(item, **changes) if changes else item

    def _renumber(self, deltas: Iterable[ToolCallDelta]) -> list[ToolCallDelta]:
        output = self._output
        positions = self._api_positions
        renumbered = []
        for delta in deltas:
            position = positions.get(delta.index)
            if position is None:
                position = positions[delta.index] = output.next_index
                output.next_index += 1
            renumbered.append(
                delta if position == delta.index else msgspec.structs.replace(delta, index=position)
            )
        return renumbered


def _more_than_text(item: ChunkResponse) -> bool:
    """Whether ``item`` carries more than its ``content`` and ``reasoning``."""
    return bool(item.is_complete or item.tool_calls or item.finish_reason or _carries_more(item))


def _carries_more(item: ChunkResponse) -> bool:
    """Whether ``item`` carries more than its text besides ``is_complete``, ``tool_calls`` and
    ``finish_reason`` (fields that the rewriter passes on unchanged)."""
    return bool(
        item.usage
        or item.metadata
        or item.refusal
        or item.reasoning_signature
        or item.encrypted_reasoning
        or item.reasoning_id
        or item.content_signature
        or item.reasoning_done
        or item.tool_results
        or item.citations
        or item.image_urls
        or item.audio_urls
        or item.video_urls
    )


def _chunk(content: list[str], reasoning: list[str], calls: list[ToolCallDelta]) -> ChunkResponse:
    return ChunkResponse(
        content="".join(content),
        reasoning="".join(reasoning) if reasoning else None,
        tool_calls=calls or None,
    )

"""The delimiter-token rewriter's core: `DelimiterRewriter` runs one lexer per channel and packs what
they report into `ChunkResponse`s, in order."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final, TypeAlias

import msgspec

from operators.delimiters._guard import UnknownCallGuard
from operators.delimiters._lexer import (
    DEFAULT_MAX_BUFFERED_CHARS,
    Channel,
    FormatLexer,
    LexerOptions,
)
from operators.delimiters._registry import get_format
from operators.delimiters._rules import more_than_text
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
_RANK: Final = {"reasoning": 0, "content": 1, "tool": 2}


class _Output:
    """Collects, in order, what the lexers emit for one incoming chunk; allocates call positions and packs
    what was collected into chunks."""

    __slots__ = (
        "api_positions",
        "calls_ended",
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
        self.calls_ended = 0
        """Calls whose end marker came (a call cut off never ends)."""
        self.kinds: dict[int, ToolCallKind] = {}
        """The kind of each call that is not a ``function`` call, repeated on every delta of the call."""
        self.api_positions: dict[int, int] = {}
        """The position of each of the server's own tool calls, by the index the server gave it."""
        self.offered: frozenset[str] | None = None
        """The tools calls may name (None: any); a call to another one is kept out of the output."""
        self.unknown_calls = 0
        self.unknown_started = False
        """A call to a tool not offered started (the guard reads and clears it)."""
        self.unknown_ended = False
        """A call to a tool not offered ended (the guard reads and clears it)."""

    def reset(self) -> None:
        """A new response: positions count from 0 again."""
        self.next_index = 0
        self.calls_started = self.calls_ended = 0
        self.kinds.clear()
        self.api_positions = {}
        self.unknown_calls = 0
        self.unknown_started = self.unknown_ended = False

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
        if index < 0:
            return
        ops = self.ops
        if ops:  # (`_piece` written out: every tag a rule completes writes arguments)
            kind, piece = ops[-1]
            if kind == "tool" and piece.index == index and not piece.finished:
                piece.args.append(text)
                return
        ops.append(("tool", _Piece(index, None, None, self.kinds.get(index, "function"), [text])))

    def end_call(self, index: int) -> None:
        if index < 0:
            self.unknown_ended = True
        else:
            self._piece(index).finished = True
            self.calls_ended += 1

    def chunks(self, item: ChunkResponse) -> list[ChunkResponse]:
        """What the lexers emitted for ``item``, which carries nothing but its text, as chunks."""
        ops = self.ops
        if not ops:
            return []
        if len(ops) == 1:  # (one run of text, or one piece of one call: most tags a rule completes)
            if ops[0][0] == "tool":
                return [ChunkResponse(tool_calls=[ops.pop()[1].delta()])]
            return [self._one(item, False)]
        return self._runs(item, False)

    def pack(self, item: ChunkResponse | None, carries: bool) -> list[ChunkResponse]:
        """The chunks of what the lexers emitted for ``item`` (``carries``: it has more than text;
        ``item`` None: the input ended)."""
        ops = self.ops
        if item is None:
            return self._runs(None, False)
        if not ops:  # all of it held back or dropped
            return [self.finalise(item, carries, "", None, [])] if carries else []
        if len(ops) == 1:
            return [self._one(item, carries)]
        return self._runs(item, carries)

    def _one(self, item: ChunkResponse, carries: bool) -> ChunkResponse:
        """The chunk of ``item`` when the lexers emitted one run of text or one piece of one call."""
        kind, payload = self.ops.pop()
        if kind == "tool":
            if not carries:
                return ChunkResponse(tool_calls=[payload.delta()])
            return self.finalise(item, carries, "", None, [payload.delta()])
        text = payload[0] if len(payload) == 1 else "".join(payload)
        if kind == "content":
            return self.finalise(item, carries, item.content if text == item.content else text, None, [])
        return self.finalise(item, carries, "", item.reasoning if text == item.reasoning else text, [])

    def _runs(self, item: ChunkResponse | None, carries: bool) -> list[ChunkResponse]:
        """The chunks of several runs: a new chunk wherever a run ranks before the one it follows
        (each chunk is ordered reasoning, content, tool calls); ``item``'s fields go on the last."""
        chunks: list[ChunkResponse] = []
        reasoning: list[str] = []
        content: list[str] = []
        calls: list[ToolCallDelta] = []
        rank = -1
        for kind, payload in self.ops:
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
        self.ops.clear()
        if item is None:
            if rank >= 0:
                chunks.append(_chunk(content, reasoning, calls))
        elif rank >= 0 or carries:
            joined = "".join(reasoning) if reasoning else None
            chunks.append(self.finalise(item, carries, "".join(content), joined, calls))
        return chunks

    def finalise(
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
            calls.extend(self.renumber(item.tool_calls))
        changes: dict[str, Any] = {}
        if content is not item.content:
            changes["content"] = content
        if reasoning is not item.reasoning:
            changes["reasoning"] = reasoning
        new_calls = calls or None
        if new_calls != item.tool_calls:
            changes["tool_calls"] = new_calls
        if item.finish_reason == "stop" and self.calls_ended == self.calls_started > 0:
            changes["finish_reason"] = "tool_calls"
            metadata = item.metadata or {}
            if "stop_reason" not in metadata:
                changes["metadata"] = {**metadata, "stop_reason": "stop"}
        return msgspec.structs.replace(item, **changes) if changes else item

    def renumber(self, deltas: Iterable[ToolCallDelta]) -> list[ToolCallDelta]:
        positions = self.api_positions
        renumbered = []
        for delta in deltas:
            position = positions.get(delta.index)
            if position is None:
                position = positions[delta.index] = self.next_index
                self.next_index += 1
            renumbered.append(
                delta if position == delta.index else msgspec.structs.replace(delta, index=position)
            )
        return renumbered


class DelimiterRewriter:
    """Sans-IO core: `ChunkResponse` in, chunks with delimiter tool calls moved to ``tool_calls``.

    ``content`` and ``reasoning`` are lexed by two independent lexers of ``format``. Text keeps its channel
    and order; a chunk whose text produced several runs (text, then a call, then text) becomes several
    chunks, each ordered reasoning, content, tool calls. The incoming chunk's other fields (usage,
    ``finish_reason``, metadata, ``is_complete``, tool calls already structured by the server) go on the
    last chunk it produces; a chunk whose text is all held back and that carries nothing else gives ``[]``.

    Call positions count on after the server's own tool calls; those are renumbered only if a delimiter
    call took their position. When delimiter calls were made and each of them ended, a ``finish_reason`` of
    ``stop`` becomes ``tool_calls`` (``metadata["stop_reason"]`` keeps ``stop`` unless already set); a call
    the model left open (it stopped inside the call) keeps ``stop``: its arguments are cut off, and no
    finish should tell a client to run it. A chunk with a ``finish_reason`` ends the model's text and one
    with ``is_complete`` ends the response: held text is released and open calls are ended before either.

    ``tool_schemas`` (tool name -> JSON schema of its parameters) types XML-style values;
    ``max_buffered_chars`` caps what one call holds back: a non-string XML-style value is held until its
    end tag to be typed; past the cap the held text is released raw and the rest of the value streams
    raw, so the call goes on and nothing is lost, and a value that is not valid JSON leaves the call
    with arguments text that the argument splitter reports (``invalid_json`` at the offset). JSON
    arguments are never held (they stream as they arrive); headers (ids, names, tags) are capped at
    `HEADER_LIMIT`.

    ``offered_tools`` (the names of the tools the request offers; ``None``, the default: any name) gives a
    call to any other tool back as the text the model wrote for it, markers and all, where the call was
    (see `_guard` for the cases where it is dropped instead); it is not numbered, so the offered
    calls keep positions 0, 1, ... and a ``finish_reason`` of ``stop`` stays ``stop`` without them.

    Args:
        format: the format's name (`FORMATS`) or its lexer class.
        id_factory: makes the ids of the calls found (`new_call_id` by default).
        tool_schemas: tool name -> JSON schema of its parameters, to type XML-style values.
        max_buffered_chars: cap, in characters, of what one call holds back (see `DelimiterRewriter`).
        offered_tools: the names of the tools the request offers; a call to another stays text.
            ``None``: any name.

    Raises:
        ConfigurationError: ``format`` is not a format, or ``max_buffered_chars`` is not positive.
    """

    __slots__ = (
        "_content",
        "_guards",
        "_lexer_type",
        "_options",
        "_output",
        "_reasoning",
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
        next chunk goes to `_guarded_feed`. Set after each lexing, where the guards' modes change."""
        self._content: FormatLexer
        self._reasoning: FormatLexer
        self._reset()

    def _reset(self) -> None:
        self._output.reset()
        self._renew_lexers()

    def _renew_lexers(self) -> None:
        output = self._output
        self._content = self._lexer_type(output, "content", self._options)
        self._reasoning = self._lexer_type(output, "reasoning", self._options)
        self._content.renew_rule()
        self._reasoning.renew_rule()
        self._watching = False
        if output.offered is not None:
            self._guards = (
                UnknownCallGuard(self._content, output),
                UnknownCallGuard(self._reasoning, output),
            )

    def feed(self, item: ChunkResponse) -> list[ChunkResponse]:
        """Rewrite one chunk; see the class doc."""
        if self._watching:
            return self._guarded_feed(item)
        # Text in one channel goes to that channel's rule (FormatLexer.rule), which takes it or leaves it
        # to the states; no text goes to the rule where no other applies (FormatLexer.fallback).
        if item.reasoning is None:
            text = item.content
            rule = self._content.rule if text else self._content.fallback
        elif not item.content:
            text = item.reasoning
            rule = self._reasoning.rule if text else self._reasoning.fallback
        else:
            return self._lex(item, more_than_text(item))
        chunks = rule.take(item, text)
        if chunks is None:
            return self._lex(item, more_than_text(item))
        return chunks

    def _guarded_feed(self, item: ChunkResponse) -> list[ChunkResponse]:
        """`feed` while a guard follows markup: lexed, except the next piece of a marker or header
        that the lexer's rule holds or takes as it is (the guard keeps what it takes as raw text; held
        text is kept when a state takes it)."""
        guards = self._guards
        assert guards is not None
        more = more_than_text(item)
        if not more and item.reasoning is None and item.content:
            guard, rule, text = guards[0], self._content.rule, item.content
        elif not more and not item.content and item.reasoning:
            guard, rule, text = guards[1], self._reasoning.rule, item.reasoning
        else:
            return self._lex(item, more)
        if guard.probing and rule.gathers(text):
            if not rule.holds:
                guard.took(text)
                self._watching = not (guards[0].lexes_as_usual and guards[1].lexes_as_usual)
            return []
        return self._lex(item, more)

    def _lex(self, item: ChunkResponse, more: bool) -> list[ChunkResponse]:
        """Rewrite ``item`` through the lexers' states (``more``: it has more than text)."""
        reasoning = item.reasoning
        content = item.content
        ending = item.is_complete or bool(item.finish_reason)
        guards = self._guards
        if guards is not None:
            if reasoning:
                guards[1].feed(reasoning)
            if content:
                guards[0].feed(content)
            if ending:
                guards[1].finish()
                guards[0].finish()
            self._watching = not (guards[0].lexes_as_usual and guards[1].lexes_as_usual)
        else:
            if reasoning:
                self._reasoning.feed(reasoning)
            if content:
                self._content.feed(content)
            if ending:
                self._reasoning.finish()
                self._content.finish()
        chunks = self._output.pack(item, more)
        if item.is_complete:
            self._reset()
        elif ending:  # (text after a finish reason, which no server sends, is lexed afresh)
            self._renew_lexers()
        else:  # (a lexer that did not run keeps its rule)
            if reasoning:
                self._reasoning.renew_rule()
            if content:
                self._content.renew_rule()
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
        chunks = self._output.pack(None, False)
        self._reset()
        return chunks


def _chunk(content: list[str], reasoning: list[str], calls: list[ToolCallDelta]) -> ChunkResponse:
    return ChunkResponse(
        content="".join(content),
        reasoning="".join(reasoning) if reasoning else None,
        tool_calls=calls or None,
    )

"""JSON tool calls behind an opener: one call object per block, or a JSON list of call objects.

Two building blocks on `WrappedJsonLexer` (the call object ``{"name": ...,
"arguments": {...}}`` followed structurally, the arguments streamed verbatim):

- `JsonBlockLexer`: ``OPENER {call} CLOSER`` per call, the closer optional in some formats
  (Hermes ``<tool_call>``, LongCat, InternLM2 ``<|action_start|><|plugin|>``, Granite 20B-FC
  ``<function_call>``, GigaChat 3 ``<|function_call|>``).
- `JsonListLexer`: ``OPENER [{call}, {call}] CLOSER`` (Granite 3 ``<|tool_call|>``, Jamba
  ``<tool_calls>``, Phi-4-mini ``functools``, xLAM, Cohere Command ``<|START_ACTION|>``).

Both hold the opener back (bounded, as tentative text) until what follows it decides: the ``{`` of a
call object or the ``[{`` of a list, after whitespace and the optional literals of `preamble`.
Anything else releases the opener and what was held as text, so prose that mentions an opener stays
text.
"""

from __future__ import annotations

from typing import ClassVar

from operators.delimiters._families import TaggedCallLexer
from operators.delimiters._lexer import Channel, LexerOptions, LexerOutput
from operators.delimiters._scan import Markers
from operators.delimiters._wrapped import WrappedJsonLexer

__all__ = ["JsonBlockLexer", "JsonListLexer"]


class _Preamble(WrappedJsonLexer):
    """What both blocks share: the opener held while the literals of `preamble` and the first
    character after them decide whether a call opens."""

    preamble: ClassVar[tuple[str, ...]] = ()
    """Literals that may follow the opener, in this order, each after optional whitespace (InternLM2's
    ``<|plugin|>``, a fence's ``json``); each may be left out."""
    first: ClassVar[str] = "{"
    """The character that confirms a call after the opener and the preamble."""

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        self._preamble_at = 0
        self.opener_seen = ""
        """The opener of the block being read."""

    def opened(self, marker: str) -> None:
        self.hold_tentative(marker)
        self.opener_seen = marker
        self._preamble_at = 0
        self.state = self.confirm

    def confirm(self, buf: str, pos: int, final: bool) -> int:
        """After the opener: the preamble's literals (each optional), then `first` opens the call."""
        preamble = self.preamble
        at = self._preamble_at
        expected = (preamble[at], self.first) if at < len(preamble) else (self.first,)
        index, found = self.expect_after_space(buf, pos, final, expected)
        if found == self.first:
            self.confirmed_first()
            return index + len(found) if self.first != "{" else index
        if found:
            self.hold_tentative(found)
            self._preamble_at = preamble.index(found, at) + 1
            return index + len(found)
        if found == "":
            self.not_a_call()
        return index

    def confirmed_first(self) -> None:
        """`first` came after the opener."""
        raise NotImplementedError

    def at_end(self) -> None:
        if self.state == self.confirm:
            self.not_a_call()
        super().at_end()


class JsonBlockLexer(_Preamble, TaggedCallLexer):
    """``OPENER {"name": ..., "arguments": {...}} CLOSER``, one block per call (whitespace and newlines
    around the object allowed).

    Subclasses set ``opener``, ``closer`` (``""``: the call ends with its object and the next block or
    text follows) and, when the opener is plain text, rely on the ``{`` after it to tell a call from
    prose. The object is followed structurally: the closer inside a JSON string is content. A complete
    object without its closer at the end of the stream counts as finished; an object that is not of the
    expected shape is dropped up to the closer (without a closer: ends the call, unfinished, and what
    follows is text).
    """

    closer: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "wrapper_markers" not in cls.__dict__ and ("opener" in cls.__dict__ or "closer" in cls.__dict__):
            cls.wrapper_markers = Markers(cls.closer or cls.opener)

    def confirmed_first(self) -> None:
        self.enter_wrapper()

    def wrapper_closed(self) -> None:
        if self.closer:
            self.state = self._after_wrapper
        else:
            self.end_call(finished=True)
            self.call_done()

    def _after_wrapper(self, buf: str, pos: int, final: bool) -> int:
        """After the JSON object: whitespace, then the closer."""
        index, found = self.expect_after_space(buf, pos, final, (self.closer,))
        if found:
            self.take_tentative()
            self.end_call(finished=True)
            self.call_done()
            return index + len(found)
        if found == "":
            # The object is complete but the closer does not follow: the call is done, the rest is text.
            self.end_call(finished=True)
            self.release_tentative()
            self.state = self.start
        return index

    def wrapper_interrupted(self, marker: str | None) -> None:
        if marker is None:
            if self.closer:
                self.state = self._skip_to_end
            else:
                self.end_call(finished=False)
                self.state = self.start
        elif marker == self.closer:
            self.end_call(finished=True)
            self.call_done()
        else:  # (the opener of the next block, outside a string)
            self.end_call(finished=False)
            self.opened(marker)

    def _skip_to_end(self, buf: str, pos: int, final: bool) -> int:
        """A malformed call: drop its text up to the closer."""
        _stop, resume, marker = self.wrapper_markers.find(buf, pos, final)
        if marker is not None:
            self.end_call(finished=True)
            self.call_done()
        return resume

    def at_end(self) -> None:
        if self.state == self._after_wrapper:
            self.take_tentative()
            self.end_call(finished=True)
        super().at_end()


class JsonListLexer(_Preamble):
    """``OPENER [{"name": ..., "arguments": {...}}, ...] CLOSER``: a JSON list of call objects.

    Subclasses set ``text_markers`` (the openers), ``closers`` (the closer after the ``]`` for each
    opener, ``""`` for none) and ``wrapper_markers`` (every closer and opener: one of them outside a
    JSON string inside a call object ends the call). ``bare_at_start``: a list may also open the
    channel's text with no opener (after whitespace). The list is confirmed by ``[`` then ``{`` (or
    ``]``, an empty list: no calls); each call object streams as it arrives and is finished at its
    ``}``. Text after the ``]`` (and its closer) is text again; a list that ends early (no ``,`` or
    ``]`` after an object) goes on as text.
    """

    first: ClassVar[str] = "["
    call_openers: ClassVar[tuple[str, ...]] = ("{",)
    """What opens a call inside the list (for the guard of tools not offered, ``._guard``)."""
    closers: ClassVar[dict[str, str]] = {}
    bare_at_start: ClassVar[bool] = False
    _closer_markers: ClassVar[dict[str, Markers]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "closers" in cls.__dict__:
            closers = cls.closers.items()
            cls._closer_markers = {opener: Markers(closer) for opener, closer in closers if closer}

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        if self.bare_at_start:
            self.state = self.channel_start

    def channel_start(self, buf: str, pos: int, final: bool) -> int:
        """Nothing but whitespace has gone out on this channel yet: a bare list may open here."""
        index, char = self.char_after_space(buf, pos)
        if char == "[":
            stop, _resume, marker = self.text_markers.find(buf, index, final)
            if stop == index:  # an opener that starts with ``[`` (``[TOOL_CALLS]``), or its start
                if marker is not None:
                    self.not_a_call()  # (the text state takes the opener)
                return index
            self.opener_seen = ""
            self.confirmed_first()
            return index + 1
        if char:
            self.not_a_call()
        return index

    def confirmed_first(self) -> None:
        self.hold_tentative("[")
        self.state = self._list_open

    def _list_open(self, buf: str, pos: int, final: bool) -> int:
        """After the ``[``: a call object, or ``]`` for an empty list."""
        index, char = self.char_after_space(buf, pos)
        if char == "]":
            self.take_tentative()
            self.list_closed()
            return index + 1
        if char == "{":
            self.enter_wrapper(in_list=True)
        elif char:
            self.not_a_call()
        return index

    def wrapper_closed(self) -> None:
        self.end_call(finished=True)
        self.state = self.list_next

    def list_closed(self) -> None:
        self.state = self._after_list if self.closers.get(self.opener_seen) else self.start

    def _after_list(self, buf: str, pos: int, final: bool) -> int:
        """After the ``]``: whitespace, then the opener's closer (dropped); else the rest is text."""
        index, found = self.expect_after_space(buf, pos, final, (self.closers[self.opener_seen],))
        if found:
            self.take_tentative()
            self.state = self.start
            return index + len(found)
        if found == "":
            self.not_a_call()
        return index

    def wrapper_interrupted(self, marker: str | None) -> None:
        closer = self.closers.get(self.opener_seen)
        if marker is not None and marker == closer:
            self.end_call(finished=True)  # (the list's closer where the object should have closed)
            self.state = self.start
        elif marker is None:
            self.end_call(finished=False)
            self.state = self._skip_to_closer if closer else self.start
        elif marker in self.text_markers:
            self.end_call(finished=False)
            self.opened(marker)
        else:  # another opener's closer: not this list's, the call is cut there
            self.end_call(finished=False)
            self.state = self.start

    def _skip_to_closer(self, buf: str, pos: int, final: bool) -> int:
        """A malformed call object: drop the list's text up to its closer."""
        _stop, resume, marker = self._closer_markers[self.opener_seen].find(buf, pos, final)
        if marker is not None:
            self.state = self.start
        return resume

    def at_end(self) -> None:
        state = self.state
        if state == self._list_open or state == self.channel_start:
            self.release_tentative()
        elif state == self._after_list:
            self.take_tentative()
        super().at_end()

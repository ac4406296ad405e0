"""The building blocks most formats share: calls inside a section, and calls in tagged blocks.

`SectionLexer` (Kimi, DeepSeek; ``_invoke.InvokeSectionLexer`` builds on it) and
`TaggedCallLexer` (Hermes, Qwen3-Coder, GLM) are `FormatLexer`s with the states
their family shares; a format adds the states of its own call syntax.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from operators.delimiters._lexer import Channel, FormatLexer, LexerOptions, LexerOutput
from operators.delimiters._scan import Markers

__all__ = ["SectionLexer", "TaggedCallLexer"]


class SectionLexer(FormatLexer):
    """A format whose calls sit inside a section: ``SECTION_BEGIN (CALL)* SECTION_END``.

    Subclasses set ``text_markers`` (what opens a section or, tolerated, a bare call), ``section_begins``,
    ``section_markers`` (what opens a call or closes the section inside a section), ``section_ends``, and
    write ``begin_call(marker)`` that switches to the call's first state. A call's last state calls
    ``self.after_call()``.

    A section opener is confirmed by the first call opener: until then the opener and what follows are
    held (bounded), and released as text if the section closes with text in it or the input ends.
    Between calls, whitespace is dropped and any other text passes through.

    Args:
        output: where the lexer reports what it found.
        channel: the channel it lexes: ``content`` or ``reasoning``.
        options: what every lexer of the rewriter shares.
    """

    section_begins: ClassVar[frozenset[str]]
    section_markers: ClassVar[Markers]
    section_ends: ClassVar[frozenset[str]]
    call_end: ClassVar[str] = ""
    """The marker that ends a call; a call that another marker ends is finished only if
    ``end_marker_optional`` and its JSON arguments are complete (see `close_call`)."""

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        self.in_section = False
        self._between_started = False

    def begin_call(self, marker: str) -> None:
        """``marker`` opened a call: switch to the call's first state."""
        raise NotImplementedError

    def after_call(self) -> None:
        """The current call is over: back to the section (or to text for a call outside a section)."""
        self._between_started = False
        self.state = self.in_section_state if self.in_section else self.start

    def close_call(self, marker: str) -> None:
        """``marker`` ended the current call's header or arguments: end the call, then
        `resume_after` the marker."""
        json_args = self.json_args
        self.end_call(
            finished=marker == self.call_end
            or (self.end_marker_optional and json_args is not None and json_args.complete)
        )
        self.resume_after(marker)

    def resume_after(self, marker: str) -> None:
        """A call ended at ``marker``: a section end closes the section, another call's opener opens that
        call, anything else (the call's own end marker) leads back between calls."""
        if marker in self.section_ends:
            self.in_section = False
            self.state = self.start
        elif marker in self.section_markers:
            self.begin_call(marker)
        else:
            self.after_call()

    def not_a_call_header(self, opening: str) -> None:
        """A call's header (what followed ``opening``) grew past the cap: it was text, and so is what
        follows it up to the next call."""
        self.emit_text(opening + self.take_header())
        self.after_call()
        self._between_started = True

    def opened(self, marker: str) -> None:
        """A text marker opened a section (held until a call confirms it) or a bare call."""
        if marker in self.section_begins:
            self.in_section = True
            self._between_started = False
            self.hold_tentative(marker)
            self.state = self.in_section_state
        else:
            self.in_section = False
            self.begin_call(marker)

    def in_section_state(self, buf: str, pos: int, final: bool) -> int:
        """Between calls inside a section.

        Args:
            buf: the text being lexed.
            pos: where in ``buf`` this state reads from.
            final: no more text follows ``buf``.

        Returns:
            Where in ``buf`` the state stopped (it set the next state).
        """
        stop, resume, marker = self.section_markers.find(buf, pos, final)
        if stop > pos:
            text = buf[pos:stop]
            if self.tentative is not None:
                if not self.hold_tentative(text):
                    self.in_section = False
                    self.release_tentative()
                    self.state = self.start
                    return stop
            else:
                self._between(text)
        if marker is None:
            return resume
        if marker in self.section_ends:
            self.in_section = False
            self.state = self.start
            if self.tentative is not None:
                held = self.take_tentative()
                opener_end = next(len(m) for m in self.section_begins if held.startswith(m))
                if not held[opener_end:].isspace() and len(held) > opener_end:
                    self.emit_text(held + marker)
        else:
            if self.tentative is not None:
                held = self.take_tentative()
                opener_end = next(len(m) for m in self.section_begins if held.startswith(m))
                self._between(held[opener_end:])
            self.begin_call(marker)
        return resume

    def partial_markers(self) -> Markers | None:
        """Inside a section, the section markers; elsewhere the text markers."""
        if self.state == self.in_section_state:
            return self.section_markers
        return super().partial_markers()

    def _between(self, text: str) -> None:
        if not self._between_started:
            text = text.lstrip()
            if not text:
                return
            self._between_started = True
        self.emit_text(text)


class TaggedCallLexer(FormatLexer):
    """A format whose calls each sit in their own block opened by ``opener`` (``<tool_call>``).

    The opener is plain text in these tokenizers, so it is held back (tentative) while `confirm`,
    the state after the opener, looks at what follows: it calls `confirmed` when a call really
    starts, or `not_a_call` to release the opener (and what it held) as text. A call's last state
    calls `call_done`. Whitespace between two calls is their separator and is dropped; whitespace
    after the last call is released as text unless the input ends.
    """

    opener: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "opener" in cls.__dict__ and "text_markers" not in cls.__dict__:
            cls.text_markers = Markers(cls.opener)

    def confirm(self, buf: str, pos: int, final: bool) -> int:
        """The state after the opener.

        Args:
            buf: the text being lexed.
            pos: where in ``buf`` this state reads from.
            final: no more text follows ``buf``.

        Returns:
            Where in ``buf`` the state stopped (it set the next state).
        """
        raise NotImplementedError

    def opened(self, marker: str) -> None:
        """The opener is held until `confirm` decides whether a call follows."""
        self.hold_tentative(marker)
        self.state = self.confirm

    def confirmed(self) -> None:
        """What was held since the opener belongs to a call: drop it."""
        self.take_tentative()

    def read_name(self, buf: str, pos: int, name_end: re.Pattern[str]) -> tuple[int, str | None]:
        """Read a tool name up to the first character that ``name_end`` matches, collected and held with
        `hold_header`.

        Args:
            buf: the text being lexed.
            pos: where in ``buf`` the name (or its rest) starts.
            name_end: matches a character that ends a name.

        Returns:
            ``(stop, ender)``: ``ender`` is the character at ``stop`` that ended the name (the name is then
            `take_header`), None while the name runs to the end of the chunk, ``""`` when it passed the
            cap (then it was not a call and the held text went out as text).
        """
        hit = name_end.search(buf, pos)
        stop = len(buf) if hit is None else hit.start()
        if stop > pos and not self.hold_header(buf[pos:stop]):
            self.not_a_call()
            return stop, ""
        if hit is None:
            self.naming = (self.state, name_end)
            return stop, None
        return stop, buf[stop]

    def call_done(self) -> None:
        """The call's block is over."""
        self.state = self._between_calls

    def _between_calls(self, buf: str, pos: int, final: bool) -> int:
        index, found = self.expect_after_space(buf, pos, final, (self.opener,))
        if found:
            self.opened(found)
            return index + len(found)
        if found == "":
            self.not_a_call()
        return index

    def at_end(self) -> None:
        """The input has ended: what was held between calls goes with the calls."""
        if self.state == self._between_calls:
            self.take_tentative()
        super().at_end()

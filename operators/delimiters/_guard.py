"""Calls to tools the request does not offer, given back as the text the model wrote.

`UnknownCallGuard` feeds one channel's `FormatLexer` so that the raw text of such a
call (its markers, name and arguments) comes out as text of the channel, in order, while calls to offered
tools are rewritten as usual. The rewriter's output does not number or write a call to a tool it was not
offered (it tells the guard through two flags). The guard follows the lexer state by state
(`feed` with ``step``: each state reports the input it took), so it knows the raw
text from the moment the lexer leaves plain text until the call's name is decided, and keeps it; it is
given back when the name is not offered, and what follows of that call goes out as it came. The text
kept is bounded by `MAX_UNDECIDED_CHARS`; plain text and the arguments of offered calls still take
the rewriter's fast paths.

Where the text of a call cannot be told apart, the call is dropped instead, as the policy's ``drop``
does: a call to an unknown tool after text the same markup already produced before the call's name,
after the text kept passes its cap, or decided by the lexer in the same step as an offered call (markup
confirmed late, as Qwen3-Coder's calls without ``<tool_call>``). An offered call that follows an unknown
one in the same tool-call section is rewritten as usual: the section's markers before it went out as text
with the unknown call, and what closed the unknown call (and any text between the two) goes out up to
the first marker that opens a call's markup; what closes
the section then closes the offered call's markup, as without the guard. An unknown call after an offered
one goes out from that marker on (what closed the offered call is that call's).
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from operators.delimiters._lexer import Channel, FormatLexer

__all__ = ["MAX_UNDECIDED_CHARS", "UnknownCallGuard"]

MAX_UNDECIDED_CHARS: Final = 8192
"""Cap on the raw text kept while a call's name is undecided; past it, the markup's calls are dropped."""

_REST: Final = 0
"""The lexer is in plain text, holding nothing."""
_PROBE: Final = 1
"""Markup began and no call has started yet: its raw text is kept, as each state takes it."""
_KNOWN: Final = 2
"""A call to an offered tool is open: the lexer's output goes on."""
_TEXT: Final = 3
"""A call to a tool not offered is open: the raw text goes out as text, the lexer's output is ignored."""
_PASS: Final = 4
"""Markup whose raw text cannot be given back (it produced text of its own): the lexer's output goes on."""


class GuardedOutput(Protocol):
    """What the guard needs of the rewriter's output (``operators.delimiters.rewriter._Output``)."""

    ops: list[tuple[str, Any]]
    unknown_started: bool
    unknown_ended: bool

    def text(self, channel: Channel, text: str) -> None: ...


class UnknownCallGuard:
    """Feeds one channel's lexer, giving back the raw text of calls to tools not offered (module doc)."""

    __slots__ = (
        "_after_call",
        "_channel",
        "_gap_is_next_call",
        "_journal",
        "_lexer",
        "_openers",
        "_output",
        "_owed",
        "_saved",
        "_size",
        "mode",
    )

    def __init__(self, lexer: FormatLexer, output: GuardedOutput) -> None:
        self._lexer = lexer
        lexer.watched = True
        self._output = output
        self._channel: Channel = lexer.channel
        self.mode = _REST
        self._journal: list[str] = []
        """The raw text of the markup since it began (or since the last call in it ended), in _PROBE."""
        self._size = 0
        self._owed = False
        """The markup's opening went out as text with an unknown call: its closing markers do too."""
        self._saved: list[tuple[str, Any]] = []
        """The rewriter's output list while `feed` runs (the lexer writes each step to a new one)."""
        self._after_call = False
        """The kept raw text began where an offered call ended: it starts with that call's closing."""
        section = getattr(type(lexer), "section_markers", None)
        self._openers: tuple[str, ...] = (
            lexer.text_markers.markers
            + (section.markers if section is not None else ())
            + getattr(type(lexer), "call_openers", ())
        )
        """The markers that open a call's markup, in plain text, in a section of calls, or in a list."""
        self._gap_is_next_call = bool(getattr(type(lexer), "gap_is_next_call", False))
        """The text between two calls is the next call's (a format whose calls open with no marker:
        ``f(a=1), g(b=2)``); else a call's markup starts at the first of `_openers`."""

    @property
    def lexes_as_usual(self) -> bool:
        """Whether the lexer's output goes on as it is (plain text, an offered call, markup that made text
        of its own): the rewriter's fast paths may then take the next chunk (they never cross a marker),
        and lexing goes through `feed` only when they cannot decide it."""
        return self.mode in (_REST, _KNOWN, _PASS)

    @property
    def probing(self) -> bool:
        """Whether markup began and no call started yet (its raw text is being kept)."""
        return self.mode == _PROBE

    def took(self, text: str) -> None:
        """The lexer took ``text`` into what it collects (a header), by the rewriter's fast path: kept."""
        self._journal.append(text)
        self._size += len(text)
        if self._size > MAX_UNDECIDED_CHARS:
            if self._owed:
                self._give_back()
            self.mode = _PASS

    def feed(self, text: str) -> None:
        """Lex ``text``; what it gives goes to the output as the rewriter packs it."""
        output = self._output
        self._saved, output.ops = output.ops, []
        try:
            self._lexer.feed(text, step=self._step)
            if output.ops:  # what a state emitted without taking input (none do today)
                self._step("")
        finally:
            left, output.ops = output.ops, self._saved
            if left:  # a lexer's error cut a step short: what it emitted goes on
                _merge(output.ops, left)

    def finish(self) -> None:
        """The channel ended: release what the lexer holds, end what is open."""
        output = self._output
        held = self._lexer.held_text
        saved, output.ops = output.ops, []
        try:
            self._lexer.finish()
        finally:
            ops, output.ops = output.ops, saved
        mode = self.mode
        started, output.unknown_started = output.unknown_started, False
        output.unknown_ended = False
        if mode == _TEXT:
            if held:
                output.text(self._channel, held)
        elif mode == _PROBE:
            self._journal.append(held)
            if started or (self._owed and not _starts_call(ops)):
                self._give_back()
            else:
                _merge(output.ops, ops)
        else:
            _merge(output.ops, ops)
        self.mode = _REST
        self._journal = []
        self._size = 0
        self._owed = False

    def _step(self, raw: str) -> None:
        """One state of the lexer took ``raw``: follow what it did (the lexer's output of the step is in
        ``output.ops``, a list of its own; what goes on is moved to the rewriter's)."""
        output = self._output
        ops, output.ops = output.ops, []
        saved = self._saved
        started, output.unknown_started = output.unknown_started, False
        ended, output.unknown_ended = output.unknown_ended, False
        at_rest = self._lexer.at_rest()
        mode = self.mode
        if mode == _TEXT:
            mode = self._text_step(raw, ops, saved, ended)
        elif mode in (_PROBE, _REST):
            mode = self._probe_step(mode, raw, ops, saved, started)
        else:
            _merge(saved, ops)
            if mode == _KNOWN and _ends_call(ops):
                mode = _PROBE
                self._journal, self._size, self._owed, self._after_call = [], 0, False, True
        if at_rest:
            if mode == _PROBE and self._owed:
                self._give_back(saved)  # the closing markers of a section opened by an unknown call
            mode = _REST
        self.mode = mode

    def _text_step(
        self, raw: str, ops: list[tuple[str, Any]], saved: list[tuple[str, Any]], ended: bool
    ) -> int:
        """`_step` in an unknown call kept as text: the mode that follows."""
        _text(saved, self._channel, raw)
        if _starts_call(ops):  # an offered call opened without the unknown one's end
            _merge(saved, _from_start(ops))
            return _KNOWN
        if ended:
            self._owed, self._after_call = True, False
            return _PROBE
        return _TEXT

    def _probe_step(
        self, mode: int, raw: str, ops: list[tuple[str, Any]], saved: list[tuple[str, Any]], started: bool
    ) -> int:
        """`_step` at rest or in undecided markup: the mode that follows."""
        if mode == _REST:
            self._journal, self._size, self._owed, self._after_call = [], 0, False, False
        self._journal.append(raw)
        self._size += len(raw)
        if started and _starts_call(ops):
            # An unknown call and an offered one decided at once (markup confirmed late): their raw texts
            # cannot be told apart, so the unknown call is dropped and the lexer's output goes on.
            _merge(saved, ops)
            self._journal, self._size = [], 0
            mode = _PASS
        elif started:
            if self._after_call:  # what closed the offered call before it is that call's
                raw_text = "".join(self._journal)
                self._journal = [raw_text[self._call_markup_start(raw_text) :]]
            self._give_back(saved)
            mode = _TEXT
        elif _starts_call(ops):
            self._known_call(ops, saved)
            mode = _KNOWN
        elif ops:
            mode = self._text_in_markup(ops, saved)
        elif mode == _REST:
            mode = _PROBE
        if mode == _PROBE and self._size > MAX_UNDECIDED_CHARS:
            if self._owed:
                self._give_back(saved)
            mode = _PASS
        return mode

    def _known_call(self, ops: list[tuple[str, Any]], saved: list[tuple[str, Any]]) -> None:
        """An offered call opened in undecided markup: what closed an unknown call before it goes out as
        text; what opened this one (from the first marker that opens a call's markup) is the call's."""
        if not self._owed:
            _merge(saved, ops)
            return
        raw_text = "".join(self._journal)
        opening = self._call_markup_start(raw_text)
        if opening:
            _text(saved, self._channel, raw_text[:opening])
        _merge(saved, _from_start(ops))

    def _call_markup_start(self, raw_text: str) -> int:
        """Where the markup of the call that follows starts in ``raw_text``, kept since a call ended."""
        return 0 if self._gap_is_next_call else _first_of_markers(raw_text, self._openers)

    def _text_in_markup(self, ops: list[tuple[str, Any]], saved: list[tuple[str, Any]]) -> int:
        """Undecided markup produced text: the mode that follows.

        Text the lexer lets go of (a held start of a marker that was not one) is the start of the kept
        raw text, which then starts after it; any other text means the raw text cannot be given back."""
        raw = "".join(self._journal)
        if self._owed:
            # The raw text in place of what the lexer made of it, up to where the next call's markup opens
            # (kept: that call's, if it is offered).
            opening = len(raw) if self._gap_is_next_call else _first_of_markers(raw, self._openers)
            _text(saved, self._channel, raw[:opening])
            rest = raw[opening:]
            self._journal, self._size = ([rest] if rest else []), len(rest)
            return _PROBE
        released = "".join(text for kind, texts in ops if kind != "tool" for text in texts)
        _merge(saved, ops)
        if all(kind == self._channel for kind, _ in ops) and raw.startswith(released):
            rest = raw[len(released) :]
            self._journal, self._size = ([rest] if rest else []), len(rest)
            return _PROBE if rest else _REST
        return _PASS

    def _give_back(self, ops: list[tuple[str, Any]] | None = None) -> None:
        """The kept raw text goes out as text (to ``ops``, or the output's)."""
        if self._journal:
            _text(self._output.ops if ops is None else ops, self._channel, "".join(self._journal))
        self._journal, self._size = [], 0


def _text(ops: list[tuple[str, Any]], channel: Channel, text: str) -> None:
    """Append ``text`` of ``channel`` to ``ops`` (as the rewriter's output does)."""
    if text:
        if ops and ops[-1][0] == channel:
            ops[-1][1].append(text)
        else:
            ops.append((channel, [text]))


def _merge(ops: list[tuple[str, Any]], more: list[tuple[str, Any]]) -> None:
    """Append ``more`` to ``ops`` as the output would have written them there in one run: text after
    text of the same channel, and the next piece of the call the last op is writing, join it."""
    for op in more:
        kind, payload = op
        if ops:
            last_kind, last = ops[-1]
            if kind == last_kind:
                if kind != "tool":
                    last.extend(payload)
                    continue
                if payload.index == last.index and payload.name is None and not last.finished:
                    last.args.extend(payload.args)
                    last.finished = payload.finished
                    continue
        ops.append(op)


def _first_of_markers(text: str, markers: tuple[str, ...]) -> int:
    """The position of the first of ``markers`` in ``text``, or ``len(text)``."""
    first = len(text)
    for marker in markers:
        found = text.find(marker, 0, first)
        if found >= 0:
            first = found
    return first


def _starts_call(ops: list[tuple[str, Any]]) -> bool:
    return any(kind == "tool" and piece.name is not None for kind, piece in ops)


def _ends_call(ops: list[tuple[str, Any]]) -> bool:
    return any(kind == "tool" and piece.finished for kind, piece in ops)


def _from_start(ops: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``ops`` from the first call start on."""
    for position, (kind, piece) in enumerate(ops):
        if kind == "tool" and piece.name is not None:
            return ops[position:]
    return []

"""The delimiter lexer's engine: `LexerEngine` runs a channel's states and gives them their helpers.

Each channel (``content``, ``reasoning``) has its own lexer: a small state machine over the text whose
current state is a method ``state(buf, pos, final) -> int``. ``buf`` is the text held back from the
previous chunk followed by the new chunk; the state consumes ``buf[pos:]`` as far as it can decide, emits
text or call pieces, possibly switches ``self.state``, and returns where it stopped. When a state returns
``pos`` without switching state, the rest of ``buf`` is held back until the next chunk (it could still
become a marker): handlers only do that for a bounded suffix (a partial marker, a few characters), so
nothing is rescanned more than a bounded number of times. With ``final=True`` (end of input) a state must
consume everything. Markers are found with `Markers` (one compiled alternation per state,
searched from ``pos`` only), JSON arguments are followed with `JsonArgs`, XML-style
parameters are converted with `XmlArguments`.

A lexer reports through `LexerOutput`, and the rewriter packs the results into chunks, keeping the
order: ``emit_text(text, channel=None)`` (``channel`` when the format decides where text belongs),
``start_call(name, call_id=None, kind="function")`` (the index is the next position in the response, the
id comes from ``id_factory`` when ``call_id`` is ``None``; ``kind="custom"`` for free-text input),
``emit_args(text)``, ``end_call(finished)`` (``finished=False`` when the call was cut off; a finished
function call that never emitted arguments gets ``{}``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, Literal, Protocol, TypeAlias

import msgspec

from operators.delimiters._scan import (
    HEADER_LIMIT,
    SHORT_PIECE,
    JsonArgs,
    Markers,
    ValueType,
    XmlArguments,
    json_escape,
    space_end,
    value_type_from_schema,
)
from pipeline.models import ChunkResponse, ToolCallKind

__all__ = [
    "DEFAULT_MAX_BUFFERED_CHARS",
    "Channel",
    "LexerEngine",
    "LexerOptions",
    "LexerOutput",
    "State",
    "claim_next",
]
Channel: TypeAlias = Literal["content", "reasoning"]
State: TypeAlias = Callable[[str, int, bool], int]

DEFAULT_MAX_BUFFERED_CHARS: Final = 1 << 20
"""Default cap on the characters held for one call (a parameter value held until it is complete)."""


class LexerOptions(msgspec.Struct, frozen=True):
    """What every lexer of a rewriter shares."""

    tool_schemas: Mapping[str, Mapping[str, Any]] = {}
    """JSON schema of each tool's parameters, by tool name: decides the JSON type of XML-style values."""
    max_buffered_chars: int = DEFAULT_MAX_BUFFERED_CHARS
    """Cap on the characters held for one call; see `XmlArguments`."""


class LexerOutput(Protocol):
    """Where a lexer reports what it found, in order; the rewriter packs it into chunks
    (`DelimiterRewriter`)."""

    def text(self, channel: Channel, text: str) -> None:
        """Text of ``channel`` that passes through."""

    def start_call(self, name: str, call_id: str | None, kind: ToolCallKind = "function") -> int:
        """A call starts; returns its position in the response (``call_id`` None: one is generated)."""
        ...

    def args(self, index: int, text: str) -> None:
        """Arguments text of call ``index``."""

    def end_call(self, index: int) -> None:
        """Call ``index`` is finished."""

    def chunks(self, item: ChunkResponse) -> list[ChunkResponse]:
        """What was reported since the last chunk, packed into the chunks of ``item`` (text alone)."""
        ...


HEADER: Final = "header"
JSON: Final = "json"
VALUE: Final = "value"
FREE: Final = "free"
SKIP: Final = "skip"
"""The streaming helpers a lexer's shortcut can stand in for (see ``LexerEngine._stream``)."""


def claim_next(rest: str, final: bool, *starts: str) -> bool | None:
    """The usual `LexerEngine.detect_after`: whether ``rest``, after whitespace, begins with one of
    ``starts``; ``None`` while it is still the start of one and more text is coming (not ``final``)."""
    head = rest.lstrip()
    if head.startswith(starts):
        return True
    if not final and any(start.startswith(head) for start in starts):
        return None
    return False


class LexerEngine:
    """One channel's lexer for one format: a state machine over the channel's text (see the module doc)."""

    # Slots: every chunk reads a few of these; a format's subclass keeps its own attributes in a __dict__.
    __slots__ = (
        "__dict__",
        "__weakref__",
        "_call_has_args",
        "_expect",
        "_header_chars",
        "_header_parts",
        "_held",
        "_output",
        "_skip_newline",
        "_stream",
        "_tentative_size",
        "_text_state",
        "call_index",
        "call_kind",
        "call_name",
        "channel",
        "json_args",
        "naming",
        "options",
        "state",
        "tentative",
        "watched",
        "xml_args",
    )

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    models: ClassVar[tuple[str, ...]] = ()
    """The model families that write this format (``"Llama 3.2"``, ``"Olmo 3"``), as ``streamfold formats``
    and the docs list them."""
    detect_openers: ClassVar[tuple[str, ...]] = ()
    """Text that, where it first appears in an answer, names this format for ``--tool-format auto``. An
    opener several formats share (``<tool_call>``) is told apart by `detect_after`."""
    detect_at_start: ClassVar[tuple[str, ...]] = ()
    """Like `detect_openers`, but only at the start of an answer (after whitespace): for a format
    without a marker, whose call is the whole answer (bare JSON, Python calls)."""
    end_marker_optional: ClassVar[bool] = False
    """A call whose JSON arguments are complete counts as finished at the end of the input even without
    its end marker (Kimi's tool section that never closes)."""
    markers: ClassVar[tuple[str, ...]] = ()
    """Every literal the format uses, for tests that split the input around each of them."""
    text_markers: ClassVar[Markers]
    """What the text state (`start`) stops at; text with none of their first characters passes
    through that state untouched (the rewriter's fast path, `shortcut`)."""

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """For ``--tool-format auto``: whether ``opener`` (of `detect_openers` or
        `detect_at_start`) followed by
        ``rest``, the answer's text after it so far, is a call in this format; ``None`` while more text
        (``final`` False) may tell. By default the opener alone decides."""
        return True

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        self._output = output
        self.channel: Channel = channel
        self.options = options
        self.state: State = self.start
        self._text_state: State = self.start
        """The text state, kept to compare with ``state`` without building a bound method per chunk."""
        self.call_index: int | None = None
        """Position of the call being written, ``None`` between calls."""
        self.call_name = ""
        self.call_kind: ToolCallKind = "function"
        self._call_has_args = False
        self.json_args: JsonArgs | None = None
        """The JSON scanner of the current call, for formats with JSON arguments."""
        self.xml_args: XmlArguments | None = None
        """The JSON writer of the current call, for formats with XML-style parameters."""
        self._header_parts: list[str] = []
        self._header_chars = 0
        self.tentative: list[str] | None = None
        """Text held while deciding whether it opens a call; released as text if it does not."""
        self._tentative_size = 0
        self._held = ""
        self.watched = False
        """A guard follows this lexer (``._guard``): a format's shortcut must not leave plain text, the
        guard keeps the raw text from there (the engine's shortcut never does)."""
        self._skip_newline = False
        self._expect: tuple[State, tuple[str, ...], int] | None = None
        """The state that last held the start of a literal it expects after whitespace
        (`expect_after_space`), the literals and the longest length."""
        self.naming: tuple[State, re.Pattern[str]] | None = None
        """The state that last read a name to the end of a chunk (``_families.TaggedCallLexer.read_name``)
        and what ends the name: `shortcut` holds the next piece of the name as the state would."""
        self._stream: tuple[State, Markers, str] | None = None
        """The state that last streamed with one of the helpers the shortcut knows (``collect_header``,
        ``stream_json_args``, ``stream_value``, ``stream_free_args``), its end markers and which one."""

    # --- the engine -------------------------------------------------------------------------------------

    def feed(self, text: str, final: bool = False, step: Callable[[str], None] | None = None) -> None:
        """Lex the next piece of the channel's text (``final``: nothing follows, nothing may be held).

        ``step(raw)`` is called after each state took ``raw``, the input it consumed (held text included
        once it is taken): what the rewriter's guard for unknown tools follows."""
        held = self._held
        if held:
            self._held = ""
            text = held + text
        pos = 0
        size = len(text)
        while pos < size:
            state = self.state
            resume = state(text, pos, final)
            if resume == pos and self.state == state:
                if final:
                    raise AssertionError(f"{type(self).__name__}.{state.__name__} did not consume at the end")
                break
            if step is not None:
                step(text[pos:resume])
            pos = resume
        if pos < size:
            self._held = text[pos:]

    @property
    def held_text(self) -> str:
        """The input held back from the last chunk (the start of a marker, say), not yet taken."""
        return self._held

    def at_rest(self) -> bool:
        """Whether the lexer is in its text state holding nothing: what follows starts afresh."""
        return (
            self.state == self._text_state
            and not self._held
            and self.tentative is None
            and self.call_index is None
            and not self._skip_newline
        )

    def partial_markers(self) -> Markers | None:
        """The markers the current state looks for when what it holds back can only be the start of one
        of them (the text state's, a streaming helper's), else None."""
        state = self.state
        if state == self._text_state:
            return self.text_markers
        stream = self._stream
        return stream[1] if stream is not None and state == stream[0] else None

    def finish(self) -> None:
        """The channel's text has ended: release what is held, end what is open."""
        if self._held:
            self.feed("", final=True)
        self.at_end()

    def start(self, buf: str, pos: int, final: bool) -> int:
        """The text state: text passes through up to the first of ``text_markers``, which goes to
        `opened`."""
        resume, marker = self.stream_text(buf, pos, final, self.text_markers)
        if marker is not None:
            self.opened(marker)
        return resume

    def opened(self, marker: str) -> None:
        """One of ``text_markers`` came in the text state: switch to what it opens."""
        raise NotImplementedError

    def at_end(self) -> None:
        """End of input, after every held character went through the states with ``final=True``."""
        self.release_tentative()
        if self.xml_args is not None:
            self.xml_args.cut()
        if self.call_index is not None:
            json_args = self.json_args
            self.end_call(finished=self.end_marker_optional and json_args is not None and json_args.complete)

    # --- output -----------------------------------------------------------------------------------------

    def emit_text(self, text: str, channel: Channel | None = None) -> None:
        """Pass ``text`` through on this lexer's channel, or on ``channel`` when the format itself says
        where the text belongs (a harmony ``analysis`` message is reasoning whichever field it came in)."""
        if text:
            self._output.text(channel or self.channel, text)

    def start_call(self, name: str, call_id: str | None = None, kind: ToolCallKind = "function") -> None:
        """Open the next call of the response (its id from ``id_factory`` when ``call_id`` is None).

        ``kind`` is ``custom`` for a call whose input is free text rather than JSON arguments."""
        if self.call_index is not None:
            self.end_call(finished=False)
        self.call_index = self._output.start_call(name, call_id or None, kind)
        self.call_name = name
        self.call_kind = kind
        self._call_has_args = False

    def emit_args(self, text: str) -> None:
        """Append ``text`` to the open call's arguments."""
        if text and self.call_index is not None:
            self._call_has_args = True
            self._output.args(self.call_index, text)

    def end_call(self, finished: bool = True) -> None:
        """Close the open call: ``finished`` when its end marker came, not when it was cut off."""
        index = self.call_index
        if index is None:
            return
        if finished:
            if not self._call_has_args and self.call_kind == "function":
                self._output.args(index, "{}")
            self._output.end_call(index)
        self.call_index = None
        self.json_args = None
        self.xml_args = None

    # --- helpers for states ------------------------------------------------------------------------------

    def hold_tentative(self, text: str) -> bool:
        """Hold ``text`` while deciding whether a call opens; False once the held text passes
        `HEADER_LIMIT` (the caller then gives up and releases it)."""
        if self.tentative is None:
            self.tentative = []
            self._tentative_size = 0
        self.tentative.append(text)
        self._tentative_size += len(text)
        return self._tentative_size <= HEADER_LIMIT

    def hold_space(self, buf: str, pos: int) -> tuple[int, bool]:
        """Hold the whitespace at ``pos`` with the tentative text: where it ends, and False once the held
        text passed the cap (as `hold_tentative`)."""
        index = space_end(buf, pos)
        return index, index == pos or self.hold_tentative(buf[pos:index])

    def char_after_space(self, buf: str, pos: int) -> tuple[int, str]:
        """Hold the whitespace at ``pos`` (see `hold_space`), then the character after it.

        Returns ``(index, char)`` with ``index`` just past the whitespace; ``char`` is ``""`` when there is
        nothing to look at yet (the chunk ended) or any more (the whitespace passed the cap: it was not a
        call, see `not_a_call`).
        """
        index, held = self.hold_space(buf, pos)
        if not held:
            self.not_a_call()
            return index, ""
        return index, buf[index] if index < len(buf) else ""

    def expect_after_space(
        self, buf: str, pos: int, final: bool, expected: tuple[str, ...]
    ) -> tuple[int, str | None]:
        """Hold the whitespace at ``pos`` (see `hold_space`), then look for one of ``expected``.

        Returns ``(index, found)`` with ``index`` just past the whitespace: ``found`` is the literal that
        starts there, ``""`` when something else does (or the whitespace passed the cap), None when the
        chunk ends first (what is left, a partial literal, is held back until the next chunk).
        """
        index, held = self.hold_space(buf, pos)
        if not held:
            return index, ""
        if index == len(buf):
            return index, None
        for literal in expected:
            if buf.startswith(literal, index):
                return index, literal
        if not final:
            rest = len(buf) - index
            for literal in expected:
                if rest < len(literal) and literal.startswith(buf[index:]):
                    expect = self._expect
                    if expect is None or expect[0] != self.state or expect[1] is not expected:
                        self._expect = (self.state, expected, max(map(len, expected)))
                    return index, None  # held back: `shortcut` extends it while it grows
        return index, ""

    def hold_header(self, text: str) -> bool:
        """Add ``text`` to the header and hold it with the tentative text; False (the header dropped)
        once the held text passed the cap: the caller then releases the tentative text."""
        self._header_parts.append(text)
        self._header_chars += len(text)
        if self.hold_tentative(text):
            return True
        self.take_header()
        return False

    def take_tentative(self) -> str:
        """The held tentative text, now no longer held."""
        parts, self.tentative = self.tentative, None
        return "".join(parts) if parts else ""

    def release_tentative(self) -> None:
        """It was not a call after all: the held text goes out as text."""
        self.emit_text(self.take_tentative())

    def not_a_call(self) -> None:
        """What was held since a possible opener was text: release it, back to the text state."""
        self.release_tentative()
        self.state = self.start

    def skip_to(self, buf: str, pos: int, final: bool, markers: Markers) -> tuple[int, str | None]:
        """Drop the text up to the first of ``markers`` (what a format ignores between its tags);
        ``(resume, marker)``.

        The state that calls it must do nothing else with text that holds none of ``markers`` (nor the
        start of one at its end): `shortcut` drops such text without running the state.
        """
        self._stream = (self.state, markers, SKIP)
        _stop, resume, marker = markers.find(buf, pos, final)
        return resume, marker

    def switch_to_header(self, state: State, markers: Markers) -> None:
        """Switch to ``state``, which begins with `collect_header` up to ``markers``: from the next
        chunk on, `shortcut` may stand in for it before it ever ran."""
        self.state = state
        self._stream = (state, markers, HEADER)

    def switch_to_value(self, state: State, markers: Markers) -> None:
        """Switch to ``state``, which begins with `stream_value` up to ``markers`` (see
        `switch_to_header`)."""
        self.state = state
        self._stream = (state, markers, VALUE)

    def switch_to_skip(self, state: State, markers: Markers) -> None:
        """Switch to ``state``, which begins with `skip_to` up to ``markers`` (see
        `switch_to_header`)."""
        self.state = state
        self._stream = (state, markers, SKIP)

    def collect_header(self, buf: str, pos: int, final: bool, markers: Markers) -> tuple[int, str | None]:
        """Collect a header (a name, an id, tag attributes) up to the first of ``markers``.

        Returns ``(resume, marker)``: ``marker`` is None while more input is needed, ``""`` when the header
        passed `HEADER_LIMIT` (the caller gives up on the call). `take_header` gives
        the text. The state that calls it must call it first and do nothing else with text in which none
        of ``markers`` can start: `shortcut` collects such text without running the state.
        """
        self._stream = (self.state, markers, HEADER)
        stop, resume, marker = markers.find(buf, pos, final)
        if stop > pos:
            self._header_parts.append(buf[pos:stop])
            self._header_chars += stop - pos
            if self._header_chars > HEADER_LIMIT:
                return stop, ""
        return resume, marker

    def take_header(self) -> str:
        """The header collected so far (and no longer held)."""
        text = "".join(self._header_parts)
        self._header_parts.clear()
        self._header_chars = 0
        return text

    def start_xml_call(self, name: str, call_id: str | None = None, *, strip: str = "newline") -> None:
        """Open a call whose XML-style parameters `xml_args` turns into JSON."""
        self.start_call(name, call_id)
        self.xml_args = XmlArguments(self.emit_args, strip=strip, limit=self.options.max_buffered_chars)

    def begin_value(self, key: str, value_type: ValueType | None = None) -> None:
        """Start parameter ``key`` of the open XML call; its type from the tool's schema unless given."""
        if self.xml_args is None:
            return
        if value_type is None:
            schemas = self.options.tool_schemas
            value_type = value_type_from_schema(schemas.get(self.call_name), key) if schemas else "auto"
        self.xml_args.begin(key, value_type)

    def stream_value(
        self, buf: str, pos: int, final: bool, markers: Markers, kept: frozenset[str] = frozenset()
    ) -> tuple[int, str | None]:
        """Stream a parameter value up to the first of ``markers``, which ends it; ``(resume, marker)``.

        A marker in ``kept`` starts with a newline that belongs to the value (the value sees it as if the
        marker were its rest: a marker with a newline before it is recognised a chunk earlier).
        The state that calls it must do nothing else with text that holds none of ``markers`` (nor the
        start of one at its end): `shortcut` streams such text without running the state.
        """
        self._stream = (self.state, markers, VALUE)
        stop, resume, marker = markers.find(buf, pos, final)
        xml_args = self.xml_args
        if xml_args is not None:
            if marker is not None and marker in kept:
                stop += 1
            if stop > pos:
                xml_args.value(buf[pos:stop])
            if marker is not None:
                xml_args.end_value()
        return resume, marker

    def end_xml_call(self, finished: bool = True) -> None:
        """Close the open XML call's last value and its object, then the call."""
        xml_args = self.xml_args
        if xml_args is not None:
            if xml_args.in_value:
                xml_args.end_value()
            xml_args.close()
        self.end_call(finished)

    def stream_text(
        self, buf: str, pos: int, final: bool, markers: Markers, channel: Channel | None = None
    ) -> tuple[int, str | None]:
        """Pass text through up to the first of ``markers`` (on ``channel``, see `emit_text`);
        ``(resume, marker)``."""
        stop, resume, marker = markers.find(buf, pos, final)
        if stop > pos:
            self.emit_text(buf[pos:stop], channel)
        return resume, marker

    def stream_free_args(self, buf: str, pos: int, final: bool, markers: Markers) -> tuple[int, str | None]:
        """Stream a ``custom`` call's free-text input up to the first of ``markers``; ``(resume, marker)``.

        The state that calls it must do nothing else with text that holds none of ``markers`` (nor the
        start of one at its end): `shortcut` streams such text without running the state.
        """
        self._stream = (self.state, markers, FREE)
        stop, resume, marker = markers.find(buf, pos, final)
        if stop > pos:
            self.emit_args(buf[pos:stop])
        return resume, marker

    def begin_raw_string(self) -> None:
        """What follows is raw text (a file's content) going into a JSON string of the open call's
        arguments: `stream_raw_string` streams it. One newline right after the opener is not part
        of it."""
        self._skip_newline = True

    def stream_raw_string(self, buf: str, pos: int, final: bool, markers: Markers) -> tuple[int, str | None]:
        """Stream raw text up to the first of ``markers`` into the arguments, JSON-escaped;
        ``(resume, marker)``."""
        if self._skip_newline:
            self._skip_newline = False
            if buf[pos] == "\n":
                pos += 1
                if pos == len(buf):
                    return pos, None
        stop, resume, marker = markers.find(buf, pos, final)
        if stop > pos:
            self.emit_args(json_escape(buf[pos:stop]))
        return resume, marker

    def stream_json_args(self, buf: str, pos: int, final: bool, markers: Markers) -> tuple[int, str | None]:
        """Stream JSON arguments from ``buf[pos:]`` until one of ``markers`` outside a JSON string.

        Returns ``(resume, marker)``; ``marker`` is None when more input is needed. The state that calls
        it must do nothing else with text in which none of ``markers`` can start: `shortcut` streams
        such text without running the state.
        """
        self._stream = (self.state, markers, JSON)
        json_args = self.json_args
        if json_args is None:
            json_args = self.json_args = JsonArgs()
        size = len(buf)
        if size - pos <= SHORT_PIECE:  # (longer: one scan, no copy of the rest)
            rest = buf[pos:] if pos else buf
            if markers.cannot_start_in(rest):  # (a short rest without a marker: as the fast path takes it)
                self.emit_args(json_args.take(rest, markers))
                return size, None
        stop, resume, marker = json_args.scan(buf, pos, markers, final)
        if stop > pos:
            self.emit_args(json_args.trim(buf[pos:stop]))
        return resume, marker

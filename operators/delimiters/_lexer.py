"""The delimiter lexer engine: :class:`FormatLexer`, its helpers and its shortcut.

Some models write their tool calls into the text itself, between delimiter tokens (Kimi-K2's
``<|tool_call_begin|>``, DeepSeek's ``<\uff5ctool\u2581call\u2581begin\uff5c>``, Qwen's ``<tool_call>``, ...).
:class:`~operators.delimiters.rewriter.DelimiterRewriter` moves those calls out of ``content`` and
``reasoning`` into :class:`~pipeline.models.ToolCallDelta`\\ s and passes every other character through, in
order.

How it works
============

Each channel (``content``, ``reasoning``) has its own :class:`FormatLexer`: a small state machine over the
text whose current state is a method ``state(buf, pos, final) -> int``. ``buf`` is the text held back
from the previous chunk followed by the new chunk; the state consumes ``buf[pos:]`` as far as it can
decide, emits text or call pieces, possibly switches ``self.state``, and returns where it stopped. When a
state returns ``pos`` without switching state, the rest of ``buf`` is held back until the next chunk (it
could still become a marker): handlers only do that for a bounded suffix (a partial marker, a few
characters), so nothing is rescanned more than a bounded number of times. With ``final=True`` (end of
input) a state must consume everything. Markers are found with :class:`~._scan.Markers` (one compiled
alternation per state, searched from ``pos`` only), JSON arguments are followed with
:class:`~._scan.JsonArgs`, XML-style parameters are converted with :class:`~._scan.XmlArguments`.

A lexer reports through these methods, and the rewriter packs the results into chunks, keeping the
order: ``emit_text(text, channel=None)`` (``channel`` when the format decides where text belongs),
``start_call(name, call_id=None, kind="function")`` (the index is the next position in the response, the
id comes from ``id_factory`` when ``call_id`` is ``None``; ``kind="custom"`` for free-text input),
``emit_args(text)``, ``end_call(finished)`` (``finished=False`` when the call was cut off; a finished
function call that never emitted arguments gets ``{}``).

Most chunks never reach the states: :meth:`FormatLexer.shortcut` decides at once what a chunk that is the
next piece of one channel does when that is plain (text in the text state with no marker in it goes on as
the same chunk; a piece of a JSON string of the arguments, or of JSON arguments in which no end marker
can start, or of free-text input, becomes its delta; a piece of a header or of an XML-style value goes
where the state would put it), leaving the lexer as the states would. Most of those never reach the
shortcut either: after each run of a lexer, :meth:`FormatLexer.fast_path` gives a rule (a few characters or
character pairs, and what a chunk without them does) that the rewriter applies to the next chunks of that
channel until the lexer runs again (an XML-style value's rule stays the rule through the start of a
marker held back: :meth:`FormatLexer.value_chunk`); ``tests/test_delimiters_fast_paths_equal.py`` checks
that the rules, the shortcut and the states give the same chunks.

How to add a format
===================

1. Create ``operators/delimiters/formats/<family>.py``. Every public module of ``formats`` is imported by
   ``formats/__init__.py``, so nothing else needs editing.
2. Subclass the closest building block, set ``name`` (and ``aliases``), ``markers`` (every literal, for
   the tests), ``end_marker_optional`` if a call whose JSON is complete may lack its end marker at the
   end of the stream, and decorate the class with ``@register_format`` (``._registry``). The building blocks:

   - :class:`FormatLexer`: the engine and the helpers (``collect_header`` for a bounded name or id,
     ``stream_json_args`` for JSON arguments that end at a marker outside a JSON string,
     ``start_xml_call`` / ``begin_value`` / ``stream_value`` / ``end_xml_call`` for XML-style
     parameters, ``begin_raw_string`` / ``stream_raw_string`` for a file's raw text,
     ``hold_tentative`` / ``release_tentative`` / ``not_a_call`` for text held while deciding,
     ``hold_space`` / ``char_after_space`` / ``expect_after_space`` for whitespace held before what
     decides it).
   - ``_families.SectionLexer``: calls inside a section (``<|tool_calls_section_begin|> ... _end|>``); the
     section opener is confirmed by the first call, whitespace between calls dropped (Kimi, DeepSeek).
   - ``_families.TaggedCallLexer``: one block per call opened by a plain-text tag such as ``<tool_call>``,
     confirmed by what follows it (Hermes, Qwen3-Coder, GLM; ``read_name`` for the name after it).
   - ``_wrapped.WrappedJsonLexer``: a call written as ``{"name": ..., "arguments": {...}}``, alone or
     in a list (Hermes, Mistral, Llama 3, json).
   - ``_invoke.InvokeSectionLexer``: ``<invoke name=..><parameter name=..>V</parameter></invoke>``
     sections (MiniMax-M2, DeepSeek DSML).

3. Set ``text_markers`` (what the text state, :meth:`FormatLexer.start`, stops at) and write
   ``opened(marker)`` (switch to what the marker opens), plus one method per state
   ``state(self, buf, pos, final) -> int``, with module-level :class:`~._scan.Markers` constants per
   state; a typical state::

       def _arguments(self, buf: str, pos: int, final: bool) -> int:
           resume, marker = self.stream_json_args(buf, pos, final, _ARGUMENTS)
           if marker is not None:
               self.close_call(marker)
           return resume

   A state that calls ``collect_header``, ``stream_json_args``, ``stream_value`` or ``stream_free_args``
   calls it first and does nothing else with text that holds none of the given markers (the shortcut
   stands in for such a state, see :meth:`FormatLexer.shortcut`).

4. Override ``at_end()`` when the format has something to release at the end of the input (the default
   releases held tentative text and ends an open call as cut off, or finished if ``end_marker_optional``
   and its JSON is complete).
5. Say in the class docstring what cannot be told apart (a marker written in prose, a closing tag inside
   an argument value).
6. Bounds: a lexer holds at most a partial marker, a header of :data:`~._scan.HEADER_LIMIT` characters
   (past it the text is not a call and goes out as text) and, per XML value, ``max_buffered_chars``.
7. Test it with ``tests/delimiter_cases.py`` (``assert_chunking_invariant`` feeds a text whole, one
   character at a time, split around every marker, and at random splits; ``run`` gives the text per
   channel and the calls).
8. Only for speed, once it works: states the engine's shortcut does not know may get a ``shortcut`` and
   ``fast_path`` of the format's own (harmony's headers and bodies; ``grow_rule`` while a marker's start
   is held), and a rule's ``complete`` may take a marker that the states would (Qwen3-Coder's rules for
   the tags around its values, ``value_rule(complete)`` for ``</parameter>``, and its calls' openings).
   Each must do exactly what the states do (``tests/test_delimiters_fast_paths_equal.py``), and one that
   leaves plain text must not run while ``watched`` (a guard for unknown tools keeps the raw text from
   there).
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
    common_char,
    escape_json_text,
    json_escape,
    space_end,
    value_type_from_schema,
)
from pipeline.models import ToolCallDelta, ToolCallKind

__all__ = [
    "DEFAULT_MAX_BUFFERED_CHARS",
    "Channel",
    "FastPath",
    "FormatLexer",
    "LexerOptions",
    "LexerOutput",
    "State",
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
    """Cap on the characters held for one call; see :class:`~._scan.XmlArguments`."""


class LexerOutput(Protocol):
    """Where a lexer reports what it found, in order; the rewriter packs it into chunks
    (:class:`~operators.delimiters.rewriter.DelimiterRewriter`)."""

    def text(self, channel: Channel, text: str) -> None:
        """Text of ``channel`` that passes through."""

    def start_call(self, name: str, call_id: str | None, kind: ToolCallKind = "function") -> int:
        """A call starts; returns its position in the response (``call_id`` None: one is generated)."""
        ...

    def args(self, index: int, text: str) -> None:
        """Arguments text of call ``index``."""

    def end_call(self, index: int) -> None:
        """Call ``index`` is finished."""


class FastPath:
    """How the next chunk of a channel goes when it holds none of ``stops`` and does not end with a
    character of ``tail`` (see :meth:`FormatLexer.fast_path`): on as it is (``passes``), as text of the
    other channel (``route``), into a header (``collect`` takes it: True; refuses it past the cap:
    False, the shortcut looks at it; or None: the states take it), into the JSON arguments of call
    ``index`` (``json_args``: a piece of a string, or, with ``markers``, JSON text in which none of the
    end markers can start), or into the XML-style value of call ``index`` that ``xml_args`` writes.

    ``stopped_by_states``: a chunk that holds one of ``stops`` goes straight to the states (the shortcut
    could not take it). ``complete``: a chunk that the states would take (``collect`` gave None, or
    ``stopped_by_states``) is offered to it first: True when it did what the states do (the format's
    own way past a marker; its output is packed and the rule made again), False: the states take it.

    ``piece``: a chunk the rule does not take goes to it instead of the shortcut, with what the shortcut
    gives (False: ``complete``, then the states, take it); the rule stays the rule (an XML-style value's
    rule, which takes the held start of a marker itself: :meth:`FormatLexer.value_chunk`). ``common``: a
    character each of ``stops`` holds (a chunk without it holds none of them), else ``""`` (every chunk is
    looked at); ``tail`` is ``""`` when no last character is refused (both tested with ``in`` alone)."""

    __slots__ = (
        "collect",
        "common",
        "complete",
        "ends_plain",
        "holds",
        "index",
        "json_args",
        "kind",
        "markers",
        "passes",
        "piece",
        "route",
        "stopped_by_states",
        "stops",
        "tail",
        "xml_args",
    )

    def __init__(
        self,
        stops: tuple[str, ...],
        tail: str | None = None,
        index: int | None = None,
        kind: ToolCallKind = "function",
        *,
        route: Channel | None = None,
        collect: Callable[[str], bool | None] | None = None,
        json_args: JsonArgs | None = None,
        markers: Markers | None = None,
        xml_args: XmlArguments | None = None,
        holds: bool = False,
        stopped_by_states: bool = False,
        complete: Callable[[str], bool] | None = None,
        piece: Callable[[str], ToolCallDelta | bool | None] | None = None,
    ) -> None:
        self.stops = stops
        self.common = common_char(stops)
        self.tail = tail or ""
        self.index = index
        self.kind = kind
        self.route = route
        self.collect = collect
        self.json_args = json_args
        self.markers = markers
        self.xml_args = xml_args
        self.passes = index is None and route is None and collect is None
        self.holds = holds
        """``collect`` holds the text back (the start of a marker growing) rather than taking it."""
        self.stopped_by_states = stopped_by_states
        self.complete = complete
        self.piece = piece
        self.ends_plain = _ends_plain(xml_args, self.tail)
        """A piece of a string value that the rule takes never ends with whitespace the value may strip
        (a newline ends none: it is in ``tail``)."""

    def hold(self, held: bool) -> None:
        """This rule of an XML-style value while the start of a marker is ``held`` (every chunk goes to
        ``piece``) or not (a chunk without the start of a marker is taken)."""
        markers = self.markers
        assert markers is not None  # (see FormatLexer.value_rule)
        if held:
            self.stops, self.common = _EVERY, ""
        else:
            self.stops, self.common = markers.starts, markers.common

    def follow(self, index: int, kind: ToolCallKind, xml_args: XmlArguments) -> None:
        """Make this rule of an XML-style value the rule of call ``index``'s values, which ``xml_args``
        writes (one rule serves a lexer's values, call after call: :meth:`FormatLexer.value_rule`)."""
        self.index = index
        self.kind = kind
        self.xml_args = xml_args
        self.ends_plain = _ends_plain(xml_args, self.tail)


def _ends_plain(xml_args: XmlArguments | None, tail: str) -> bool:
    """:attr:`FastPath.ends_plain` of a rule with ``xml_args`` and ``tail``."""
    return xml_args is not None and "\n" in tail and not xml_args.strips_space


_ANYTHING: Final = re.compile("")
"""Matches at the start of any text."""

_EVERY: Final = ("",)
"""Stops that every chunk holds: a rule with them takes no chunk itself."""


def _dropped(text: str) -> bool:
    """Text a format ignores between its tags (see :meth:`FormatLexer.skip_to`): taken, and dropped."""
    return True


_QUOTE: Final = ('"',)
"""What ends a run of JSON string content."""

_HEADER: Final = "header"
_JSON: Final = "json"
_VALUE: Final = "value"
_FREE: Final = "free"
_SKIP: Final = "skip"
"""The streaming helpers :meth:`FormatLexer.shortcut` can stand in for (see ``FormatLexer._stream``)."""


_LITERAL_PREFIXES: dict[tuple[str, ...], frozenset[str]] = {}


def _literal_prefixes(literals: tuple[str, ...]) -> frozenset[str]:
    """Every proper prefix of ``literals`` (cached: a format expects a few fixed tuples)."""
    prefixes = _LITERAL_PREFIXES.get(literals)
    if prefixes is None:
        prefixes = frozenset(literal[:size] for literal in literals for size in range(1, len(literal)))
        if len(_LITERAL_PREFIXES) < 256:
            _LITERAL_PREFIXES[literals] = prefixes
    return prefixes


class FormatLexer:
    """One channel's lexer for one format: a state machine over the channel's text (see the module doc)."""

    # Slots: every chunk reads a few of these; a format's subclass keeps its own attributes in a __dict__.
    __slots__ = (
        "__dict__",
        "__weakref__",
        "_call_has_args",
        "_expect",
        "_fast",
        "_grow_ends",
        "_grow_fast",
        "_grow_prefixes",
        "_header_chars",
        "_header_fast",
        "_header_parts",
        "_held",
        "_output",
        "_skip_fast",
        "_skip_newline",
        "_stream",
        "_tentative_size",
        "_text_fast",
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
    end_marker_optional: ClassVar[bool] = False
    """A call whose JSON arguments are complete counts as finished at the end of the input even without
    its end marker (Kimi's tool section that never closes)."""
    markers: ClassVar[tuple[str, ...]] = ()
    """Every literal the format uses, for tests that split the input around each of them."""
    text_markers: ClassVar[Markers]
    """What the text state (:meth:`start`) stops at; text with none of their first characters passes
    through that state untouched (the rewriter's fast path, :meth:`shortcut`)."""

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
        self._text_fast = FastPath(self.text_markers.starts, self.text_markers.tail)
        self._fast: FastPath | None = None
        """The last rule for arguments :meth:`fast_path` made, reused while it holds."""
        self._header_fast: FastPath | None = None
        self._skip_fast: FastPath | None = None
        self._grow_fast = FastPath((), collect=self._grow_held, holds=True)
        self._grow_prefixes: frozenset[str] = frozenset()
        """What the held start of a marker may grow into while :attr:`_grow_fast` is the rule."""
        self._grow_ends: re.Pattern[str] | None = None
        """While :attr:`_grow_fast` is the rule: matches at the start of the held text and the next
        chunk when the states must take them (the held start became what it was the start of: the
        shortcut would give up on it), None when the shortcut may take them."""
        self._expect: tuple[State, tuple[str, ...], int] | None = None
        """The state that last held the start of a literal it expects after whitespace
        (:meth:`expect_after_space`), the literals and the longest length."""
        self.naming: tuple[State, re.Pattern[str]] | None = None
        """The state that last read a name to the end of a chunk (``_families.TaggedCallLexer.read_name``)
        and what ends the name: :meth:`shortcut` holds the next piece of the name as the state would."""
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

    def shortcut(self, text: str) -> ToolCallDelta | bool | None:
        """What ``text``, all of the next piece of this channel, does without running the states, when
        that is known at once; the rewriter's fast path (the lexer ends as lexing would leave it):

        - True: it goes out unchanged as text (the lexer is in its text state holding nothing, and
          ``text`` holds none of ``text_markers`` nor the start of one at its end);
        - a delta: it goes into the open call's arguments (JSON: it has no quote and stays inside a
          string, or the state streaming the arguments cannot meet an end marker in it; free text: the
          state streaming it cannot meet an end marker in it);
        - None: what it gives, if anything yet, went to the output as the states would emit it
          (whitespace of the arguments held back, a header collected by the state collecting it, an
          XML-style value streamed by the state streaming it, when no end marker can be in it);
        - False: it has to be lexed.

        A start of a marker held back from the previous chunk is extended while it stays one (None), and
        so is the start of the literal a state expects after whitespace (:meth:`expect_after_space`).
        """
        json_args = self.json_args
        index = self.call_index
        if json_args is None and self.xml_args is not None and index is not None and text:
            # The next piece of an XML-style value (most pieces of such a call).
            stream = self._stream
            if stream is not None and stream[2] is _VALUE and self.state == stream[0]:
                return self.value_chunk(text)
        held = self._held
        if held:
            return self._held_shortcut(held, held + text)
        if json_args is None:
            if self.state == self._text_state:
                if self.tentative is not None:
                    return False
                text_markers = self.text_markers
                for char in text_markers.first_chars:  # most text has none of them: decided without a call
                    if char in text:
                        return self._text_piece(text, text_markers)
                return True
        elif index is not None:
            # Inside a string with no quote or backslash to follow (most pieces of a call): nothing changes.
            plain = json_args.in_string and not json_args.escape and '"' not in text and "\\" not in text
            if plain or json_args.take_in_string(text):
                self._call_has_args = True
                return ToolCallDelta(index, None, None, text, False, self.call_kind)
        return self._stream_shortcut(text, json_args, index)

    def fast_path(self) -> FastPath | None:
        """What the next chunk of this channel does if it holds none of a few characters, decided once
        for every chunk until the lexer runs again (the rewriter's fastest path); None when no such rule
        holds. Each rule is what :meth:`shortcut` does with such a chunk: the text state (nothing held,
        nothing tentative) passes text without a marker, JSON arguments take a piece of a string
        without a quote (following its backslashes) or JSON text in which no end marker can start, an
        XML-style value takes text without a marker (a piece of a string value as its JSON escape), a
        header takes text in which no marker can start, up to its cap, and text a format skips between
        its tags is dropped when it holds no marker."""
        if self._held:
            # The start of a marker (or of a literal a state expects) held back: the next chunk that only
            # extends it is held with it, as :meth:`_held_shortcut` would.
            markers = self.partial_markers()
            if markers is not None:
                value = None if self.xml_args is None else self.value_rule()
                return self.grow_rule(markers) if value is None else value
            expect = self._expect
            if expect is not None and self.state == expect[0]:
                # (the shortcut only grows it: whatever else comes goes to the states, _held_shortcut)
                return self._grow(_literal_prefixes(expect[1]), _ANYTHING, None)
            return None
        if self.tentative is not None:
            return None
        index = self.call_index
        json_args = self.json_args
        stream = self._stream
        streaming = stream is not None and self.state == stream[0]
        if json_args is not None:
            if index is None or not self._call_has_args:
                return None
            markers = stream[1] if streaming and stream is not None and stream[2] is _JSON else None
            if markers is None and not json_args.in_string:
                return None
            fast = self._fast
            if (
                fast is None
                or fast.index != index
                or fast.json_args is not json_args
                or fast.markers is not markers
            ):
                fast = self._fast = FastPath(
                    (), None, index, self.call_kind, json_args=json_args, markers=markers
                )
            return fast
        if self.state == self._text_state:
            return self._text_fast
        if not streaming or stream is None:
            return None
        helper = stream[2]
        markers = stream[1]
        if helper is _VALUE:
            return self.value_rule()
        if helper is _HEADER:
            fast = self._header_fast
            if fast is None or fast.stops is not markers.first_chars:
                # (a marker can start in text with a stop: the engine's shortcut never takes it)
                fast = self._header_fast = FastPath(
                    markers.first_chars, collect=self._collect_header, stopped_by_states=True
                )
            return fast
        if helper is _SKIP:
            fast = self._skip_fast
            if fast is None or fast.stops is not markers.starts:
                fast = self._skip_fast = FastPath(markers.starts, markers.tail, collect=_dropped)
            return fast
        return None

    def value_rule(self, complete: Callable[[str], bool] | None = None) -> FastPath | None:
        """The rule of the XML-style value being streamed (None: no such value, or it is not yet part of
        the arguments): a piece without a marker or the start of one goes into it (a string's piece as
        its JSON escape, in one delta), any other chunk to :meth:`value_chunk`, also while the start of a
        marker is held (the rule holds none of ``stops`` then). The same rule object is kept for the
        value: :meth:`value_chunk` sets its ``stops`` as it holds or releases. ``complete``: the format's
        way past a marker (see :class:`FastPath`)."""
        stream = self._stream
        xml_args = self.xml_args
        index = self.call_index
        if (
            stream is None
            or stream[2] is not _VALUE
            or self.state != stream[0]
            or xml_args is None
            or index is None
            or not self._call_has_args
            or self.tentative is not None
        ):
            return None
        markers = stream[1]
        fast = self._fast
        if fast is not None and fast.piece is not None and fast.markers is markers:
            if fast.index != index or fast.xml_args is not xml_args:
                fast.follow(index, self.call_kind, xml_args)
        else:
            fast = self._fast = FastPath(
                markers.starts,
                markers.tail,
                index,
                self.call_kind,
                xml_args=xml_args,
                markers=markers,
                piece=self.value_chunk,
            )
        fast.hold(bool(self._held))
        fast.complete = complete
        return fast

    def value_chunk(self, text: str) -> ToolCallDelta | bool | None:
        """:meth:`shortcut` for ``text``, all of the next piece of the value the state streams (the value
        rule's ``piece``, see :meth:`value_rule`): held with the start of a marker held back while they
        are still one; False when a marker starts them or is in them; else a string's piece (the start
        of a marker at its end held back) as its delta, or None: taken by the value's writer (whitespace
        at the end, perhaps not part of the value; a value held to be typed) or held."""
        held = self._held
        stream = self._stream
        xml_args = self.xml_args
        index = self.call_index
        assert stream is not None  # (the value's state)
        assert xml_args is not None
        assert index is not None
        markers = stream[1]
        common = markers.common
        if held:
            text = held + text
            if text in markers.prefixes:
                self._held = text
                return None
            if common in text and markers.pattern.match(text) is not None:
                return False  # (the held start became its marker: most often)
        if common not in text:
            # No marker starts in it (Markers.find, without the search): perhaps at its last character.
            tail = markers.tail
            stop = len(text) - 1 if tail is not None and text[-1] in tail else len(text)
        elif text in markers.prefixes:  # (all of it the start of one: "\n</p" before "</parameter>")
            stop = 0
        else:  # (a held start that neither grew nor became its marker starts none: looked for after it)
            stop, _resume, marker = markers.find(text, 1 if held else 0, False)
            if marker is not None:
                return False
        fast = self._fast
        if stop < len(text):
            self._held = text[stop:]
            text = text[:stop]
        else:
            self._held = ""
        if fast is not None and fast.xml_args is xml_args:  # (the rule stays the rule: see value_rule)
            fast.hold(bool(self._held))
        if not text:
            return None
        last = text[-1]
        if not xml_args.streaming or last == "\n" or (xml_args.strips_space and last.isspace()):
            xml_args.value(text)
            return None
        self._call_has_args = True
        if not text.isprintable() or '"' in text or "\\" in text:  # (json_escape's test, inline)
            text = escape_json_text(text)
        return ToolCallDelta(index, None, None, text, False, self.call_kind)

    def grow_rule(
        self,
        markers: Markers,
        *,
        completed_by_states: bool = True,
        complete: Callable[[str], bool] | None = None,
    ) -> FastPath:
        """The rule while the start of one of ``markers`` is held back: the next chunk that only extends
        it is held with it (a format's :meth:`fast_path` for the states it writes itself).

        ``completed_by_states``: a chunk that completes the marker goes to ``complete``, if given, then
        to the states (False: to :meth:`shortcut`, when the format's shortcut takes some completed
        markers itself)."""
        return self._grow(markers.prefixes, markers.pattern if completed_by_states else None, complete)

    def _grow(
        self, prefixes: frozenset[str], ends: re.Pattern[str] | None, complete: Callable[[str], bool] | None
    ) -> FastPath:
        """:attr:`_grow_fast`, set to grow the held text into ``prefixes`` (see :attr:`_grow_ends`)."""
        self._grow_prefixes = prefixes
        self._grow_ends = ends
        self._grow_fast.complete = complete
        return self._grow_fast

    def _grow_held(self, text: str) -> bool | None:
        """Hold ``text`` with the held start of a marker when together they are still the start of one
        (the rule :meth:`fast_path` gives while something is held): True. None when they start with
        the marker (or literal) itself, which the states take; False: it has to be looked at."""
        longer = self._held + text
        if longer in self._grow_prefixes:
            self._held = longer
            return True
        ends = self._grow_ends
        if ends is not None and ends.match(longer) is not None:
            return None
        return False

    def _collect_header(self, text: str) -> bool:
        """Add ``text``, in which no marker of the state collecting a header can start, to the header,
        unless that passes the cap (False)."""
        size = self._header_chars + len(text)
        if size > HEADER_LIMIT:
            return False
        self._header_parts.append(text)
        self._header_chars = size
        return True

    def _held_shortcut(self, held: str, longer: str) -> ToolCallDelta | bool | None:
        """:meth:`shortcut` when the start of a marker was held back: ``longer`` is it and the new text.

        While ``longer`` can still grow into a marker it is held. When it holds no marker and no start of
        one at its end, the text state and the states streaming a value or free text pass it all, as
        they would have had they seen it in one piece."""
        markers = self.partial_markers()
        if markers is None:
            expect = self._expect
            if expect is not None and self.state == expect[0] and len(longer) < expect[2]:
                for literal in expect[1]:  # the start of what the state expects, still growing into it
                    if literal.startswith(longer) and len(longer) < len(literal):
                        self._held = longer
                        return None
            return False
        if markers.may_grow(longer, 0):
            self._held = longer
            return None
        if self.state == self._text_state:
            if self.tentative is not None or not markers.absent_from(longer):
                return False
            self._held = ""
            self.emit_text(longer)
            return None
        stream = self._stream
        if stream is None or stream[2] is _JSON or stream[2] is _HEADER:
            return False
        self._held = ""
        shortcut = self._stream_shortcut(longer, self.json_args, self.call_index)
        if shortcut is False:
            self._held = held
        return shortcut

    def _hold_marker_start(self, text: str, markers: Markers) -> str | None:
        """What a state streaming up to ``markers`` takes of ``text``: all of it, or what comes before
        the start of a marker at its end (that start is held back, as the state holds it); None when a
        marker is in ``text`` (nothing held: it has to be lexed)."""
        stop, _resume, marker = markers.find(text, 0, False)
        if marker is not None:
            return None
        if stop < len(text):
            self._held = text[stop:]
            return text[:stop]
        return text

    def _text_piece(self, text: str, markers: Markers, channel: Channel | None = None) -> bool | None:
        """:meth:`shortcut` for ``text``, the next piece of text that a state streams up to ``markers``
        (as :meth:`stream_text`) and that holds the start of one: True when it is none (``text`` goes
        on as it is), None when a marker may begin at its end (that is held and what comes before it
        emitted), False when a marker is in it."""
        taken = self._hold_marker_start(text, markers)
        if taken is None:
            return False
        if taken is text:
            return True
        self.emit_text(taken, channel)
        return None

    def _stream_shortcut(
        self, text: str, json_args: JsonArgs | None, index: int | None
    ) -> ToolCallDelta | bool | None:
        """:meth:`shortcut` in a state that streams with one of the helpers it knows (``_stream``)."""
        stream = self._stream
        if stream is None or self.state != stream[0]:
            naming = self.naming
            if (  # the next piece of a name, held with the tentative text up to the cap (read_name)
                naming is not None
                and self.state == naming[0]
                and self._tentative_size + len(text) <= HEADER_LIMIT
                and naming[1].search(text) is None
            ):
                self.hold_header(text)
                return None
            return False
        _state, markers, helper = stream
        if helper is _JSON:
            if json_args is None or index is None:
                return False
            if markers.cannot_start_in(text):
                text = json_args.take(text, markers)  # no marker can start in it: nothing to hold back
            else:
                marker = markers.find(text, 0, False)[2]
                if marker is not None:
                    return False  # (perhaps in a string: the state decides)
                stop, resume, _none = json_args.scan(text, 0, markers, False)
                if resume < len(text):
                    self._held = text[resume:]  # the start of a marker, outside a string: held
                text = json_args.trim(text[:stop])
            if not text:
                return None
            self._call_has_args = True
            return ToolCallDelta(index, None, None, text, False, self.call_kind)
        if helper is _HEADER:
            size = self._header_chars + len(text)
            if size > HEADER_LIMIT or not markers.cannot_start_in(text):
                return False
            self._header_parts.append(text)
            self._header_chars = size
            return None
        if helper is _SKIP or helper is _VALUE:
            taken = self._hold_marker_start(text, markers)
            if taken is None:
                return False
            if helper is _VALUE and taken:
                xml_args = self.xml_args
                if xml_args is not None:
                    xml_args.value(taken)
            return None
        if not markers.absent_from(text):
            return False
        if index is None:  # free-text input
            return False
        self._call_has_args = True
        return ToolCallDelta(index, None, None, text, False, self.call_kind)

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
        :meth:`opened`."""
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
        :data:`~._scan.HEADER_LIMIT` (the caller then gives up and releases it)."""
        if self.tentative is None:
            self.tentative = []
            self._tentative_size = 0
        self.tentative.append(text)
        self._tentative_size += len(text)
        return self._tentative_size <= HEADER_LIMIT

    def hold_space(self, buf: str, pos: int) -> tuple[int, bool]:
        """Hold the whitespace at ``pos`` with the tentative text: where it ends, and False once the held
        text passed the cap (as :meth:`hold_tentative`)."""
        index = space_end(buf, pos)
        return index, index == pos or self.hold_tentative(buf[pos:index])

    def char_after_space(self, buf: str, pos: int) -> tuple[int, str]:
        """Hold the whitespace at ``pos`` (see :meth:`hold_space`), then the character after it.

        Returns ``(index, char)`` with ``index`` just past the whitespace; ``char`` is ``""`` when there is
        nothing to look at yet (the chunk ended) or any more (the whitespace passed the cap: it was not a
        call, see :meth:`not_a_call`).
        """
        index, held = self.hold_space(buf, pos)
        if not held:
            self.not_a_call()
            return index, ""
        return index, buf[index] if index < len(buf) else ""

    def expect_after_space(
        self, buf: str, pos: int, final: bool, expected: tuple[str, ...]
    ) -> tuple[int, str | None]:
        """Hold the whitespace at ``pos`` (see :meth:`hold_space`), then look for one of ``expected``.

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
                    return index, None  # held back: :meth:`shortcut` extends it while it grows
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
        start of one at its end): :meth:`shortcut` drops such text without running the state.
        """
        self._stream = (self.state, markers, _SKIP)
        _stop, resume, marker = markers.find(buf, pos, final)
        return resume, marker

    def switch_to_header(self, state: State, markers: Markers) -> None:
        """Switch to ``state``, which begins with :meth:`collect_header` up to ``markers``: from the next
        chunk on, :meth:`shortcut` may stand in for it before it ever ran."""
        self.state = state
        self._stream = (state, markers, _HEADER)

    def switch_to_value(self, state: State, markers: Markers) -> None:
        """Switch to ``state``, which begins with :meth:`stream_value` up to ``markers`` (see
        :meth:`switch_to_header`)."""
        self.state = state
        self._stream = (state, markers, _VALUE)

    def switch_to_skip(self, state: State, markers: Markers) -> None:
        """Switch to ``state``, which begins with :meth:`skip_to` up to ``markers`` (see
        :meth:`switch_to_header`)."""
        self.state = state
        self._stream = (state, markers, _SKIP)

    def collect_header(self, buf: str, pos: int, final: bool, markers: Markers) -> tuple[int, str | None]:
        """Collect a header (a name, an id, tag attributes) up to the first of ``markers``.

        Returns ``(resume, marker)``: ``marker`` is None while more input is needed, ``""`` when the header
        passed :data:`~._scan.HEADER_LIMIT` (the caller gives up on the call). :meth:`take_header` gives
        the text. The state that calls it must call it first and do nothing else with text in which none
        of ``markers`` can start: :meth:`shortcut` collects such text without running the state.
        """
        self._stream = (self.state, markers, _HEADER)
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
        """Open a call whose XML-style parameters :attr:`xml_args` turns into JSON."""
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
        start of one at its end): :meth:`shortcut` streams such text without running the state.
        """
        self._stream = (self.state, markers, _VALUE)
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
        """Pass text through up to the first of ``markers`` (on ``channel``, see :meth:`emit_text`);
        ``(resume, marker)``."""
        stop, resume, marker = markers.find(buf, pos, final)
        if stop > pos:
            self.emit_text(buf[pos:stop], channel)
        return resume, marker

    def stream_free_args(self, buf: str, pos: int, final: bool, markers: Markers) -> tuple[int, str | None]:
        """Stream a ``custom`` call's free-text input up to the first of ``markers``; ``(resume, marker)``.

        The state that calls it must do nothing else with text that holds none of ``markers`` (nor the
        start of one at its end): :meth:`shortcut` streams such text without running the state.
        """
        self._stream = (self.state, markers, _FREE)
        stop, resume, marker = markers.find(buf, pos, final)
        if stop > pos:
            self.emit_args(buf[pos:stop])
        return resume, marker

    def begin_raw_string(self) -> None:
        """What follows is raw text (a file's content) going into a JSON string of the open call's
        arguments: :meth:`stream_raw_string` streams it. One newline right after the opener is not part
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
        it must do nothing else with text in which none of ``markers`` can start: :meth:`shortcut` streams
        such text without running the state.
        """
        self._stream = (self.state, markers, _JSON)
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

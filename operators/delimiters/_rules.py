"""The rules of a channel: what its next chunk of text does when that is decided at once.

After each run of its states (and each chunk its shortcut took), a `FormatLexer` hands
out the rule that applies where it stands (``FormatLexer.rule``): text passes through, is text of the
other channel, goes into a header or a held start of a marker, into JSON arguments, or into an XML-style
value. `Rule.take` gives the chunks of an incoming chunk whose text is all of one channel's next
piece, or None when the lexer's states must take it. A rule leaves the lexer as its states would;
``test_delimiters_fast_path_properties.py`` checks that every rule gives the chunks the states give.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol, TypeAlias

import msgspec

from operators.delimiters._engine import Channel
from operators.delimiters._scan import JsonArgs, Markers, XmlArguments, common_char, escape_json_text
from pipeline.models import ChunkResponse, ToolCallDelta, ToolCallKind

__all__ = [
    "CollectRule",
    "JsonArgsRule",
    "PassRule",
    "RouteRule",
    "Rule",
    "RuleLexer",
    "ShortcutRule",
    "TextRule",
    "ValueRule",
    "carries_more",
    "more_than_text",
]

Chunks = list[ChunkResponse]
Complete: TypeAlias = "Callable[[str], Rule | None]"
"""A format's way past a marker (`CollectRule`): the lexer's rule from there, None when nothing was done."""
_replace: Final = msgspec.structs.replace


class RuleLexer(Protocol):
    """What a rule asks of the lexer that made it (``_lexer.FormatLexer``)."""

    def shortcut_chunks(self, item: ChunkResponse, text: str) -> Chunks | None:
        """The chunks of ``item`` (``text`` alone) when the lexer's shortcut takes ``text``; None: lex it."""
        ...

    rule: Rule
    """The rule of the lexer's next chunk (a rule's ``complete`` gives the one from where it left it)."""

    def emitted(self, item: ChunkResponse) -> Chunks:
        """The chunks of ``item`` from what the lexer emitted for its text."""
        ...

    def take_held(self) -> str:
        """The text held back (the start of a marker), no longer held."""
        ...

    def hold_back(self, text: str) -> None:
        """Hold ``text``, the start of a marker, back until the next chunk."""

    def renew_rule(self) -> None:
        """The lexer moved: make its rule."""

    def value_chunk(self, text: str) -> ToolCallDelta | bool | None:
        """The lexer's shortcut for the next piece of an XML-style value (``FormatLexer.value_chunk``)."""
        ...


def carries_more(item: ChunkResponse) -> bool:
    """Whether ``item`` carries more than its text besides ``is_complete``, ``tool_calls`` and
    ``finish_reason`` (fields that the rewriter passes on unchanged)."""
    if (  # noqa: SIM103 (an ``if`` rather than ``bool(...)``: no call on a path markup takes)
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
    ):
        return True
    return False


def more_than_text(item: ChunkResponse) -> bool:
    """Whether ``item`` carries more than its ``content`` and ``reasoning``: ``is_complete``,
    ``tool_calls`` or ``finish_reason`` (which change the chunks it gives), or `carries_more`."""
    # (carries_more written out: most chunks of markup ask this, and one call fewer is the cheaper path)
    if (  # noqa: SIM103 (an ``if`` rather than ``bool(...)``: no call either)
        item.is_complete
        or item.tool_calls
        or item.finish_reason
        or item.usage
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
    ):
        return True
    return False


class Rule:
    """What a chunk of one channel does without the states, when it holds none of ``stops`` and does
    not end with a character of ``tail``. This base class takes nothing."""

    __slots__ = ("common", "lexer", "stops", "tail")

    holds = False
    """`collect` holds the text back (a marker's start growing) rather than taking it."""

    def __init__(self, lexer: RuleLexer, stops: tuple[str, ...] = (), tail: str | None = None) -> None:
        self.lexer: RuleLexer = lexer
        self.stops = stops
        self.common = common_char(stops)
        """A character every stop holds (a chunk without it holds none of them), else ``""``."""
        self.tail = tail or ""

    def take(self, item: ChunkResponse, text: str) -> Chunks | None:
        """The chunks of ``item``, whose ``text`` is all of the channel's next piece; None: lex it."""
        return None

    def collect(self, text: str) -> bool | None:
        """Take ``text`` into what the lexer gathers, emitting nothing (True); None: the states take
        it; False: the shortcut looks at it. Only the rules that gather text take any."""
        return False

    def stopped(self, text: str) -> bool:
        """Whether ``text`` holds one of ``stops`` or ends with a character of ``tail``."""
        if self.common in text:
            for stop in self.stops:
                if stop in text:
                    return True
        return text[-1] in self.tail

    def gathers(self, text: str) -> bool:
        """`collect` for a chunk without a stop (what a guard of unknown tools lets through)."""
        return not self.stopped(text) and bool(self.collect(text))


class ShortcutRule(Rule):
    """No rule applies: the lexer's shortcut, else its states."""

    __slots__ = ()

    def take(self, item: ChunkResponse, text: str) -> Chunks | None:
        if more_than_text(item):
            return None
        return self.lexer.shortcut_chunks(item, text)


class PassRule(Rule):
    """Text without a marker start goes on as it is (the text state, a harmony message's text)."""

    __slots__ = ()

    def take(self, item: ChunkResponse, text: str) -> Chunks | None:
        if text[-1] in self.tail or (self.common in text and self.stopped(text)):
            return self.stopped_at(item, text)
        if item.reasoning is None:
            # Content goes on as it is: only these fields would change it.
            if item.tool_calls is None and not item.is_complete and item.finish_reason is None:
                return [item]
            return None
        return None if more_than_text(item) else [item]

    def stopped_at(self, item: ChunkResponse, text: str) -> Chunks | None:
        """`take` of text with a stop or the start of one at its end: the shortcut, else the states."""
        return None if more_than_text(item) else self.lexer.shortcut_chunks(item, text)


class TextRule(PassRule):
    """The text state's rule: `PassRule`, and text without a stop that ends with the first character of
    a marker goes on without it, held back as the start of a marker (no longer one can end the text,
    as it would begin with a stop), as the text state's shortcut holds it. Only for markers whose
    ``tail`` is set (none is one character long): a stop ending the text then begins in ``head``."""

    __slots__ = ()

    def stopped_at(self, item: ChunkResponse, text: str) -> Chunks | None:
        head = text[:-1]
        if more_than_text(item) or (head and self.stopped(head)):  # (a stop in it, or ending it)
            return PassRule.stopped_at(self, item, text)
        lexer = self.lexer
        lexer.hold_back(text[-1])
        lexer.renew_rule()
        if not head:
            return []
        if item.reasoning is None:
            return [ChunkResponse(content=head)]
        return [ChunkResponse(content="", reasoning=head)]


class RouteRule(Rule):
    """Text without a marker start is text of the other channel (a harmony analysis message in
    content)."""

    __slots__ = ("route",)

    def __init__(self, lexer: RuleLexer, stops: tuple[str, ...], tail: str | None, route: Channel) -> None:
        super().__init__(lexer, stops, tail)
        self.route: Channel = route

    def take(self, item: ChunkResponse, text: str) -> Chunks | None:
        if more_than_text(item):
            return None
        if self.stopped(text):
            return self.lexer.shortcut_chunks(item, text)
        if self.route == "reasoning":
            return [ChunkResponse(reasoning=text)]
        return [ChunkResponse(content=text)]


class CollectRule(Rule):
    """Text without a stop goes to ``collect``: a header's next piece, the held start of a marker
    growing, text a format drops between its tags, a format's own tags taken as its states take them.

    ``complete``: a chunk that ``collect`` leaves to the states (None) is offered to it first; when it
    did what the states do (the format's own way past a marker) it gives the lexer's rule from there,
    else None (nothing done). ``stopped_by_states``: a chunk with a stop goes to ``complete``, then the
    states, rather than to the shortcut."""

    __slots__ = ("_collect", "complete", "holds", "stopped_by_states")

    def __init__(
        self,
        lexer: RuleLexer,
        collect: Callable[[str], bool | None],
        stops: tuple[str, ...] = (),
        tail: str | None = None,
        *,
        holds: bool = False,
        stopped_by_states: bool = False,
        complete: Complete | None = None,
    ) -> None:
        super().__init__(lexer, stops, tail)
        self._collect = collect
        self.holds = holds
        self.stopped_by_states = stopped_by_states
        self.complete = complete

    def collect(self, text: str) -> bool | None:
        return self._collect(text)

    def take(self, item: ChunkResponse, text: str) -> Chunks | None:
        if more_than_text(item):
            return None
        if (self.stops or self.tail) and self.stopped(text):  # (a rule that gathers anything: no call)
            if self.stopped_by_states:
                return self.completed(item, text)
            return self.lexer.shortcut_chunks(item, text)
        collected = self._collect(text)
        if collected:
            return []
        if collected is None:
            return self.completed(item, text)
        return self.lexer.shortcut_chunks(item, text)

    def completed(self, item: ChunkResponse, text: str) -> Chunks | None:
        """The chunks of ``item`` when ``complete`` takes ``text`` as the states would; None: lex it."""
        complete = self.complete
        if complete is None:
            return None
        rule = complete(text)
        if rule is None:
            return None
        lexer = self.lexer
        lexer.rule = rule
        return lexer.emitted(item)


class JsonArgsRule(Rule):
    """A piece of call ``index``'s JSON arguments: a piece of a string without a quote (its backslashes
    followed), or, with ``markers``, JSON text in which none of the end markers can start."""

    __slots__ = ("index", "json_args", "kind", "markers")

    def __init__(
        self, lexer: RuleLexer, index: int, kind: ToolCallKind, json_args: JsonArgs, markers: Markers | None
    ) -> None:
        super().__init__(lexer)
        self.index = index
        self.kind: ToolCallKind = kind
        self.json_args = json_args
        self.markers = markers

    def take(self, item: ChunkResponse, text: str) -> Chunks | None:
        if item.is_complete or item.tool_calls or item.finish_reason:
            return None
        json_args = self.json_args
        if json_args.in_string and '"' not in text:  # a piece of a string
            if json_args.escape or "\\" in text:
                json_args.follow_string(text)
            delta = ToolCallDelta(self.index, None, None, text, False, self.kind)
            if item.reasoning is None:
                return [_replace(item, content="", tool_calls=[delta])]
            return [_replace(item, reasoning=None, tool_calls=[delta])]
        if carries_more(item):
            return None
        markers = self.markers
        if markers is None or not markers.cannot_start_in(text):
            return self.lexer.shortcut_chunks(item, text)
        text = json_args.take(text, markers)  # no end marker can start in it
        if not text:
            return []
        return [ChunkResponse(tool_calls=[ToolCallDelta(self.index, None, None, text, False, self.kind)])]


class ValueRule(CollectRule):
    """A piece of the XML-style value of call ``index`` that ``xml_args`` writes: without a marker or
    the start of one it goes into the value (a string's piece as its JSON escape, in one delta); any
    other chunk to the lexer's ``value_chunk``, also while the start of a marker is held (the rule's
    stops are every chunk then). One rule serves a lexer's values, call after call (`follow`)."""

    __slots__ = ("ends", "held", "index", "kind", "markers", "unsure", "xml_args")

    def __init__(self, lexer: RuleLexer, markers: Markers) -> None:
        super().__init__(lexer, _never, markers.starts, markers.tail)
        self.markers = markers
        self.index = -1
        self.kind: ToolCallKind = "function"
        self.xml_args = _NO_VALUE
        self.held = ""
        """The start of a marker the lexer holds back (`hold`)."""
        self.unsure = "\n"
        """The characters a piece may end with that the value may strip (the newline before its end
        tag, or any whitespace): such a piece goes to the value's writer."""
        self.ends = self.tail + "\n"
        """The characters of ``tail`` and of ``unsure``: a piece that ends with none of them and holds
        no stop is plain."""

    def follow(self, index: int, kind: ToolCallKind, xml_args: XmlArguments) -> None:
        """Make this the rule of call ``index``'s values, which ``xml_args`` writes."""
        self.index = index
        self.kind = kind
        self.xml_args = xml_args
        self.unsure = _WHITESPACE if xml_args.strips_space else "\n"
        self.ends = self.tail + self.unsure

    def hold(self, held: str) -> None:
        """The rule while the lexer holds ``held``, the start of a marker (a chunk that does not
        make it plain text goes to ``value_chunk``), or nothing."""
        markers = self.markers
        self.held = held
        if held:
            self.stops, self.common = _EVERY, ""
        else:
            self.stops, self.common = markers.starts, markers.common

    def take(self, item: ChunkResponse, text: str) -> Chunks | None:
        if self.held:  # (the rule's stops are every chunk then)
            return self._after_held(item, self.held + text, text)
        if text[-1] in self.ends:
            return self._at_end(item, text)
        if self.common in text and self.stopped(text):  # (`_at_end` of a piece with a stop in it)
            return None if more_than_text(item) else self._value_chunk(item, text)
        if item.is_complete or item.tool_calls or item.finish_reason:
            return None
        if not self.xml_args.streaming:
            return self._written(item, text)
        if not text.isprintable() or '"' in text or "\\" in text:  # (json_escape's test, inline)
            text = escape_json_text(text)
        delta = ToolCallDelta(self.index, None, None, text, False, self.kind)
        if item.reasoning is None:
            return [_replace(item, content="", tool_calls=[delta])]
        return [_replace(item, reasoning=None, tool_calls=[delta])]

    def _at_end(self, item: ChunkResponse, text: str) -> Chunks | None:
        """`take` of a piece that ends with a character of ``ends``: with a stop or the start of one at
        its end (`_value_chunk`), or with whitespace the value may strip (`_written`)."""
        if text[-1] in self.tail or (self.common in text and self.stopped(text)):
            return None if more_than_text(item) else self._value_chunk(item, text)
        if item.is_complete or item.tool_calls or item.finish_reason:
            return None
        return self._written(item, text)

    def _written(self, item: ChunkResponse, text: str) -> Chunks | None:
        """A piece for the value's writer: held until the value ends (to be typed), or written by it
        (whitespace at its end that the value may strip)."""
        if carries_more(item):
            return None
        self.xml_args.value(text)
        return self.lexer.emitted(item)

    def _after_held(self, item: ChunkResponse, longer: str, text: str) -> Chunks | None:
        """``text`` after the held start of a marker, ``longer`` the two: held when they are still the
        start of one, the marker completed when they start with it, a string's piece when together they
        are one (`_plain`), else `_value_chunk`. None: the states take it (``item`` carries more than
        text, say)."""
        if item.is_complete or item.tool_calls or item.finish_reason:
            return None
        markers = self.markers
        if longer in markers.prefixes:  # (the start of a marker, growing)
            if carries_more(item):
                return None
            self.lexer.hold_back(longer)
            self.held = longer
            return []
        if markers.common in longer and markers.pattern.match(longer) is not None:
            # (the held start became its marker: `value_chunk` gives up)
            return None if carries_more(item) else self.completed(item, text)
        if not self._plain(longer):
            # (a marker's start at the end, or the value's writer)
            return None if carries_more(item) else self._value_chunk(item, text)
        self.lexer.take_held()
        self.held = ""  # (`hold` of nothing, written out)
        self.stops, self.common = markers.starts, markers.common
        if not longer.isprintable() or '"' in longer or "\\" in longer:  # (json_escape's test, inline)
            longer = escape_json_text(longer)
        # (the item's other fields stay on it, as `take` keeps them on a plain piece)
        delta = ToolCallDelta(self.index, None, None, longer, False, self.kind)
        if item.reasoning is None:
            return [_replace(item, content="", tool_calls=[delta])]
        return [_replace(item, reasoning=None, tool_calls=[delta])]

    def _plain(self, longer: str) -> bool:
        """Whether ``longer`` (a held start of a marker inside a value that neither grew nor became its
        marker, then more of it) is a string's piece: no marker in it after its first character (none
        starts there), no start of one at its end, no whitespace there that the value may strip."""
        xml_args = self.xml_args
        last = longer[-1]
        if (
            last in self.tail
            or not xml_args.streaming
            or last == "\n"
            or (xml_args.strips_space and last.isspace())
        ):
            return False
        markers = self.markers
        if markers.common in longer:
            for stop in markers.starts:
                if longer.find(stop, 1) >= 0:
                    return False
        return True

    def _value_chunk(self, item: ChunkResponse, text: str) -> Chunks | None:
        """``value_chunk``, then ``complete``, then the states."""
        piece = self.lexer.value_chunk(text)
        if piece is None:
            return self.lexer.emitted(item)
        if piece is False:
            return self.completed(item, text)
        assert piece is not True  # (a value's piece is never text)
        return [ChunkResponse(tool_calls=[piece])]


def _discard(text: str) -> None:
    """What a value's rule writes before it follows a call: nothing."""


_NO_VALUE: Final = XmlArguments(_discard)
"""The writer of a value's rule before it follows a call (`ValueRule.follow`)."""


def _never(text: str) -> bool | None:
    """A value's rule gathers nothing."""
    return False


_WHITESPACE: Final = (
    "\x09\x0a\x0b\x0c\x0d\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""Every character for which `str.isspace` is true."""

_EVERY: Final = ("",)
"""Stops that every chunk holds: a rule with them takes no chunk itself."""

"""The delimiter lexer: `FormatLexer`, the engine's states with a shortcut and rules beside them.

Some models write their tool calls into the text itself, between delimiter tokens (Kimi-K2's
``<|tool_call_begin|>``, DeepSeek's ``<\uff5ctool\u2581call\u2581begin\uff5c>``, Qwen's ``<tool_call>``, ...).
`DelimiterRewriter` moves those calls out of ``content`` and
``reasoning`` into `ToolCallDelta`s and passes every other character through, in
order. The states and their helpers are in `_engine`.

Most chunks never reach the states. After each run of a lexer (and each chunk its shortcut took), the
lexer hands out the rule that applies where it stands (`FormatLexer.rule`, `_rules`): text
passes through, goes to the other channel, into a header or a held start of a marker, into JSON
arguments or into an XML-style value. A chunk its rule leaves goes to `FormatLexer.shortcut`, which
decides at once what a chunk that is the next piece of one channel does when that is plain, else to the
states. ``test_delimiters_fast_path_properties.py`` checks that the rules, the shortcut and the
states give the same chunks.

How to add a format
===================

1. Create ``operators/delimiters/formats/<family>.py``. Every public module of ``formats`` is imported by
   ``formats/__init__.py``, so nothing else needs editing.
2. Subclass the closest building block, set ``name`` (and ``aliases``), ``markers`` (every literal, for
   the tests), ``end_marker_optional`` if a call whose JSON is complete may lack its end marker at the
   end of the stream, and decorate the class with ``@register_format`` (``._registry``). The building blocks:

   - `FormatLexer`: the engine and the helpers (``collect_header`` for a bounded name or id,
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
     sections (MiniMax-M2, DeepSeek DSML, Seed-OSS, Step-3, Kimi-K3).

3. Set ``text_markers`` (what the text state, `FormatLexer.start`, stops at) and write
   ``opened(marker)`` (switch to what the marker opens), plus one method per state
   ``state(self, buf, pos, final) -> int``, with module-level `Markers` constants per
   state; a typical state::

       def _arguments(self, buf: str, pos: int, final: bool) -> int:
           resume, marker = self.stream_json_args(buf, pos, final, _ARGUMENTS)
           if marker is not None:
               self.close_call(marker)
           return resume

   A state that calls ``collect_header``, ``stream_json_args``, ``stream_value`` or ``stream_free_args``
   calls it first and does nothing else with text that holds none of the given markers (the shortcut
   stands in for such a state, see `FormatLexer.shortcut`).

4. Override ``at_end()`` when the format has something to release at the end of the input (the default
   releases held tentative text and ends an open call as cut off, or finished if ``end_marker_optional``
   and its JSON is complete).
5. Say in the class docstring what cannot be told apart (a marker written in prose, a closing tag inside
   an argument value).
6. Bounds: a lexer holds at most a partial marker, a header of `HEADER_LIMIT` characters
   (past it the text is not a call and goes out as text) and, per XML value, ``max_buffered_chars``.
7. Test it with ``tests/delimiter_cases.py`` (``assert_chunking_invariant`` feeds a text whole, one
   character at a time, split around every marker, and at random splits; ``run`` gives the text per
   channel and the calls).
8. Only for speed, once it works: states the engine's shortcut does not know may get a ``shortcut`` and
   ``make_rule`` of the format's own (harmony's headers and bodies; ``grow_rule`` while a marker's start
   is held), and a rule's ``complete`` may take a marker that the states would (Qwen3-Coder's rules for
   the tags around its values, ``value_rule(complete)`` for ``</parameter>``, and its calls' openings).
   Each must do exactly what the states do (``test_delimiters_fast_path_properties.py``), and one
   that leaves plain text must not run while ``watched`` (a guard for unknown tools keeps the raw text
   from there).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, TypeAlias

from operators.delimiters._engine import (
    DEFAULT_MAX_BUFFERED_CHARS,
    HEADER,
    JSON,
    SKIP,
    VALUE,
    Channel,
    LexerEngine,
    LexerOptions,
    LexerOutput,
    State,
    claim_next,
)
from operators.delimiters._rules import (
    CollectRule,
    Complete,
    JsonArgsRule,
    PassRule,
    Rule,
    ShortcutRule,
    TextRule,
    ValueRule,
)
from operators.delimiters._scan import HEADER_LIMIT, JsonArgs, Markers, escape_json_text
from pipeline.models import ChunkResponse, ToolCallDelta

__all__ = [
    "DEFAULT_MAX_BUFFERED_CHARS",
    "Channel",
    "FormatLexer",
    "LexerOptions",
    "LexerOutput",
    "Rule",
    "State",
    "claim_next",
]

Shortcut: TypeAlias = ToolCallDelta | bool | None
"""What `FormatLexer.shortcut` did with a chunk (see there)."""

_ANYTHING: Final = re.compile("")
"""Matches at the start of any text."""


def _dropped(text: str) -> bool:
    """Text a format ignores between its tags (see `LexerEngine.skip_to`): taken, and dropped."""
    return True


_LITERAL_PREFIXES: dict[tuple[str, ...], frozenset[str]] = {}


def _literal_prefixes(literals: tuple[str, ...]) -> frozenset[str]:
    """Every proper prefix of ``literals`` (cached: a format expects a few fixed tuples)."""
    prefixes = _LITERAL_PREFIXES.get(literals)
    if prefixes is None:
        prefixes = frozenset(literal[:size] for literal in literals for size in range(1, len(literal)))
        if len(_LITERAL_PREFIXES) < 256:
            _LITERAL_PREFIXES[literals] = prefixes
    return prefixes


def _value_stop(text: str, markers: Markers, start: int) -> int:
    """Where a piece of a value streamed up to ``markers``, which holds their common character, stops
    (the start of a marker at its end is held from there); -1 when a marker is in it, looked for from
    ``start``."""
    if text in markers.prefixes:  # (all of it the start of one: "\n</p" before "</parameter>")
        return 0
    stop, _resume, marker = markers.find(text, start, False)
    return -1 if marker is not None else stop


class FormatLexer(LexerEngine):
    """One channel's lexer for one format: its states (`LexerEngine`), the rule that
    applies to its next chunk (`rule`) and its shortcut.

    Args:
        output: where the lexer reports what it found.
        channel: the channel it lexes: ``content`` or ``reasoning``.
        options: what every lexer of the rewriter shares.
    """

    __slots__ = (
        "_grow_ends",
        "_grow_prefixes",
        "_growing",
        "_header_rule",
        "_json_rule",
        "_skip_rule",
        "_text_rule",
        "_value_rule",
        "emitted",
        "fallback",
        "rule",
    )

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        text_markers = self.text_markers
        rule = PassRule if text_markers.tail is None else TextRule  # (see TextRule)
        self._text_rule: Rule = rule(self, text_markers.starts, text_markers.tail)
        self.fallback: Rule = ShortcutRule(self)
        """The rule where no other applies: the shortcut, else the states."""
        self._json_rule: JsonArgsRule | None = None
        self._value_rule: ValueRule | None = None
        self._header_rule: CollectRule | None = None
        self._skip_rule: CollectRule | None = None
        self._growing = CollectRule(self, self._grow_held, holds=True)
        self._grow_prefixes: frozenset[str] = frozenset()
        """What the held start of a marker may grow into while `_growing` is the rule."""
        self._grow_ends: re.Pattern[str] | None = None
        """While `_growing` is the rule: matches at the start of the held text and the next chunk
        when the states must take them (the held start became what it was the start of: the shortcut
        would give up on it), None when the shortcut may take them."""
        self.rule: Rule = self._text_rule
        """The rule of the next chunk, made again whenever the lexer moved (`renew_rule`)."""
        self.emitted: Callable[[ChunkResponse], list[ChunkResponse]] = output.chunks
        """The chunks of an item whose text a rule or the shortcut took, from what they emitted (the
        output's own method: a rule asks it on every tag it completes)."""

    # --- rules ------------------------------------------------------------------------------------------

    def renew_rule(self) -> None:
        """The lexer moved (its states ran, or its shortcut or a rule took a marker): make its rule."""
        self.rule = self.make_rule()

    def shortcut_chunks(self, item: ChunkResponse, text: str) -> list[ChunkResponse] | None:
        """The chunks of ``item`` when `shortcut` takes its text.

        Args:
            item: the incoming chunk.
            text: its text in this lexer's channel, the only text it has.

        Returns:
            The chunks to give out; None when the text must be lexed.
        """
        shortcut = self.shortcut(text)
        if shortcut is False:
            return None
        self.rule = self.make_rule()
        if shortcut is True:
            return [item] if text else []  # the chunk goes on as it is
        if shortcut is None:
            return self._output.chunks(item)
        return [ChunkResponse(tool_calls=[shortcut])]

    def make_rule(self) -> Rule:
        """The rule of the next chunk of this channel, decided once for every chunk until the lexer moves:
        the text state (nothing held, nothing tentative) passes text without a marker, JSON arguments
        take a piece of a string without a quote or JSON text in which no end marker can start, an
        XML-style value takes text without a marker, a header takes text in which no marker can start,
        up to its cap, text a format skips between its tags is dropped when it holds no marker, and a
        held start of a marker grows. Else `fallback`."""
        if self._held:
            return self._held_rule()
        if self.tentative is not None:
            return self.fallback
        if self.json_args is not None:
            return self._arguments_rule(self.json_args)
        if self.state == self._text_state:
            return self._text_rule
        return self._stream_rule()

    def _held_rule(self) -> Rule:
        """`make_rule` while the start of a marker (or of a literal a state expects) is held back:
        the next chunk that only extends it is held with it, as `_held_shortcut` would."""
        markers = self.partial_markers()
        if markers is not None:
            value = None if self.xml_args is None else self.value_rule()
            return self.grow_rule(markers) if value is None else value
        expect = self._expect
        if expect is not None and self.state == expect[0]:
            # (the shortcut only grows it: whatever else comes goes to the states, _held_shortcut)
            return self._grow(_literal_prefixes(expect[1]), _ANYTHING, None)
        return self.fallback

    def _arguments_rule(self, json_args: JsonArgs) -> Rule:
        """`make_rule` in a call's JSON arguments, once the call has some."""
        index = self.call_index
        if index is None or index < 0 or not self._call_has_args:  # (< 0: a call not offered, dropped)
            return self.fallback
        stream = self._stream
        markers = stream[1] if stream is not None and self.state == stream[0] and stream[2] is JSON else None
        if markers is None and not json_args.in_string:
            return self.fallback
        rule = self._json_rule
        if (
            rule is None
            or rule.index != index
            or rule.json_args is not json_args
            or rule.markers is not markers
        ):
            rule = self._json_rule = JsonArgsRule(self, index, self.call_kind, json_args, markers)
        return rule

    def _stream_rule(self) -> Rule:
        """`make_rule` in a state that streams with one of the engine's helpers."""
        stream = self._stream
        if stream is None or self.state != stream[0]:
            return self.fallback
        _state, markers, helper = stream
        if helper is VALUE:
            return self.value_rule() or self.fallback
        if helper is HEADER:
            rule = self._header_rule
            if rule is None or rule.stops is not markers.first_chars:
                # (a marker can start in text with a stop: the engine's shortcut never takes it)
                rule = self._header_rule = CollectRule(
                    self, self._collect_header, markers.first_chars, stopped_by_states=True
                )
            return rule
        if helper is SKIP:
            rule = self._skip_rule
            if rule is None or rule.stops is not markers.starts:
                rule = self._skip_rule = CollectRule(self, _dropped, markers.starts, markers.tail)
            return rule
        return self.fallback

    def value_rule(self, complete: Complete | None = None) -> ValueRule | None:
        """The rule of the XML-style value being streamed (None: no such value, or it is not yet part of
        the arguments). The same rule object is kept for the value: `value_chunk` sets its stops
        as it holds or releases. ``complete``: the format's way past a marker (see
        `CollectRule`)."""
        stream = self._stream
        xml_args = self.xml_args
        index = self.call_index
        if (
            stream is None
            or stream[2] is not VALUE
            or self.state != stream[0]
            or xml_args is None
            or index is None
            or index < 0  # (a call to a tool not offered: the states drop what it writes)
            or not self._call_has_args
            or self.tentative is not None
        ):
            return None
        rule = self._value_rule
        if rule is None or rule.markers is not stream[1]:
            rule = self._value_rule = ValueRule(self, stream[1])
        if rule.index != index or rule.xml_args is not xml_args:
            rule.follow(index, self.call_kind, xml_args)
        rule.hold(self._held)
        rule.complete = complete
        return rule

    def grow_rule(
        self,
        markers: Markers,
        *,
        completed_by_states: bool = True,
        complete: Complete | None = None,
    ) -> Rule:
        """The rule while the start of one of ``markers`` is held back: the next chunk that only extends
        it is held with it (a format's `make_rule` for the states it writes itself).

        Args:
            markers: the markers whose start is held.
            completed_by_states: a chunk that completes the marker goes to ``complete``, if given, then to
                the states; False: to `shortcut`, when the format's shortcut takes some completed markers
                itself.
            complete: takes the text of the chunk that completes the marker as the states would, and
                gives the rule from there (None: it did not); None: the states lex it.
        """
        return self._grow(markers.prefixes, markers.pattern if completed_by_states else None, complete)

    def _grow(
        self, prefixes: frozenset[str], ends: re.Pattern[str] | None, complete: Complete | None
    ) -> Rule:
        """`_growing`, set to grow the held text into ``prefixes`` (see `_grow_ends`)."""
        self._grow_prefixes = prefixes
        self._grow_ends = ends
        self._growing.complete = complete
        return self._growing

    def _grow_held(self, text: str) -> bool | None:
        """Hold ``text`` with the held start of a marker when together they are still the start of one
        (the rule `make_rule` gives while something is held): True. None when they start with
        the marker (or literal) itself, which the states take; False: it has to be looked at."""
        longer = self._held + text
        if longer in self._grow_prefixes:
            self._held = longer
            return True
        ends = self._grow_ends
        if ends is not None and ends.match(longer) is not None:
            return None
        return False

    def hold_back(self, text: str) -> None:
        """Hold ``text``, the start of a marker (what was held and what grew it), back until the next
        chunk: a rule took the chunk as the state would."""
        self._held = text

    def take_held(self) -> str:
        """The text held back (the start of a marker), no longer held: a rule took it with what follows."""
        held, self._held = self._held, ""
        return held

    def _collect_header(self, text: str) -> bool:
        """Add ``text``, in which no marker of the state collecting a header can start, to the header,
        unless that passes the cap (False)."""
        size = self._header_chars + len(text)
        if size > HEADER_LIMIT:
            return False
        self._header_parts.append(text)
        self._header_chars = size
        return True

    # --- the shortcut ----------------------------------------------------------------------------------

    def shortcut(self, text: str) -> Shortcut:
        """What ``text``, all of the next piece of this channel, does without running the states, when
        that is known at once (the lexer ends as lexing would leave it):

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
        so is the start of the literal a state expects after whitespace (`expect_after_space`).
        """
        json_args = self.json_args
        index = self.call_index
        if index is not None and index < 0:
            return False  # (a call to a tool not offered: the states drop what it writes)
        if json_args is None and self.xml_args is not None and index is not None and text:
            # The next piece of an XML-style value (most pieces of such a call).
            stream = self._stream
            if stream is not None and stream[2] is VALUE and self.state == stream[0]:
                return self.value_chunk(text)
        held = self._held
        if held:
            return self._held_shortcut(held, held + text)
        if json_args is None:
            if self.state == self._text_state:
                return self._text_shortcut(text)
        elif index is not None:
            # Inside a string with no quote or backslash to follow (most pieces of a call): nothing changes.
            plain = json_args.in_string and not json_args.escape and '"' not in text and "\\" not in text
            if plain or json_args.take_in_string(text):
                self._call_has_args = True
                return ToolCallDelta(index, None, None, text, False, self.call_kind)
        return self._stream_shortcut(text, json_args, index)

    def _text_shortcut(self, text: str) -> bool | None:
        """`shortcut` in the text state, nothing held."""
        if self.tentative is not None:
            return False
        text_markers = self.text_markers
        for char in text_markers.first_chars:  # most text has none of them: decided without a call
            if char in text:
                return self._text_piece(text, text_markers)
        return True

    def value_chunk(self, text: str) -> Shortcut:
        """`shortcut` for ``text``, all of the next piece of the value the state streams (the value
        rule's piece, see `value_rule`): held with the start of a marker held back while they are
        still one; False when a marker starts them or is in them; else a string's piece (the start of a
        marker at its end held back) as its delta, or None: taken by the value's writer (whitespace at
        the end, perhaps not part of the value; a value held to be typed) or held."""
        stream = self._stream
        assert stream is not None  # (the value's state)
        markers = stream[1]
        held = self._held
        if held:
            text = held + text
            if text in markers.prefixes:
                self._held = text
                rule = self._value_rule
                if rule is not None and rule.xml_args is self.xml_args:  # (the rule stays the rule)
                    rule.hold(text)
                return None
            if markers.common in text and markers.pattern.match(text) is not None:
                return False  # (the held start became its marker: most often)
        if markers.common in text:
            # (a held start that neither grew nor became its marker starts none: looked for after it)
            stop = _value_stop(text, markers, 1 if held else 0)
            if stop < 0:
                return False
        else:  # no marker starts in it: perhaps at its last character (`_value_stop`, without the call)
            tail = markers.tail
            stop = len(text) - 1 if tail is not None and text[-1] in tail else len(text)
        self._held = text[stop:]
        text = text[:stop]
        rule = self._value_rule
        if rule is not None and rule.xml_args is self.xml_args:  # (the rule stays the rule)
            rule.hold(self._held)
        return self._value_piece(text) if text else None

    def _value_piece(self, text: str) -> Shortcut:
        """A piece of the value with no marker nor the start of one: its delta when it is a string's
        piece that cannot end with whitespace the value strips, else None (taken by the value's writer)."""
        xml_args = self.xml_args
        index = self.call_index
        assert xml_args is not None  # (the value's state)
        assert index is not None
        last = text[-1]
        if not xml_args.streaming or last == "\n" or (xml_args.strips_space and last.isspace()):
            xml_args.value(text)
            return None
        self._call_has_args = True
        if not text.isprintable() or '"' in text or "\\" in text:  # (json_escape's test, inline)
            text = escape_json_text(text)
        return ToolCallDelta(index, None, None, text, False, self.call_kind)

    def _held_shortcut(self, held: str, longer: str) -> Shortcut:
        """`shortcut` when the start of a marker was held back: ``longer`` is it and the new text.

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
        if stream is None or stream[2] is JSON or stream[2] is HEADER:
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
        """`shortcut` for ``text``, the next piece of text that a state streams up to ``markers``
        (as `stream_text`) and that holds the start of one: True when it is none (``text`` goes
        on as it is), None when a marker may begin at its end (that is held and what comes before it
        emitted), False when a marker is in it."""
        taken = self._hold_marker_start(text, markers)
        if taken is None:
            return False
        if taken is text:
            return True
        self.emit_text(taken, channel)
        return None

    def _stream_shortcut(self, text: str, json_args: JsonArgs | None, index: int | None) -> Shortcut:
        """`shortcut` in a state that streams with one of the helpers it knows (``_stream``)."""
        stream = self._stream
        if stream is None or self.state != stream[0]:
            return self._name_shortcut(text)
        _state, markers, helper = stream
        if helper is JSON:
            if json_args is None or index is None:
                return False
            return self._json_shortcut(text, json_args, index, markers)
        if helper is HEADER:
            if not markers.cannot_start_in(text):
                return False
            return None if self._collect_header(text) else False
        if helper is SKIP or helper is VALUE:
            taken = self._hold_marker_start(text, markers)
            if taken is None:
                return False
            if helper is VALUE and taken and self.xml_args is not None:
                self.xml_args.value(taken)
            return None
        if index is None or not markers.absent_from(text):  # (free-text input)
            return False
        self._call_has_args = True
        return ToolCallDelta(index, None, None, text, False, self.call_kind)

    def _name_shortcut(self, text: str) -> Shortcut:
        """The next piece of a name, held with the tentative text up to the cap (``read_name``)."""
        naming = self.naming
        if (
            naming is not None
            and self.state == naming[0]
            and self._tentative_size + len(text) <= HEADER_LIMIT
            and naming[1].search(text) is None
        ):
            self.hold_header(text)
            return None
        return False

    def _json_shortcut(self, text: str, json_args: JsonArgs, index: int, markers: Markers) -> Shortcut:
        """`shortcut` in JSON arguments streamed up to ``markers``."""
        if markers.cannot_start_in(text):
            text = json_args.take(text, markers)  # no marker can start in it: nothing to hold back
        else:
            if markers.find(text, 0, False)[2] is not None:
                return False  # (perhaps in a string: the state decides)
            stop, resume, _none = json_args.scan(text, 0, markers, False)
            if resume < len(text):
                self._held = text[resume:]  # the start of a marker, outside a string: held
            text = json_args.trim(text[:stop])
        if not text:
            return None
        self._call_has_args = True
        return ToolCallDelta(index, None, None, text, False, self.call_kind)

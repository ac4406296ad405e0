"""Qwen3-Coder, Qwen3.5 and Qwen3.6 XML tool calls: ``<tool_call><function=NAME><parameter=KEY>VALUE
</parameter>...</function></tool_call>``."""

from __future__ import annotations

import re
from typing import ClassVar, Final

from operators.delimiters._families import TaggedCallLexer
from operators.delimiters._lexer import Channel, FormatLexer, LexerOptions, LexerOutput, Rule, claim_next
from operators.delimiters._registry import register_format
from operators.delimiters._rules import CollectRule
from operators.delimiters._scan import HEADER_LIMIT, Markers, space_end

__all__ = ["Qwen3CoderLexer"]

_TOOL_CALL: Final = "<tool_call>"
_TOOL_CALL_END: Final = "</tool_call>"
_FUNCTION: Final = "<function="
_FUNCTION_END: Final = "</function>"
_PARAMETER: Final = "<parameter="
_PARAMETER_END: Final = "</parameter>"

_NAME_END: Final = re.compile(r"[>\s<]")
_KEY_END: Final = Markers(">")
_IN_FUNCTION: Final = Markers(_PARAMETER, _FUNCTION_END, _TOOL_CALL_END)
# A structural "<parameter=" or "</function>" starts a line; inside a value the same text mid-line is content.
_VALUE: Final = Markers(
    _PARAMETER_END,
    "\n" + _PARAMETER_END,
    "\n" + _PARAMETER,
    "\n" + _FUNCTION_END,
    "\n" + _TOOL_CALL_END,
)
# "\n</parameter>" is "</parameter>" with the value's newline before it (kept in the value, stripped there as
# any trailing newline): the held "\n<" then grows into a marker instead of being lexed on "\n</pa".
_KEPT_END: Final = "\n" + _PARAMETER_END
_KEPT: Final = frozenset((_KEPT_END,))
_TEXT: Final = Markers(_TOOL_CALL, _FUNCTION)
_IN_TEXT: Final = 0
_AFTER_FUNCTION: Final = -2
_BETWEEN_CALLS: Final = -1
_AFTER_OPENER: Final = 1
_NAME: Final = 2
_OPENING: Final = {
    _AFTER_FUNCTION: (_TOOL_CALL_END, _BETWEEN_CALLS),
    _BETWEEN_CALLS: (_TOOL_CALL, _AFTER_OPENER),
    _AFTER_OPENER: (_FUNCTION, _NAME),
}
"""The steps of `Qwen3CoderLexer._collect_opening` at a tag after whitespace: the tag, the next step
(``_IN_TEXT``: at ``<tool_call>`` in text, no whitespace before it; ``_NAME``: in the name)."""
_ORPHAN_BODY: Final = Markers(_FUNCTION_END, _TOOL_CALL)


def _between(text: str) -> tuple[str, str | None] | None:
    """What `_in_function` does with ``text`` (the held start of a tag and what
    follows it, or text after its leading whitespace) when it emits nothing: the text it then holds
    (anything but a tag is dropped, the start of one held) and the key begun after ``<parameter=``
    (None: no key). None when a tag other than ``<parameter=`` is in it, or the key ends in it."""
    if not text or text in _IN_FUNCTION.prefixes:
        return text, None
    if not text.startswith(_PARAMETER):
        stop, _resume, marker = _IN_FUNCTION.find(text, 0, False)
        return None if marker is not None else (text[stop:], None)
    key = text[len(_PARAMETER) :]
    if ">" in key or len(key) > HEADER_LIMIT:
        return None
    return "", key


@register_format
class Qwen3CoderLexer(TaggedCallLexer):
    """``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...</function>\\n
    </tool_call>``.

    Values become JSON incrementally (see `XmlArguments`): exactly one leading and one
    trailing newline of a value are not part of it (as vLLM strips them); with ``tool_schemas`` a value
    is typed by its parameter's schema (a parameter the schema does not declare stays a string, as in
    vLLM); without a schema for the tool, a value that parses as a JSON number, ``true``, ``false``,
    ``null``, object or array is that JSON value and anything else is a string (so ``"7"`` becomes ``7``).
    String values stream as they arrive; other values are held until their end.

    ``<tool_call>`` is taken for a call only when ``<function=NAME>`` follows (after whitespace), with a
    name free of whitespace and ``<``: prose such as "the <tool_call> tag" stays text.

    A call whose ``<tool_call>`` the model skipped (``<function=NAME>`` ... ``</function>``, then
    ``</tool_call>``) is read when its closing tag confirms it. From ``<function=NAME>`` followed (after
    whitespace) by ``<parameter=`` or ``</function>``, the text is held back, not shown, until
    ``</function>``, whitespace and ``</tool_call>`` come: then it is the call (it streams out at once).
    It is text, released as it was, when anything else follows the name (prose such as "use
    <function=name> here"), when ``<tool_call>`` comes first, when the input ends first, or when more
    than ``max_buffered_chars`` (the rewriter's cap per call) are held.

    Tolerated: a missing ``</parameter>`` (the next ``<parameter=`` or ``</function>`` at the start of a
    line ends the value), a missing ``</function>`` (``</tool_call>`` ends the call, at the start of a line
    inside a value). A value containing
    the literal ``</parameter>`` ends there: that cannot be told apart.
    """

    name: ClassVar[str] = "qwen3_coder"
    aliases: ClassVar[tuple[str, ...]] = ("qwen3_xml", "qwen35")
    models: ClassVar[tuple[str, ...]] = ("Qwen3-Coder", "Qwen3.5")
    detect_openers: ClassVar[tuple[str, ...]] = (_TOOL_CALL,)
    opener: ClassVar[str] = _TOOL_CALL
    text_markers: ClassVar[Markers] = _TEXT
    markers: ClassVar[tuple[str, ...]] = (
        _TOOL_CALL,
        _TOOL_CALL_END,
        _FUNCTION,
        _FUNCTION_END,
        _PARAMETER,
        _PARAMETER_END,
    )

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """``<tool_call>`` then ``<function=``."""
        return claim_next(rest, final, _FUNCTION)

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        self._value_state = self._value
        self._key_state = self._parameter_key
        self._between_state = self._in_function
        self._after_state = self._after_function
        self._between_calls_state = self._between_calls
        self._value_complete = self._complete_value
        """The states `make_rule` knows, kept to compare and switch to without building a bound
        method each time."""
        self._between_rule = CollectRule(
            self, self._collect_between, holds=True, complete=self._complete_between
        )
        self._key_rule = CollectRule(self, self._collect_key, holds=True, complete=self._complete_key)
        self._opening_rule = CollectRule(
            self, self._collect_opening, holds=True, complete=self._complete_opening
        )
        self._opening_step = _IN_TEXT
        """How far the held opening of a call has come (`_collect_opening`): ``_IN_TEXT``, at a
        tag after whitespace (a step of ``_OPENING``), or in the name after ``<function=`` (``_NAME``)."""
        self._opening_tag = ""
        """The start of the tag held after whitespace."""

    def make_rule(self) -> Rule:
        """The engine's rules, with the tags around values taken as the states take them, when nothing
        else is in the chunk: a call's opening, up to its name's ``>``, by one rule; between two values
        (whitespace, ``<parameter=``, the key up to its ``>``, or ``</function>``) by another; and
        ``</parameter>`` ending a value. While a guard watches (``watched``), ``</function>`` goes to
        the states: the guard follows a call's end through them (what the opening rule holds it sees
        when the states take it)."""
        state = self.state
        if self.xml_args is not None:
            if state == self._between_state:
                return self._between_rule
            if state == self._key_state:
                return self._key_rule
            if state == self._value_state:
                return self._in_value_rule()
        elif state == self._text_state:
            if self._held and self.tentative is None:
                self._opening_step = _IN_TEXT
                return self._opening_rule
        elif state == self._after_state or state == self._between_calls_state:
            self._opening_step = _AFTER_FUNCTION if state == self._after_state else _BETWEEN_CALLS
            self._opening_tag = self._held.lstrip()
            return self._opening_rule
        return FormatLexer.make_rule(self)

    def _in_value_rule(self) -> Rule:
        """`make_rule` in a value: the value's rule, ``</parameter>`` taken by `_complete_value`."""
        value = self.value_rule(self._value_complete)
        if value is not None:
            return value
        if self._held:
            return self.grow_rule(_VALUE, complete=self._complete_value)
        return FormatLexer.make_rule(self)

    def _collect_key(self, text: str) -> bool | None:
        """What `_parameter_key` does with ``text`` when it emits nothing: the key's next piece
        collected (True). None: the chunk ends the key (`_complete_key`, else the states)."""
        return None if ">" in text or not self._collect_header(text) else True

    def _collect_between(self, text: str) -> bool | None:
        """What `_in_function` does with ``text`` when it emits nothing: anything but a tag dropped,
        the start of a tag held, ``<parameter=`` and a key collected (True). None: the chunk holds a
        tag (`_complete_between`, else the states)."""
        held = self._held
        longer = held + text if held else text.lstrip()
        if longer in _IN_FUNCTION.prefixes:  # (the start of a tag growing: most often)
            self._held = longer
            return True
        taken = _between(longer)
        if taken is None:
            return None
        self.rule = self._take_between(taken)  # (the key's rule once ``<parameter=`` came)
        return True

    def _take_between(self, taken: tuple[str, str | None]) -> Rule:
        """Hold ``held`` in `_in_function`, or begin collecting ``key`` (``taken``, see `_between`): the
        rule from there."""
        held, key = taken
        self._held = held
        if key is None:
            return self._between_rule
        self.switch_to_header(self._key_state, _KEY_END)
        if key:
            self._header_parts.append(key)
            self._header_chars += len(key)
        return self._key_rule

    def _complete_between(self, text: str) -> Rule | None:
        """``<parameter=``, the key and its ``>`` in ``text``: `_complete_key`; ``</function>``
        followed by whitespace and perhaps the start of ``</tool_call>``: the call ends. The rule from
        there; None, nothing done, for anything else."""
        held = self._held
        longer = held + text if held else text.lstrip()
        if longer.startswith(_PARAMETER):
            return self._complete_key(longer[len(_PARAMETER) :], opening=True)
        if self.watched or not longer.startswith(_FUNCTION_END):
            return None  # (a guard follows the end of a call through the states)
        rest = longer[len(_FUNCTION_END) :]
        tag = rest.lstrip()
        if tag and (len(tag) >= len(_TOOL_CALL_END) or not _TOOL_CALL_END.startswith(tag)):
            return None
        self._end_function(_FUNCTION_END)
        self._held = rest  # (what _after_function holds, `_collect_opening` takes on from there)
        return self.make_rule()

    def _collect_opening(self, text: str) -> bool | None:
        """Hold ``text`` with the held start of a call's opening while it can still be one: in text,
        ``<tool_call>``; after a call, whitespace, ``</tool_call>``, whitespace and ``<tool_call>``;
        then whitespace, ``<function=`` and the name, up to its ``>``. Nothing is emitted before the
        name ends, whichever it turns out to be. None: `_complete_opening`, else the states, take it
        (the name ended, or it is text: the start of a marker that it was not, say)."""
        longer = self._held + text
        size = len(longer) + (self._tentative_size if self.tentative is not None else 0)
        if size > HEADER_LIMIT:
            return None  # (the states give up on it)
        step = self._opening_step
        if step == _IN_TEXT:
            if longer in _TEXT.prefixes:
                self._held = longer
                return True
            if not longer.startswith(_TOOL_CALL):
                return None  # (a marker for the states, or text: `_complete_opening`)
            self._opening_step = step = _AFTER_OPENER
            self._opening_tag = ""
            text = longer[len(_TOOL_CALL) :]
        while step != _NAME:
            tag = self._opening_tag + text if self._opening_tag else text.lstrip()
            literal, after = _OPENING[step]
            if len(tag) < len(literal) and literal.startswith(tag):
                self._opening_tag = tag
                self._held = longer
                return True
            if not tag.startswith(literal):
                return None
            self._opening_step = step = after
            self._opening_tag = ""
            text = tag[len(literal) :]
        if _NAME_END.search(text) is not None:
            return None
        self._held = longer
        return True

    def _complete_opening(self, text: str) -> Rule | None:
        """The name's ``>`` in ``text``, after the held opening: the call starts, as
        `_function_name` starts it, when what follows in the chunk is what the rule between two
        values takes: the rule between two values. None, nothing done, for anything else, and while a
        guard watches (it decides on the call as the states start it)."""
        if self.watched:
            return None
        if self._opening_step == _IN_TEXT:
            return self._text_after_held(text)
        longer = self._held + text
        if self._opening_step == _BETWEEN_CALLS:
            return self._text_after_call(longer)
        if self._opening_step != _NAME:
            return None
        size = len(longer) + (self._tentative_size if self.tentative is not None else 0)
        start = longer.find(_FUNCTION) + len(_FUNCTION)  # (the opening holds one, before the name)
        hit = _NAME_END.search(longer, start)
        if hit is None or hit.group() != ">" or hit.start() == start or size > HEADER_LIMIT:
            return None
        taken = _between(longer[hit.end() :].lstrip())
        if taken is None:
            return None
        self.confirmed()
        self.start_xml_call(longer[start : hit.start()], strip="newline")
        self.switch_to_skip(self._between_state, _IN_FUNCTION)
        return self._take_between(taken)

    def _text_after_held(self, text: str) -> Rule | None:
        """The held start of a text marker and ``text``, which neither grew into one nor became one
        (`_collect_opening`), emitted as text as the text state emits them when no marker starts after
        the held ``<`` (none starts in ``text`` nor at its end): the text state's rule; None, nothing
        done, otherwise (the states take it)."""
        longer = self._held + text
        if _TEXT.pattern.match(longer) is not None or not _TEXT.absent_from(text):
            return None
        self._held = ""
        self.emit_text(longer)
        return self.make_rule()

    def _text_after_call(self, longer: str) -> Rule | None:
        """``longer``, whitespace, ``</tool_call>`` and text that does not open another call, taken as
        `_after_function` and `_between_calls` take it: the call's block ends and what follows
        ``</tool_call>`` is text. The text state's rule; None, nothing done, when that text holds a text
        marker or the start of one, or when the states hold what came so far (tentative text, or more
        than `HEADER_LIMIT` characters: they give up on it in their own way)."""
        rest = longer
        if self.state == self._after_state:  # (else ``</tool_call>`` came before)
            rest = longer[longer.find(_TOOL_CALL_END) + len(_TOOL_CALL_END) :]
        if self.tentative is not None or len(longer) > HEADER_LIMIT or not _TEXT.absent_from(rest):
            return None
        self._held = ""
        self.call_done()
        self.not_a_call()
        self.emit_text(rest)
        return self.make_rule()

    def _complete_value(self, text: str) -> Rule | None:
        """`_value` taking ``</parameter>`` (the held start of it and ``text``) and what follows
        it in the chunk as `_in_function` takes it (`_between`): the rule from there; None, nothing
        done, otherwise."""
        longer = self._held + text
        if longer.startswith(_KEPT_END):
            size = len(_KEPT_END)
        elif longer.startswith(_PARAMETER_END):
            size = len(_PARAMETER_END)
        else:
            return None
        taken = _between(longer[size:].lstrip())
        if taken is None:
            return None
        xml_args = self.xml_args
        assert xml_args is not None  # (see make_rule)
        if size == len(_KEPT_END) and not xml_args.streaming:  # (a streaming string strips it)
            xml_args.value("\n")
        xml_args.end_value()
        self.switch_to_skip(self._between_state, _IN_FUNCTION)
        return self._take_between(taken)

    def _complete_key(self, text: str, opening: bool = False) -> Rule | None:
        """`_parameter_key` taking the key's end in ``text`` and the start of the value after it,
        when that holds no marker (``opening``: the key's ``<parameter=`` came just before, the key is
        all in ``text``): the value's rule; None, nothing done, otherwise."""
        close = text.find(">")
        if close < 0 or self._header_chars + close > HEADER_LIMIT:
            return None
        rest = text[close + 1 :]
        stop = len(rest)
        if rest in _VALUE.prefixes:  # (the newline after the tag, most often)
            stop = 0
        elif _VALUE.common in rest:
            stop, _resume, marker = _VALUE.find(rest, 0, False)
            if marker is not None:
                return None
        elif rest and rest[-1] == "\n":  # (no marker starts in it: perhaps at its last character)
            stop -= 1
        if opening:
            self._held = ""
            self.switch_to_header(self._key_state, _KEY_END)
        if close:
            self._header_parts.append(text[:close])
        self.begin_value(self.take_header().strip())
        self.switch_to_value(self._value_state, _VALUE)
        if stop:
            xml_args = self.xml_args
            assert xml_args is not None  # (see make_rule)
            xml_args.value(rest[:stop])
        self._held = rest[stop:]  # the start of a marker, held as the state holds it
        return self._in_value_rule()

    def confirm(self, buf: str, pos: int, final: bool) -> int:
        """After ``<tool_call>``: whitespace, then ``<function=``."""
        index, found = self.expect_after_space(buf, pos, final, (_FUNCTION,))
        if found:
            self.hold_tentative(found)
            self.state = self._function_name
            return index + len(found)
        if found == "":
            self.not_a_call()
        return index

    def _function_name(self, buf: str, pos: int, final: bool) -> int:
        stop, ender = self.read_name(buf, pos, _NAME_END)
        if not ender:
            return stop
        name = self.take_header()
        if ender != ">" or not name:
            self.not_a_call()
            return stop
        self.confirmed()
        self.start_xml_call(name, strip="newline")
        self.switch_to_skip(self._between_state, _IN_FUNCTION)
        return stop + 1

    def _in_function(self, buf: str, pos: int, final: bool) -> int:
        """Between parameters: whitespace (anything else is dropped)."""
        resume, marker = self.skip_to(buf, pos, final, _IN_FUNCTION)
        if marker == _PARAMETER:
            self.switch_to_header(self._key_state, _KEY_END)
        elif marker is not None:
            self._end_function(marker)
        return resume

    def _parameter_key(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.collect_header(buf, pos, final, _KEY_END)
        if marker is not None:
            self.begin_value(self.take_header().strip())
            self.switch_to_value(self._value_state, _VALUE)
        return resume

    def _value(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_value(buf, pos, final, _VALUE, _KEPT)
        if marker is not None:
            if marker == _PARAMETER_END or marker in _KEPT:
                self.switch_to_skip(self._between_state, _IN_FUNCTION)
            elif marker == "\n" + _PARAMETER:
                self.switch_to_header(self._key_state, _KEY_END)
            else:
                self._end_function(marker.lstrip())
        return resume

    def _end_function(self, marker: str) -> None:
        self.end_xml_call(finished=True)
        if marker == _FUNCTION_END:
            self.state = self._after_function
        else:
            self.call_done()

    def _after_function(self, buf: str, pos: int, final: bool) -> int:
        """After ``</function>``: whitespace, then ``</tool_call>`` (tolerated if missing)."""
        index, found = self.expect_after_space(buf, pos, final, (_TOOL_CALL_END,))
        if found:
            self.take_tentative()
            self.call_done()
            return index + len(found)
        if found == "":
            self.not_a_call()
        return index

    # --- a call without its <tool_call>, confirmed by </tool_call> ----------------------------------------

    def opened(self, marker: str) -> None:
        if marker == _FUNCTION:
            self.hold_tentative(marker)
            self.state = self._orphan_name
        else:
            super().opened(marker)

    def _orphan_name(self, buf: str, pos: int, final: bool) -> int:
        stop, ender = self.read_name(buf, pos, _NAME_END)
        if not ender:
            return stop
        name = self.take_header()
        if ender != ">" or not name:
            self.not_a_call()
            return stop
        self.hold_tentative(ender)
        self.state = self._orphan_open
        return stop + 1

    def _orphan_open(self, buf: str, pos: int, final: bool) -> int:
        """After ``<function=NAME>``: whitespace, then ``<parameter=`` or ``</function>``."""
        index, found = self.expect_after_space(buf, pos, final, (_PARAMETER, _FUNCTION_END))
        if found:
            self._hold_orphan(found)
            self.state = self._orphan_body if found == _PARAMETER else self._orphan_after_function
            return index + len(found)
        if found == "":
            self.not_a_call()
        return index

    def _orphan_body(self, buf: str, pos: int, final: bool) -> int:
        """The held call's parameters, up to ``</function>``; ``<tool_call>`` first means it was text."""
        stop, resume, marker = _ORPHAN_BODY.find(buf, pos, final)
        if stop > pos and not self._hold_orphan(buf[pos:stop]):
            return stop
        if marker == _TOOL_CALL:
            self.release_tentative()
            super().opened(marker)
        elif marker is not None:
            self._hold_orphan(marker)
            self.state = self._orphan_after_function
        return resume

    def _orphan_after_function(self, buf: str, pos: int, final: bool) -> int:
        """After ``</function>``: whitespace and ``</tool_call>`` confirm the call; anything else means
        that ``</function>`` was inside a value: the body goes on."""
        index = space_end(buf, pos)
        if index > pos and not self._hold_orphan(buf[pos:index]):
            return index
        if index == len(buf):
            return index
        if buf.startswith(_TOOL_CALL_END, index):
            held = self.take_tentative()
            # Lex it as the call it is (bounded: at most the cap, once more).
            self.hold_tentative(_TOOL_CALL)
            self.state = self.confirm
            self.feed(held + _TOOL_CALL_END)
            return index + len(_TOOL_CALL_END)
        if not final and _TOOL_CALL_END.startswith(buf[index:]):
            return index  # perhaps the start of </tool_call>
        self.state = self._orphan_body
        return index

    def _hold_orphan(self, text: str) -> bool:
        """Hold ``text`` of a call not yet confirmed; past the cap it was text: False, released."""
        self.hold_tentative(text)
        if self._tentative_size <= self.options.max_buffered_chars:
            return True
        self.not_a_call()
        return False

    def at_end(self) -> None:
        if self.state == self._after_function:
            self.take_tentative()
        elif self.state in (self._function_name, self._orphan_name):
            self.take_header()
            self.not_a_call()
        super().at_end()

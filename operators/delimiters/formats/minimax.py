"""MiniMax tool calls: MiniMax-M2 (M2, M2.1, M2.5, M2.7: ``<minimax:tool_call>`` sections of
``<invoke name="NAME">`` calls with ``<parameter name="KEY">VALUE</parameter>`` parameters) and MiniMax-M3
(the same sections with namespaced tags and parameters written as XML elements, nested)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import msgspec

from operators.delimiters._families import SectionLexer
from operators.delimiters._invoke import InvokeSectionLexer, attribute
from operators.delimiters._lexer import Channel, LexerOptions, LexerOutput
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers

__all__ = ["MiniMaxM2Lexer", "MiniMaxM3Lexer", "m3_tree"]

_SECTION_BEGIN: Final = "<minimax:tool_call>"
_SECTION_END: Final = "</minimax:tool_call>"
_INVOKE: Final = "<invoke"
_INVOKE_END: Final = "</invoke>"
_PARAMETER: Final = "<parameter"
_PARAMETER_END: Final = "</parameter>"


@register_format
class MiniMaxM2Lexer(InvokeSectionLexer):
    """``<minimax:tool_call>\\n<invoke name="NAME">\\n<parameter name="K">V</parameter>\\n</invoke>\\n
    </minimax:tool_call>``; several ``<invoke>`` blocks in one section are parallel calls.

    Values become JSON incrementally (see `XmlArguments`): one leading and one trailing
    newline are not part of a value; ``tool_schemas`` types values, and without a schema for the tool a
    value that parses as a JSON number, ``true``, ``false``, ``null``, object or array is that value,
    anything else a string streamed as it arrives. Values are taken verbatim (HTML entities are not
    decoded). The section markers are special tokens; ``<invoke``/``<parameter`` are plain text but only
    count inside a section. A value containing the literal ``</parameter>`` ends there: that cannot be
    told apart.
    """

    name: ClassVar[str] = "minimax_m2"
    aliases: ClassVar[tuple[str, ...]] = ("minimax-m2",)
    models: ClassVar[tuple[str, ...]] = ("MiniMax-M2", "MiniMax-M2.1", "MiniMax-M2.5")
    detect_openers: ClassVar[tuple[str, ...]] = (_SECTION_BEGIN,)
    markers: ClassVar[tuple[str, ...]] = (
        _SECTION_BEGIN,
        _SECTION_END,
        _INVOKE,
        _INVOKE_END,
        _PARAMETER,
        _PARAMETER_END,
    )

    text_markers: ClassVar[Markers] = Markers(_SECTION_BEGIN)
    section_begins: ClassVar[frozenset[str]] = frozenset({_SECTION_BEGIN})
    section_markers: ClassVar[Markers] = Markers(_INVOKE, _SECTION_END)
    section_ends: ClassVar[frozenset[str]] = frozenset({_SECTION_END})
    invoke: ClassVar[str] = _INVOKE
    invoke_end: ClassVar[str] = _INVOKE_END
    parameter: ClassVar[str] = _PARAMETER
    parameter_end: ClassVar[str] = _PARAMETER_END
    value_strip: ClassVar[str] = "newline"


# --- MiniMax-M3 ---------------------------------------------------------------------------------------------

_NS: Final = "]<]minimax[>["
"""The namespace token before every tag of MiniMax-M3's tool calls."""
_M3_SECTION_BEGIN: Final = _NS + "<tool_call>"
_M3_SECTION_END: Final = _NS + "</tool_call>"
_M3_INVOKE: Final = _NS + "<invoke"
_M3_INVOKE_END: Final = _NS + "</invoke>"
_M3_OPEN: Final = _NS + "<"
_M3_CLOSE: Final = _NS + "</"
_M3_IN_INVOKE: Final = Markers(_M3_INVOKE_END, _M3_SECTION_END, _M3_INVOKE, _M3_CLOSE, _M3_OPEN)
_M3_LEAF_END: Final = Markers(_M3_INVOKE_END, _M3_SECTION_END, _M3_CLOSE)
_TAG_CLOSE: Final = Markers(">")
_ENDS: Final = frozenset({_M3_INVOKE_END, _M3_SECTION_END, _M3_INVOKE})
_NESTED_LIMIT: Final = 64
"""Closing-tag marker sets kept for nested parameters (by key)."""


@register_format
class MiniMaxM3Lexer(SectionLexer):
    """MiniMax-M3: ``]<]minimax[>[<tool_call>`` sections of ``]<]minimax[>[<invoke name="NAME">`` calls
    whose parameters are XML elements named by their key, every tag preceded by the namespace token
    ``]<]minimax[>[``: ``NS<city>Paris NS</city>``; a value may nest elements (an object; repeated keys
    become a list; ``NS<item>`` children make an array).

    A value without nested elements streams as it arrives, typed by ``tool_schemas`` (without a schema
    for the tool, a value that parses as a JSON number, ``true``, ``false``, ``null``, object or array is
    that value, anything else a string). A nested value is held until its closing tag (at most
    ``max_buffered_chars``, past which its text is written as a string), then written as JSON with its
    leaves typed by the schema's nested properties (else as above). Whitespace is part of a value.

    The namespace token makes the tags unlike prose; a value that contains ``]<]minimax[>[</`` ends
    there: that cannot be told apart.
    """

    name: ClassVar[str] = "minimax_m3"
    aliases: ClassVar[tuple[str, ...]] = ("minimax-m3",)
    models: ClassVar[tuple[str, ...]] = ("MiniMax-M3",)
    detect_openers: ClassVar[tuple[str, ...]] = (_M3_SECTION_BEGIN,)
    markers: ClassVar[tuple[str, ...]] = (
        _M3_SECTION_BEGIN,
        _M3_SECTION_END,
        _M3_INVOKE,
        _M3_INVOKE_END,
        _M3_CLOSE,
        _M3_OPEN,
        _NS,
    )

    text_markers: ClassVar[Markers] = Markers(_M3_SECTION_BEGIN)
    section_begins: ClassVar[frozenset[str]] = frozenset({_M3_SECTION_BEGIN})
    section_markers: ClassVar[Markers] = Markers(_M3_INVOKE, _M3_SECTION_END)
    section_ends: ClassVar[frozenset[str]] = frozenset({_M3_SECTION_END})

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        self._key = ""
        self._body: list[str] = []
        self._body_size = 0
        self._nested_ends: dict[str, Markers] = {}

    def begin_call(self, marker: str) -> None:
        self.switch_to_header(self._invoke_tag, _TAG_CLOSE)

    def _invoke_tag(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.collect_header(buf, pos, final, _TAG_CLOSE)
        if marker == "":
            self.not_a_call_header(_M3_INVOKE)
        elif marker is not None:
            self.start_xml_call(attribute(self.take_header(), "name") or "", strip="none")
            self.switch_to_skip(self._in_invoke, _M3_IN_INVOKE)
        return resume

    def _in_invoke(self, buf: str, pos: int, final: bool) -> int:
        """Between parameters: anything but a tag is dropped."""
        resume, marker = self.skip_to(buf, pos, final, _M3_IN_INVOKE)
        if marker == _M3_OPEN:
            self.switch_to_header(self._parameter_tag, _TAG_CLOSE)
        elif marker == _M3_CLOSE:  # a closing tag without its opening: dropped
            self.switch_to_header(self._closing_tag, _TAG_CLOSE)
        elif marker is not None:
            self._end_invoke(marker)
        return resume

    def _parameter_tag(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.collect_header(buf, pos, final, _TAG_CLOSE)
        if marker == "":
            self.take_header()
            self.switch_to_skip(self._in_invoke, _M3_IN_INVOKE)
        elif marker is not None:
            self._key = self.take_header().strip()
            self.state = self._value_kind
        return resume

    def _value_kind(self, buf: str, pos: int, final: bool) -> int:
        """After a parameter's tag: a nested element (``NS<`` but not ``NS</``) or the value's text."""
        rest = buf[pos : pos + len(_M3_CLOSE)]
        if not final and len(rest) < len(_M3_CLOSE) and _M3_CLOSE.startswith(rest):
            return pos  # (held: too short to tell yet)
        if rest.startswith(_M3_OPEN) and not rest.startswith(_M3_CLOSE):
            self._body.clear()
            self._body_size = 0
            self.state = self._nested
        else:
            self.begin_value(self._key)
            self.switch_to_value(self._leaf, _M3_LEAF_END)
        return pos

    def _leaf(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_value(buf, pos, final, _M3_LEAF_END)
        if marker == _M3_CLOSE:
            self.switch_to_header(self._closing_tag, _TAG_CLOSE)
        elif marker is not None:
            self._end_invoke(marker)
        return resume

    def _closing_tag(self, buf: str, pos: int, final: bool) -> int:
        """A closing tag's name, dropped up to its ``>``."""
        resume, marker = self.collect_header(buf, pos, final, _TAG_CLOSE)
        if marker is not None:
            self.take_header()
            self.switch_to_skip(self._in_invoke, _M3_IN_INVOKE)
        return resume

    def _nested(self, buf: str, pos: int, final: bool) -> int:
        """A nested value's text, held up to the parameter's closing tag."""
        stop, resume, marker = self._nested_end().find(buf, pos, final)
        if stop > pos:
            self._body.append(buf[pos:stop])
            self._body_size += stop - pos
        if marker is not None:
            self._write_nested()
            if marker in _ENDS:
                self._end_invoke(marker)
            else:
                self.switch_to_skip(self._in_invoke, _M3_IN_INVOKE)
        return resume

    def _nested_end(self) -> Markers:
        ends = self._nested_ends.get(self._key)
        if ends is None:
            if len(self._nested_ends) >= _NESTED_LIMIT:
                self._nested_ends.clear()
            ends = self._nested_ends[self._key] = Markers(
                f"{_M3_CLOSE}{self._key}>", _M3_INVOKE_END, _M3_SECTION_END, _M3_INVOKE
            )
        return ends

    def _write_nested(self) -> None:
        """Write the held nested value of the current key as JSON."""
        body = "".join(self._body)
        self._body.clear()
        schemas = self.options.tool_schemas
        schema = schemas.get(self.call_name) if schemas else None
        if self._body_size > self.options.max_buffered_chars:
            value: Any = body
        else:
            value = m3_tree(body, _property(schema, self._key), typed=schema is not None)
        self.begin_value(self._key, "json")
        xml_args = self.xml_args
        if xml_args is not None:
            xml_args.value(msgspec.json.encode(value).decode())
            xml_args.end_value()

    def _end_invoke(self, marker: str) -> None:
        self.end_xml_call(finished=True)
        self.resume_after(marker)

    def at_end(self) -> None:
        state = self.state
        if state == self._invoke_tag:
            name = attribute(self.take_header(), "name")
            if name:
                self.start_xml_call(name, strip="none")
        elif state == self._nested and self.xml_args is not None:
            self.begin_value(self._key, "json")
            self.xml_args.value("".join(self._body))
        super().at_end()


def _property(schema: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    """The schema of property ``key`` of an object ``schema`` (None when it declares none)."""
    if schema is None:
        return None
    properties = schema.get("properties")
    prop = properties.get(key) if isinstance(properties, Mapping) else None
    return prop if isinstance(prop, Mapping) else None


def _items(schema: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The schema of the items of an array ``schema`` (None when it declares none)."""
    items = schema.get("items") if schema is not None else None
    return items if isinstance(items, Mapping) else None


def m3_tree(body: str, schema: Mapping[str, Any] | None, *, typed: bool = False) -> Any:
    """The JSON value of a nested MiniMax-M3 parameter's text ``body`` (its elements, each tag after the
    namespace token), its leaves typed by ``schema`` (``typed``: a schema was given, so an undeclared
    leaf is a string)."""
    stack: list[tuple[str, list[tuple[str, Any]], list[str]]] = [("", [], [])]
    for piece in body.split(_NS)[1:]:
        close = piece.startswith("</")
        end = piece.find(">")
        tag = piece[2 if close else 1 : end if end >= 0 else len(piece)].strip()
        text = piece[end + 1 :] if end >= 0 else ""
        if close:
            _close_through(stack, tag)
        else:
            stack.append((tag, [], []))
        if text:
            stack[-1][2].append(text)
    _close_through(stack, None)
    return _node_value(stack[0][1], "", schema, typed)


def _close_through(stack: list[tuple[str, list[tuple[str, Any]], list[str]]], tag: str | None) -> None:
    """Close the open elements into their parents, innermost first, through the one named ``tag`` (all
    of them for None); the root stays."""
    while len(stack) > 1:
        name, children, texts = stack.pop()
        stack[-1][1].append((name, (children, "".join(texts))))
        if name == tag:
            return


def _node_value(
    children: list[tuple[str, Any]], text: str, schema: Mapping[str, Any] | None, typed: bool
) -> Any:
    """An element's value: its children as an array (all ``item``) or an object (repeated keys become a
    list), else its text typed by ``schema``."""
    if not children:
        return _leaf_value(text, schema, typed)
    if all(name == "item" for name, _node in children):
        item_schema = _items(schema)
        return [_node_value(nodes, inner, item_schema, typed) for _name, (nodes, inner) in children]
    result: dict[str, Any] = {}
    repeated: set[str] = set()
    for name, (grandchildren, inner) in children:
        value = _node_value(grandchildren, inner, _property(schema, name), typed)
        if name not in result:
            result[name] = value
        elif name in repeated:
            result[name].append(value)
        else:
            result[name] = [result[name], value]
            repeated.add(name)
    return result


_LEAF_TYPES: Final = {"integer": int, "number": float}


def _leaf_value(text: str, schema: Mapping[str, Any] | None, typed: bool) -> Any:
    """A leaf's text typed by its ``schema``: a declared number, integer or boolean when it reads as one,
    a string when the schema says so (or, given a schema, declares nothing), else JSON when it parses."""
    declared = schema.get("type") if schema is not None else None
    if declared == "string" or (typed and schema is None):
        return text
    stripped = text.strip()
    convert = _LEAF_TYPES.get(declared) if isinstance(declared, str) else None
    if convert is not None:
        try:
            number = convert(stripped)
        except ValueError:
            return text
        return number if math.isfinite(number) else text
    if declared == "boolean" and stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    try:
        value = msgspec.json.decode(stripped)
    except msgspec.DecodeError:
        return text
    return value if not isinstance(value, str) else text

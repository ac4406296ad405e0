"""The seeds' own text formats (``STREAMFOLD_STREAM_PARSER=xml | json | sentinel``): tool calls that an
agent's system prompt asks the model to write into its text.

``xml``::

    <tool name="write_file">
      <arguments>
        <arg name="path">src/app.py</arg>
        <arg name="content">__START_CONTENT__
    print("</arg> is safe in here")
    __END_CONTENT__</arg>
      </arguments>
    </tool>

gives ``write_file {"path": "src/app.py", "content": "print(\\"</arg> is safe in here\\")\\n"}``.

``json``::

    {"tool": {"function": "search", "parameters": {"query": "streamfold"}}}
    {"tools": [{"function": "a", "parameters": {}}, {"function": "b", "parameters": {"x": 1}}]}

``sentinel``::

    [[SEG_START {"type": "tool_call", "tool_name": "search"}]]{"query": "streamfold"}[[SEG_END]]
    [[SEG_START {"type": "write_file", "path": "notes.md"}]]
    # Notes
    [[SEG_END]]
    [[SEG_START {"type": "patch_file", "path": "app.py"}]]--- a/app.py ...[[SEG_END]]

gives ``search {"query": "streamfold"}``, ``write_file {"path": "notes.md", "content": "# Notes\\n"}`` and
``patch_file {"path": "app.py", "patch": "--- a/app.py ..."}``, the file text streaming into the JSON
string character by character as it arrives, so the segment emitter streams the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar, Final

import msgspec

from operators.delimiters._families import TaggedCallLexer
from operators.delimiters._invoke import attribute
from operators.delimiters._lexer import Channel, FormatLexer, LexerOptions, LexerOutput
from operators.delimiters._registry import register_format
from operators.delimiters._scan import HEADER_LIMIT, JsonArgs, Markers, json_escape, space_end
from operators.delimiters._wrapped import WrappedJsonLexer

__all__ = ["JsonToolLexer", "SentinelLexer", "XmlToolLexer"]

_TAG_LIMIT: Final = 256
"""Longest ``<tool ...>`` / ``<arg ...>`` tag; a longer one is not a tag."""

# --- xml ----------------------------------------------------------------------------------------------------

_TOOL: Final = "<tool"
_TOOL_END: Final = "</tool>"
_ARGUMENTS: Final = "<arguments>"
_ARGUMENTS_END: Final = "</arguments>"
_ARG: Final = "<arg"
_ARG_END: Final = "</arg>"
_START_CONTENT: Final = "__START_CONTENT__"
_END_CONTENT: Final = "__END_CONTENT__"

_TAG_END: Final = Markers(">")
_IN_TOOL: Final = Markers(_ARGUMENTS, _ARGUMENTS_END, _ARG, _TOOL_END)
_VALUE_END: Final = Markers(_ARG_END)
_RAW_END: Final = Markers(_END_CONTENT)
_AFTER_RAW: Final = Markers(_ARG_END, _TOOL_END)
_NAME_TAG: Final = re.compile(r"""\s+name\s*=\s*(?:"[^"<>]*"|'[^'<>]*')\s*""")


@register_format
class XmlToolLexer(TaggedCallLexer):
    """``<tool name="NAME"><arguments><arg name="KEY">VALUE</arg>...</arguments></tool>``.

    Each ``<arg>`` becomes a key of the JSON arguments as it streams (see `XmlArguments`):
    with ``tool_schemas`` the schema types the value; without, a value that parses as a JSON number,
    ``true``, ``false``, ``null``, object or array is that value (write nested values as JSON), anything
    else a string streamed as it arrives. One leading and one trailing newline are not part of a value;
    the text is taken verbatim (XML entities are not decoded). ``<arguments>`` may be left out.

    A value that starts with ``__START_CONTENT__`` (after whitespace) is raw text up to
    ``__END_CONTENT__``: always a string, ``</arg>`` and ``</tool>`` inside it are content, and only the
    newline right after ``__START_CONTENT__`` is dropped (so a file that ends with a newline keeps it).
    Without those markers a value ends at the first ``</arg>``. ``<tool`` is plain text: it opens a call
    only as a tag ``<tool name="...">``, so prose such as "the <tool> tag" stays text. Whitespace between
    the tags is dropped; other stray text inside a call passes through as text.
    """

    name: ClassVar[str] = "xml"
    models: ClassVar[tuple[str, ...]] = ("any model given the synchronous handler API's instructions",)
    detect_openers: ClassVar[tuple[str, ...]] = ('<tool name="',)
    markers: ClassVar[tuple[str, ...]] = (
        _TOOL,
        _TOOL_END,
        _ARGUMENTS,
        _ARGUMENTS_END,
        _ARG,
        _ARG_END,
        _START_CONTENT,
        _END_CONTENT,
    )
    opener: ClassVar[str] = _TOOL

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        self._tag: list[str] = []
        """The text of the ``<tool ...>`` or ``<arg ...>`` tag being read."""
        self._tag_size = 0
        self._space = ""
        """Whitespace of a stray run held until it is known whether the run has text (kept) or not."""
        self._run_has_text = False

    def confirm(self, buf: str, pos: int, final: bool) -> int:
        """After ``<tool``: a call only for a tag ``<tool name="NAME">``."""
        if not self._tag and not buf[pos].isspace():
            self.not_a_call()  # <tools>, <tool>, <toolbox ...
            return pos
        tag, resume = self._read_tag(buf, pos, final, hold=True)
        if tag is None:
            if self._tag_size > _TAG_LIMIT:
                self._tag.clear()
                self.not_a_call()
            return resume
        if _NAME_TAG.fullmatch(tag) is None:
            self.not_a_call()
            return resume
        self.confirmed()
        self.start_xml_call(attribute(tag, "name") or "", strip="newline")
        self.state = self._in_tool
        return resume

    def _read_tag(self, buf: str, pos: int, final: bool, *, hold: bool) -> tuple[str | None, int]:
        """Collect a tag's text up to ``>`` (held as tentative text too with ``hold``): ``(text, resume)``
        once it closed, ``(None, resume)`` before."""
        stop, resume, marker = _TAG_END.find(buf, pos, final)
        if stop > pos:
            self._tag.append(buf[pos:stop])
            self._tag_size += stop - pos
            if hold:
                self.hold_tentative(buf[pos:stop])
        if marker is None:
            return None, resume
        if hold:
            self.hold_tentative(marker)
        tag = "".join(self._tag)
        self._tag.clear()
        self._tag_size = 0
        return tag, resume

    def _in_tool(self, buf: str, pos: int, final: bool) -> int:
        """Between the tags of a call."""
        stop, resume, marker = _IN_TOOL.find(buf, pos, final)
        if stop > pos:
            self._stray(buf[pos:stop], self.emit_text)
        if marker is not None:
            self._end_stray(self.emit_text)
        if marker == _ARG:
            self.state = self._arg_tag
        elif marker == _TOOL_END:
            self.end_xml_call(finished=True)
            self.call_done()
        return resume

    def _arg_tag(self, buf: str, pos: int, final: bool) -> int:
        tag, resume = self._read_tag(buf, pos, final, hold=False)
        if tag is None:
            if self._tag_size > _TAG_LIMIT:
                self.emit_text(_ARG + "".join(self._tag))  # not a tag: stray text inside the call
                self._tag.clear()
                self._tag_size = 0
                self.state = self._in_tool
            return resume
        key = attribute(tag, "name") if _NAME_TAG.fullmatch(tag) else None
        if key is None:
            self.emit_text(_ARG + tag + ">")  # not an <arg name="..."> tag: stray text inside the call
            self.state = self._in_tool
            return resume
        self._key = key
        self._lead: list[str] = []
        self._lead_size = 0
        self.state = self._value_start
        return resume

    def _value_start(self, buf: str, pos: int, final: bool) -> int:
        """Leading whitespace of a value is held until it is known whether ``__START_CONTENT__`` follows."""
        index = space_end(buf, pos)
        if index > pos:
            self._lead.append(buf[pos:index])
            self._lead_size += index - pos
        if index == len(buf) and not final and self._lead_size <= HEADER_LIMIT:
            return index
        rest = buf[index : index + len(_START_CONTENT)]
        if rest == _START_CONTENT:
            self.begin_value(self._key, "string")
            self.begin_raw_string()
            self.state = self._raw_value
            return index + len(_START_CONTENT)
        if rest and _START_CONTENT.startswith(rest) and not final:
            return index  # perhaps __START_CONTENT__: wait
        self.begin_value(self._key)
        xml_args = self.xml_args
        if xml_args is not None:
            xml_args.value("".join(self._lead))
        self.state = self._value
        return index

    def _value(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_value(buf, pos, final, _VALUE_END)
        if marker is not None:
            self._end_value()
        return resume

    def _raw_value(self, buf: str, pos: int, final: bool) -> int:
        """Between ``__START_CONTENT__`` and ``__END_CONTENT__``: raw text, JSON-escaped as it streams."""
        resume, marker = self.stream_raw_string(buf, pos, final, _RAW_END)
        if marker is not None:
            self.state = self._after_raw
        return resume

    def _after_raw(self, buf: str, pos: int, final: bool) -> int:
        """After ``__END_CONTENT__``: whitespace up to ``</arg>``; other text is kept in the value."""
        stop, resume, marker = _AFTER_RAW.find(buf, pos, final)
        if stop > pos:
            self._stray(buf[pos:stop], self._emit_escaped)
        if marker is not None:
            self._end_stray(self._emit_escaped)
            self._end_value()
            if marker == _TOOL_END:
                self.end_xml_call(finished=True)
                self.call_done()
        return resume

    def _emit_escaped(self, text: str) -> None:
        self.emit_args(json_escape(text))

    def _stray(self, text: str, sink: Callable[[str], None]) -> None:
        """Text between tags: a run of whitespace alone is dropped, a run with text is kept whole."""
        body = text.rstrip()
        if body:
            sink(self._space + body)
            self._space = text[len(body) :]
            self._run_has_text = True
        else:
            self._space += text
            if len(self._space) > HEADER_LIMIT:
                if self._run_has_text:
                    sink(self._space)
                self._space = ""

    def _end_stray(self, sink: Callable[[str], None]) -> None:
        """A tag ends the run of stray text."""
        if self._run_has_text and self._space:
            sink(self._space)
        self._space = ""
        self._run_has_text = False

    def _end_value(self) -> None:
        if self.xml_args is not None and self.xml_args.in_value:
            self.xml_args.end_value()
        self.state = self._in_tool

    def at_end(self) -> None:
        if self.state == self._in_tool:
            self._end_stray(self.emit_text)
        elif self.state == self._after_raw:
            self._end_stray(self._emit_escaped)
        elif self.state == self._value_start:
            self.begin_value(self._key)
            if self.xml_args is not None:
                self.xml_args.value("".join(self._lead))
        super().at_end()


# --- json ---------------------------------------------------------------------------------------------------

_FENCE: Final = "```"

_BRACE: Final = Markers("{")
_OPENING_LIMIT: Final = 256
"""How far past a ``{`` the lexer looks for ``"tool": {`` / ``"tools": [`` before taking it for text."""


def _opening(text: str) -> tuple[bool | None, str, int]:
    """Whether ``text`` (from a ``{``) opens ``{"tool": {`` or ``{"tools": [``.

    ``(True, key, index of the inner bracket)``, ``(False, "", 0)``, or ``(None, "", 0)`` while undecided.
    """
    index = space_end(text, 1)
    size = len(text)
    if index == size:
        return None, "", 0
    if text[index] != '"':
        return False, "", 0
    close = text.find('"', index + 1)
    key = text[index + 1 : size if close < 0 else close]
    if close < 0:
        return (None if "tools".startswith(key) else False), "", 0
    if key not in ("tool", "tools"):
        return False, "", 0
    index = space_end(text, close + 1)
    if index == size:
        return None, "", 0
    if text[index] != ":":
        return False, "", 0
    index = space_end(text, index + 1)
    if index == size:
        return None, "", 0
    return (text[index] == ("{" if key == "tool" else "[")), key, index


@register_format
class JsonToolLexer(WrappedJsonLexer):
    """``{"tool": {"function": "NAME", "parameters": {...}}}`` anywhere in the text; parallel calls as
    several such objects or as ``{"tools": [{...}, {...}]}``.

    ``"name"`` may stand for ``"function"`` and ``"arguments"`` for ``"parameters"`` (a JSON-string value
    is decoded); an ``"id"`` before the arguments becomes the call id. The arguments stream verbatim as
    they arrive. A ``{`` opens a call only when ``"tool": {`` or ``"tools": [`` follows it, so other JSON
    and braces in prose stay text; a Markdown fence around the object stays text too. A call object that
    is not of this shape ends the call (unfinished) and the rest is text; a closing fence outside a JSON
    string cuts the call it interrupts.
    """

    name: ClassVar[str] = "json"
    models: ClassVar[tuple[str, ...]] = ("any model given the synchronous handler API's instructions",)
    detect_openers: ClassVar[tuple[str, ...]] = ('{"tool":', '{"tools":')
    markers: ClassVar[tuple[str, ...]] = ("{", "}", "[", "]", _FENCE)
    name_keys: ClassVar[frozenset[str]] = frozenset({"function", "name"})
    argument_keys: ClassVar[frozenset[str]] = frozenset({"parameters", "arguments"})
    text_markers: ClassVar[Markers] = _BRACE
    wrapper_markers: ClassVar[Markers] = Markers(_FENCE)

    def start(self, buf: str, pos: int, final: bool) -> int:
        stop, _resume, marker = _BRACE.find(buf, pos, final)
        if stop > pos:
            self.emit_text(buf[pos:stop])
        if marker is not None:
            self.state = self._confirm
        return stop

    def _confirm(self, buf: str, pos: int, final: bool) -> int:
        """At a ``{``: a call if ``"tool": {`` or ``"tools": [`` follows."""
        opens, key, inner = _opening(buf[pos : pos + _OPENING_LIMIT])
        if opens is None and not final and len(buf) - pos < _OPENING_LIMIT:
            return pos  # not decided yet: hold the few characters seen
        if not opens:
            self.emit_text("{")
            self.state = self.start
            return pos + 1
        if key == "tool":
            self.enter_wrapper()
            return pos + inner
        self.in_list = True
        self.state = self.list_item
        return pos + inner + 1

    def list_item(self, buf: str, pos: int, final: bool) -> int:
        """Inside ``"tools": [``: a call object, or ``]``."""
        index = space_end(buf, pos)
        if index < len(buf) and buf[index] == "]":
            self.list_closed()
            return index + 1
        return super().list_item(buf, pos, final)

    def list_closed(self) -> None:
        self.state = self._outer_close

    def _outer_close(self, buf: str, pos: int, final: bool) -> int:
        """The outer object's ``}`` (whitespace before it is dropped); anything else is text."""
        index, found = self.expect_after_space(buf, pos, final, ("}",))
        if found:
            self.take_tentative()
            self.state = self.start
            return index + 1
        if found == "":
            self.not_a_call()
        return index

    def wrapper_closed(self) -> None:
        self.end_call(finished=True)
        self.state = self.list_next if self.in_list else self._outer_close

    def wrapper_interrupted(self, marker: str | None) -> None:
        self.end_call(finished=False)
        if marker is not None:
            self.emit_text(marker)
        self.state = self.start

    def at_end(self) -> None:
        if self.state == self._outer_close:
            self.take_tentative()
        super().at_end()


# --- sentinel -----------------------------------------------------------------------------------------------

_SEG_START: Final = "[[SEG_START"
_SEG_END: Final = "[[SEG_END]]"
_HEADER_CLOSE: Final = "]]"

_SEGMENT: Final = Markers(_SEG_START)
_SEGMENT_BODY: Final = Markers(_SEG_END, _SEG_START)
_FILE_BODY: Final = Markers(_SEG_END)
_FILE_KEYS: Final = {"write_file": "content", "patch_file": "patch"}
_TEXT_ROUTES: Final[dict[str, Channel]] = {
    "text": "content",
    "reasoning": "reasoning",
    "think": "reasoning",
    "thinking": "reasoning",
}
_decode_header: Final = msgspec.json.Decoder(dict[str, Any])
_encode: Final = msgspec.json.encode


@register_format
class SentinelLexer(FormatLexer):
    """``[[SEG_START {JSON header}]]BODY[[SEG_END]]`` segments; the header's ``type`` says what the body is:

    - ``tool_call``: a call named by ``tool_name`` (or ``name``), with the model's ``call_id`` (or ``id``)
      if given; the body is the JSON arguments, streamed as they arrive (markers inside JSON strings are
      content). ``"arguments": {...}`` in the header is accepted instead of a body.
    - ``write_file`` / ``patch_file``: a call of that name whose arguments are
      ``{"path": PATH, "content": BODY}`` (``"patch"`` for ``patch_file``): the body is the file text,
      JSON-escaped character by character as it streams. A newline right after the header is dropped;
      the body ends at the first ``[[SEG_END]]``, which therefore cannot appear in a file.
    - ``text`` is content, ``reasoning`` (``think``, ``thinking``) is reasoning.

    A header that is not a JSON object with a known ``type`` (or a ``tool_call`` without a name) is not a
    segment: it passes through as text, as does prose that mentions ``[[SEG_START`` without a ``{``
    after it. A stream cut inside a segment leaves its call unfinished.
    """

    name: ClassVar[str] = "sentinel"
    models: ClassVar[tuple[str, ...]] = ("any model given the synchronous handler API's instructions",)
    detect_openers: ClassVar[tuple[str, ...]] = (_SEG_START,)
    markers: ClassVar[tuple[str, ...]] = (_SEG_START, _SEG_END, _HEADER_CLOSE)
    text_markers: ClassVar[Markers] = _SEGMENT

    def opened(self, marker: str) -> None:
        self.hold_tentative(_SEG_START)
        self._header_scan = JsonArgs()
        self._header_text: list[str] = []
        self.state = self._header_open

    def _header_open(self, buf: str, pos: int, final: bool) -> int:
        """After ``[[SEG_START``: whitespace, then the header's ``{``."""
        index, char = self.char_after_space(buf, pos)
        if char == "{":
            self.state = self._header_json
        elif char:
            self.not_a_call()
        return index

    def _header_json(self, buf: str, pos: int, final: bool) -> int:
        stop, resume, marker = self._header_scan.scan(buf, pos, _SEGMENT_BODY, final, stop_at_close=True)
        if stop > pos:
            self._header_text.append(buf[pos:stop])
            if not self.hold_tentative(buf[pos:stop]):
                self.not_a_call()
                return stop
        if marker == "":
            self.state = self._header_close
        elif marker is not None:
            self.not_a_call()
            return stop
        return resume

    def _header_close(self, buf: str, pos: int, final: bool) -> int:
        """After the header object: whitespace, then ``]]``."""
        index, found = self.expect_after_space(buf, pos, final, (_HEADER_CLOSE,))
        if found:
            self.hold_tentative(found)
            self._begin()
            return index + len(found)
        if found == "":
            self.not_a_call()
        return index

    def _begin(self) -> None:
        """The header is complete: decide what the body is."""
        try:
            header = _decode_header.decode("".join(self._header_text))
        except msgspec.DecodeError:
            header = {}
        kind = header.get("type")
        if kind == "tool_call":
            name = header.get("tool_name", header.get("name"))
            if not isinstance(name, str) or not name:
                self.not_a_call()
                return
            call_id = header.get("call_id", header.get("id"))
            self.take_tentative()
            self.start_call(name, call_id if isinstance(call_id, str) else None)
            arguments = header.get("arguments")
            if isinstance(arguments, dict):
                self.emit_args(_encode(arguments).decode())
            self.state = self._tool_body
        elif kind in _FILE_KEYS:
            self.take_tentative()
            self.start_call(kind)
            path = header.get("path")
            opening = '{"path": ' + _encode(path).decode() + ", " if isinstance(path, str) else "{"
            self.emit_args(opening + '"' + _FILE_KEYS[kind] + '": "')
            self.begin_raw_string()
            self.state = self._file_body
        elif kind in _TEXT_ROUTES:
            self.take_tentative()
            self._route = _TEXT_ROUTES[kind]
            self.state = self._text_body
        else:
            self.not_a_call()

    def _tool_body(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_json_args(buf, pos, final, _SEGMENT_BODY)
        if marker == _SEG_END:
            self.end_call(finished=True)
            self.state = self.start
        elif marker is not None:
            json_args = self.json_args
            self.end_call(finished=json_args is not None and json_args.complete)
            self.opened(marker)
        return resume

    def _file_body(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_raw_string(buf, pos, final, _FILE_BODY)
        if marker is not None:
            self.emit_args('"}')
            self.end_call(finished=True)
            self.state = self.start
        return resume

    def _text_body(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_text(buf, pos, final, _SEGMENT_BODY, self._route)
        if marker == _SEG_END:
            self.state = self.start
        elif marker is not None:
            self.opened(marker)
        return resume

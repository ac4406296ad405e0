"""Sections of ``<invoke name="NAME">`` calls with ``<parameter name="KEY">VALUE</parameter>`` parameters,
the layout MiniMax-M2, DeepSeek DSML, Seed-OSS, Step-3 and Kimi-K3 share (with different tag spellings)."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Final

from operators.delimiters._families import SectionLexer
from operators.delimiters._scan import Markers, ValueType

__all__ = ["InvokeSectionLexer", "attribute"]

_TAG_END: Final = Markers(">")
_ATTRIBUTES: dict[str, re.Pattern[str]] = {}


def attribute(tag: str, name: str) -> str | None:
    """The value of attribute ``name`` in the text of a tag (``name="v"``, ``name='v'`` or ``name=v``)."""
    pattern = _ATTRIBUTES.get(name)
    if pattern is None:
        pattern = _ATTRIBUTES[name] = re.compile(
            rf"""(?<![\w-]){re.escape(name)}\s*=\s*(?:"(?P<d>[^"]*)"|'(?P<s>[^']*)'|(?P<u>[^\s"'>]+))"""
        )
    match = pattern.search(tag)
    if match is None:
        return None
    return match["d"] if match["d"] is not None else match["s"] if match["s"] is not None else match["u"]


class InvokeSectionLexer(SectionLexer):
    """Calls ``INVOKE name="NAME">`` ... ``INVOKE_END`` inside a section, each with parameters
    ``PARAMETER name="KEY">VALUE PARAMETER_END`` turned into JSON by `XmlArguments`.

    Subclasses set the tag spellings (``invoke = "<invoke"``: the tag's attributes run up to ``tag_end``,
    ``>`` by default), the section markers, ``value_strip``, and may name the attributes that hold the
    names (``invoke_attribute``, ``parameter_attribute``), read names otherwise (`tag_name`,
    ``<function=NAME>``) and type values from the tag (`parameter_type`). Text between parameters
    is dropped; a missing ``PARAMETER_END`` is tolerated before ``INVOKE_END``, the next ``INVOKE``, one
    of ``call_closers`` or the section end, and a missing ``INVOKE_END`` before the next ``INVOKE``, one
    of ``call_closers`` or the section end. A stream cut inside a call's tag leaves a cut-off call when
    the tag names the tool.
    """

    invoke: ClassVar[str]
    invoke_end: ClassVar[str]
    parameter: ClassVar[str]
    parameter_end: ClassVar[str]
    value_strip: ClassVar[str] = "newline"
    tag_end: ClassVar[Markers] = _TAG_END
    """What ends the attributes of an invoke or parameter tag."""
    invoke_attribute: ClassVar[str] = "name"
    parameter_attribute: ClassVar[str] = "name"
    """The attributes that hold the tool's and the parameter's names (see `tag_name`)."""
    call_closers: ClassVar[tuple[str, ...]] = ()
    """Section markers that close a call whose ``INVOKE_END`` is missing (they must be in
    ``section_markers``), besides the next ``INVOKE`` and the section's end."""
    _in_invoke_markers: ClassVar[Markers]
    _value_markers: ClassVar[Markers]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "invoke" in cls.__dict__:
            ends = (*cls.section_ends, *cls.call_closers)
            cls._in_invoke_markers = Markers(cls.parameter, cls.invoke_end, cls.invoke, *ends)
            cls._value_markers = Markers(cls.parameter_end, cls.invoke_end, cls.invoke, *ends)

    def parameter_type(self, tag: str) -> ValueType | None:
        """The type a parameter tag declares (None: the tool schema, or the value itself, decides)."""
        return None

    def tag_name(self, tag: str, key: str) -> str:
        """The name in the text of an invoke or parameter tag (after ``invoke`` or ``parameter``, up to
        ``tag_end``): its attribute ``key``; a format whose tags are ``<function=NAME>`` overrides it."""
        return attribute(tag, key) or ""

    def begin_call(self, marker: str) -> None:
        self.state = self._invoke_tag

    def _invoke_tag(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.collect_header(buf, pos, final, self.tag_end)
        if marker == "":
            self.emit_text(self.invoke + self.take_header())
            self.after_call()
        elif marker is not None:
            name = self.tag_name(self.take_header(), self.invoke_attribute)
            self.start_xml_call(name, strip=self.value_strip)
            self.state = self._in_invoke
        return resume

    def _in_invoke(self, buf: str, pos: int, final: bool) -> int:
        """Between parameters (whitespace; anything else is dropped)."""
        _stop, resume, marker = self._in_invoke_markers.find(buf, pos, final)
        if marker is not None:
            self._on_marker(marker)
        return resume

    def _parameter_tag(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.collect_header(buf, pos, final, self.tag_end)
        if marker == "":
            self.take_header()
            self.state = self._in_invoke
        elif marker is not None:
            tag = self.take_header()
            self.begin_value(self.tag_name(tag, self.parameter_attribute), self.parameter_type(tag))
            self.state = self._value
        return resume

    def _value(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_value(buf, pos, final, self._value_markers)
        if marker is not None:
            if marker == self.parameter_end:
                self.state = self._in_invoke
            else:
                self._on_marker(marker)
        return resume

    def _on_marker(self, marker: str) -> None:
        if marker == self.parameter:
            self.state = self._parameter_tag
        else:  # the invoke's end, or (its end tag missing) the next invoke or the section's end
            self.end_xml_call(finished=True)
            self.resume_after(marker)

    def at_end(self) -> None:
        if self.state == self._invoke_tag:  # cut off in the call's tag: a cut-off call if it has a name
            name = self.tag_name(self.take_header(), self.invoke_attribute)
            if name:
                self.start_xml_call(name, strip=self.value_strip)
        super().at_end()

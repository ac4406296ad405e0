"""Mistral tool calls, both generations of the tokenizer:

- before v11 (Mistral 7B v0.3, Nemo, Small up to 3.1): one ``[TOOL_CALLS]`` then a JSON list,
  ``[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}, {...}]``;
- v11 and later (Small 3.2, Magistral, Devstral 2, Ministral 3): one ``[TOOL_CALLS]`` per call,
  ``[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}``, or with the model's id
  ``[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris"}``; servers that drop the
  ``[ARGS]`` control token when they detokenize give ``[TOOL_CALLS]get_weather{"city": "Paris"}``, the
  layout vLLM's Mistral parser reads.
"""

from __future__ import annotations

import re
import uuid
from typing import ClassVar, Final

from operators.delimiters._registry import register_format
from operators.delimiters._scan import JsonArgs, Markers
from operators.delimiters._wrapped import WrappedJsonLexer

__all__ = ["MistralLexer", "mistral_call_id"]

_TOOL_CALLS: Final = "[TOOL_CALLS]"
_ARGS: Final = "[ARGS]"
_CALL_ID_MARKER: Final = "[CALL_ID]"

_TEXT: Final = Markers(_TOOL_CALLS)
_NAME_END: Final = Markers(_ARGS, _CALL_ID_MARKER)
_ID_END: Final = Markers(_ARGS)
_NAME: Final = re.compile(r"[\w.:/-]*")
_CALL_ID: Final = re.compile(r"[\w-]*")


def mistral_call_id(index: int) -> str:
    """An id factory for Mistral models: 9 alphanumeric characters, the only ids their chat templates
    accept when the call is sent back in the next turn (``index`` is unused)."""
    del index
    return uuid.uuid4().hex[:9]


@register_format
class MistralLexer(WrappedJsonLexer):
    """Mistral ``[TOOL_CALLS]``, both layouts, told apart by what follows the marker: ``[`` (a list of
    ``{"name": ..., "arguments": {...}}`` objects, a lone object is accepted too) or a tool name.

    v11 arguments end where their JSON value closes (text after it is content, whitespace between calls
    is dropped); a pre-v11 list ends at its ``]``. Arguments stream verbatim as they arrive and markers
    inside JSON strings are content. A ``[TOOL_CALLS]`` outside a string cuts the call it interrupts
    (unfinished). The model's id is kept when it comes before the arguments (``[CALL_ID]``, or an
    ``"id"`` key before ``"arguments"``); otherwise the rewriter's ``id_factory`` makes one: pass
    `mistral_call_id` to get ids a Mistral chat template accepts back.

    ``[TOOL_CALLS]`` is a control token, but it is taken for a call only when a list, an object,
    ``NAME[ARGS]`` / ``NAME[CALL_ID]`` or ``NAME{`` (no ``[ARGS]``, the ``{`` right after the name)
    follows, so prose that mentions it stays text; prose that writes ``[TOOL_CALLS]name[ARGS]`` or
    ``[TOOL_CALLS]name{`` cannot be told apart. A stream cut inside a call leaves it unfinished
    (one cut inside ``NAME`` gives a call named by what arrived).
    """

    name: ClassVar[str] = "mistral"
    aliases: ClassVar[tuple[str, ...]] = ("mistral_v11",)
    models: ClassVar[tuple[str, ...]] = ("Mistral", "Mistral Small / Medium / Large", "Magistral", "Devstral")
    detect_openers: ClassVar[tuple[str, ...]] = (_TOOL_CALLS,)
    markers: ClassVar[tuple[str, ...]] = (_TOOL_CALLS, _ARGS, _CALL_ID_MARKER)
    text_markers: ClassVar[Markers] = _TEXT
    wrapper_markers: ClassVar[Markers] = _TEXT
    call_openers: ClassVar[tuple[str, ...]] = ("{",)
    """What opens a call inside a pre-v11 list (for the guard of tools not offered, ``._guard``)."""

    # --- text -----------------------------------------------------------------------------------------------

    def opened(self, marker: str) -> None:
        """``[TOOL_CALLS]`` came: hold it until what follows says whether a call opens."""
        self.hold_tentative(marker)
        self.state = self._after_marker

    def _after_marker(self, buf: str, pos: int, final: bool) -> int:
        index, char = self.char_after_space(buf, pos)
        if char == "[":
            self.hold_tentative(char)
            self.state = self._list_open
            return index + 1
        if char == "{":
            self.enter_wrapper()
        elif char and _NAME.match(buf, index).end() > index:  # type: ignore[union-attr]
            self._name: list[str] = []
            self._call_id: list[str] = []
            self.state = self._v11_name
        elif char:
            self.not_a_call()
        return index

    def _list_open(self, buf: str, pos: int, final: bool) -> int:
        """After ``[TOOL_CALLS] [``: a call object, or ``]`` for an empty list."""
        index, char = self.char_after_space(buf, pos)
        if char == "]":
            self.take_tentative()
            self.state = self._between_calls
            return index + 1
        if char == "{":
            self.enter_wrapper(in_list=True)
        elif char:
            self.not_a_call()
        return index

    # --- v11: NAME[CALL_ID]ID[ARGS]{...} --------------------------------------------------------------------

    def _v11_name(self, buf: str, pos: int, final: bool) -> int:
        return self._v11_word(buf, pos, final, _NAME, self._name, _NAME_END)

    def _v11_call_id(self, buf: str, pos: int, final: bool) -> int:
        return self._v11_word(buf, pos, final, _CALL_ID, self._call_id, _ID_END)

    def _v11_word(
        self, buf: str, pos: int, final: bool, word: re.Pattern[str], parts: list[str], ends: Markers
    ) -> int:
        """The name or the id: characters of ``word`` (held, and collected in ``parts``), then one of
        ``ends``."""
        end = word.match(buf, pos).end()  # type: ignore[union-attr]
        if end > pos:
            parts.append(buf[pos:end])
            if not self.hold_tentative(buf[pos:end]):
                self.not_a_call()
                return end
        return self._header_marker(buf, end, final, ends)

    def _header_marker(self, buf: str, index: int, final: bool, markers: Markers) -> int:
        """After a name or an id: one of ``markers`` goes on, or the arguments' ``{`` right away (the
        ``[ARGS]`` token dropped); anything else means it was not a call."""
        if index == len(buf):
            return index
        if buf[index] == "{":
            self._open_v11_call()
            return index
        stop, resume, marker = markers.find(buf, index, final)
        if stop != index:
            self.not_a_call()
            return index
        if marker is None:
            return index  # the start of a marker: wait for the rest
        if marker == _CALL_ID_MARKER:
            self.hold_tentative(marker)
            self.state = self._v11_call_id
            return resume
        self._open_v11_call()
        return resume

    def _open_v11_call(self) -> None:
        self.take_tentative()
        self.start_call("".join(self._name), "".join(self._call_id) or None)
        self.json_args = JsonArgs()
        self.state = self._v11_arguments

    def _v11_arguments(self, buf: str, pos: int, final: bool) -> int:
        json_args = self.json_args
        assert json_args is not None
        stop, resume, marker = json_args.scan(buf, pos, _TEXT, final, stop_at_close=True)
        if stop > pos:
            self.emit_args(json_args.trim(buf[pos:stop]))
        if marker == "":
            self.end_call(finished=True)
            self.state = self._between_calls
        elif marker is not None:
            self.end_call(finished=False)
            self.opened(marker)
        return resume

    def _between_calls(self, buf: str, pos: int, final: bool) -> int:
        """After a call: whitespace is dropped if another ``[TOOL_CALLS]`` or the end follows."""
        index, found = self.expect_after_space(buf, pos, final, (_TOOL_CALLS,))
        if found:
            self.take_tentative()
            self.opened(found)
            return index + len(found)
        if found == "":
            self.not_a_call()
        return index

    # --- before v11: [{...}, {...}] -------------------------------------------------------------------------

    def wrapper_closed(self) -> None:
        self.end_call(finished=True)
        self.state = self.list_next if self.in_list else self._between_calls

    def wrapper_interrupted(self, marker: str | None) -> None:
        self.end_call(finished=False)
        if marker is None:
            self.state = self.start  # not the expected object: what follows is text
        else:
            self.opened(marker)

    def list_closed(self) -> None:
        self.state = self._between_calls

    # --- end of input ---------------------------------------------------------------------------------------

    def at_end(self) -> None:
        state = self.state
        if state in (self._v11_name, self._v11_call_id) and self._name:
            self.take_tentative()
            self.start_call("".join(self._name), "".join(self._call_id) or None)
        elif state == self._between_calls:
            self.take_tentative()
        super().at_end()

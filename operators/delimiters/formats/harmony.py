"""gpt-oss harmony: messages ``<|start|>AUTHOR<|channel|>CHANNEL<|message|>BODY<|end|>`` whose channel
says what the body is, and whose recipient (``to=functions.NAME``) makes it a tool call.

::

    <|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary
    to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|><|start|>assistant
    <|channel|>final<|message|>It is sunny.<|return|>

(one line) gives the reasoning ``Need the weather.``, the call ``get_weather {"city":"Paris"}`` and the
content ``It is sunny.``.
"""

from __future__ import annotations

import re
from typing import ClassVar, Final, NamedTuple

from operators.delimiters._lexer import Channel, FormatLexer, LexerOptions, LexerOutput, Rule, State
from operators.delimiters._registry import register_format
from operators.delimiters._rules import CollectRule, PassRule, RouteRule
from operators.delimiters._scan import Markers, space_end
from pipeline.models import ToolCallDelta

__all__ = ["HarmonyLexer"]

_START: Final = "<|start|>"
_CHANNEL: Final = "<|channel|>"
_CONSTRAIN: Final = "<|constrain|>"
_MESSAGE: Final = "<|message|>"
_END: Final = "<|end|>"
_RETURN: Final = "<|return|>"
_CALL: Final = "<|call|>"

_TERMINATORS: Final = frozenset({_END, _RETURN, _CALL})
_OPENERS: Final = frozenset({_START, _CHANNEL})

_OUTSIDE: Final = Markers(_START, _CHANNEL, _MESSAGE, _END, _RETURN, _CALL, _CONSTRAIN)
_HEADER: Final = Markers(_MESSAGE, _CHANNEL, _CONSTRAIN, _START, _END, _RETURN, _CALL)
_BODY: Final = Markers(_END, _RETURN, _CALL, _START, _CHANNEL)

_HEADER_LIMIT: Final = 256
"""Longest message header; a longer one is not a header and passes through as text."""
_SNIFF_LIMIT: Final = 4096
"""Longest run of whitespace held at the start of a built-in tool's input before it counts as text input."""
_HEADER_WORDS: Final = re.compile(r"[\w.:/=\- ]*")
_HEADER_PARTS: Final = re.compile("(" + re.escape(_CHANNEL) + "|" + re.escape(_CONSTRAIN) + ")")
_FUNCTIONS_PREFIX: Final = "functions."
_CHANNEL_ROUTES: Final[dict[str, Channel]] = {
    "analysis": "reasoning",
    "final": "content",
    "commentary": "content",
}


class _Header(NamedTuple):
    """What a message header says: who wrote it, on which channel, to whom, in which content type
    (read-only once parsed: see `_header`)."""

    author: str
    channel: str
    content_type: str
    recipient: str


def _parse_header(raw: str) -> _Header:
    """Read a header: the author is its first word, the recipient the last ``to=`` word anywhere, the
    channel the first other channel word; the content type is the first word after ``<|constrain|>``, else
    the rest of the channel words."""
    parts = _HEADER_PARTS.split(raw.removeprefix(_START))
    role_words = parts[0].split()
    channel_words: list[str] = []
    other_words: list[str] = []
    constraint = ""
    for marker, text in zip(parts[1::2], parts[2::2], strict=True):
        section = text.split()
        if marker == _CHANNEL:
            channel_words.extend(section)
        elif section:
            constraint = section[0]
            other_words.extend(section[1:])
    words = (*role_words, *channel_words, *other_words)
    author = next(iter(role_words), "")
    recipient = next((word[3:] for word in reversed(words) if word.startswith("to=")), "")
    plain = [word for word in channel_words if not word.startswith("to=")] or [""]
    return _Header(
        author="" if author.startswith("to=") else author,
        channel=plain[0],
        content_type=constraint or " ".join(plain[1:]),
        recipient=recipient,
    )


_HEADERS: dict[str, _Header] = {}
_HEADERS_KEPT: Final = 256
"""Distinct headers kept parsed (a model writes the same few again and again)."""


def _header(raw: str) -> _Header:
    """The parsed header ``raw`` (read-only: one object serves every message with this header)."""
    header = _HEADERS.get(raw)
    if header is None:
        header = _parse_header(raw)
        if len(_HEADERS) < _HEADERS_KEPT:
            _HEADERS[raw] = header
    return header


@register_format
class HarmonyLexer(FormatLexer):
    """OpenAI's harmony format (gpt-oss), read from text.

    Each message ``<|start|>HEADER<|message|>BODY`` ends at ``<|end|>``, ``<|return|>`` or ``<|call|>``;
    a completion usually begins at ``<|channel|>`` (its ``<|start|>assistant`` is the end of the prompt).
    The header gives the author, ``<|channel|>CHANNEL``, an optional recipient ``to=RECIPIENT`` (in the
    role part or the channel part) and an optional content type (``<|constrain|>json``, ``json``,
    ``code``). What becomes of the body:

    - A recipient makes the body a tool call. ``to=functions.NAME`` is the client function ``NAME`` with
      JSON arguments (streamed as they arrive; a marker inside a JSON string is content). Any other
      recipient is a built-in tool (``browser.search``, ``browser.open``, ``python``, ``container.exec``)
      that the client runs too: the call is named by the whole recipient, and it is a ``function`` call
      when its body is JSON (a ``json`` content type, or a body whose first character is ``{`` or
      ``[``), else a ``custom`` call whose free-text input is the body (the python tool's code).
    - ``analysis`` without a recipient is reasoning, ``final`` and ``commentary`` (the user-visible
      preamble) are content, whichever field (``content`` or ``reasoning``) the text came in: a server
      that already split harmony may leave markers in either. A message without a channel keeps the
      field it came in, as does text outside any message.
    - A message written by another author (``user``, a tool's result ``functions.NAME to=assistant``)
      is not model output: it passes through as text, markers and all, so nothing is lost.

    A ``<|message|>`` with no header before it starts a message that keeps the field it came in.
    Servers drop the stop tokens ``<|call|>`` and ``<|return|>``, so a call still open at the end of the
    stream counts as finished when its JSON is complete (a free-text call always does). Stray
    terminators between messages are dropped; a header interrupted by another marker or by the end of
    the stream opened no message and is dropped when it looks like a header (words, ``to=``, markers),
    else it passes through as text, as does a header longer than 256 characters. The markers are special
    tokens: prose cannot write them, and the degraded text of a server that strips them
    (``analysisNeed ...assistantfinal...``) is not recognised.
    """

    name: ClassVar[str] = "harmony"
    aliases: ClassVar[tuple[str, ...]] = ("gpt_oss", "gpt-oss", "openai_harmony")
    models: ClassVar[tuple[str, ...]] = ("gpt-oss-20b", "gpt-oss-120b")
    detect_openers: ClassVar[tuple[str, ...]] = (_CHANNEL, _START)
    end_marker_optional: ClassVar[bool] = True
    markers: ClassVar[tuple[str, ...]] = (_START, _CHANNEL, _CONSTRAIN, _MESSAGE, _END, _RETURN, _CALL)
    text_markers: ClassVar[Markers] = _OUTSIDE

    # --- between messages -----------------------------------------------------------------------------------

    def opened(self, marker: str) -> None:
        if marker in _OPENERS:
            self._open_header(marker)
        elif marker == _MESSAGE:
            self._route: Channel = self.channel  # a body without a header keeps the field's channel
            self.state = self._text_body

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        self._body_state: State = self._text_body
        self._header_state: State = self._header
        """The states `shortcut` knows, kept to compare without building a bound method per chunk."""
        self._head: list[str] = []
        self._head_size = 0
        self._head_rule = CollectRule(self, self._collect_head, _HEADER.first_chars)
        self._body_rule = PassRule(self, _BODY.starts, _BODY.tail)
        self._rerouted_rule = RouteRule(
            self, _BODY.starts, _BODY.tail, "content" if channel == "reasoning" else "reasoning"
        )
        """The rules for a message's text on this lexer's channel, and on the other one."""

    def shortcut(self, text: str) -> ToolCallDelta | bool | None:
        if self.call_index is None:  # (in a call, the engine's shortcut follows the arguments)
            state = self.state
            if state == self._body_state:
                return self._body_shortcut(text)
            if state == self._header_state:
                return self._header_shortcut(text)
            held = self._held
            if held and not self.watched and state == self._text_state and self.tentative is None:
                opened = self._open_shortcut(held + text)
                if opened is not False:
                    return opened
        return FormatLexer.shortcut(self, text)

    def _open_shortcut(self, text: str) -> bool | None:
        """`shortcut` between messages for ``text`` (what was held, and the next chunk) when it
        starts with a header's opener: the header opens and takes the rest, as the states do, when no
        other marker is in it (else False: it has to be lexed)."""
        for opener in _OPENERS:
            if text.startswith(opener):
                rest = text[len(opener) :]
                if len(rest) > _HEADER_LIMIT or not (
                    _HEADER.cannot_start_in(rest) or _HEADER.find(rest, 0, False)[2] is None
                ):
                    return False
                self._held = ""
                self._open_header(opener)
                return self._header_shortcut(rest) if rest else None
        return False

    def make_rule(self) -> Rule:
        if self.call_index is None and self.state == self._body_state:
            if self._held:
                return self.grow_rule(_BODY)
            # A message's text without a marker start: on its channel, as it is.
            if self._route == self.channel:
                return self._body_rule
            return self._rerouted_rule
        if self.call_index is None and self.state == self._header_state:
            if self._held:
                return self.grow_rule(_HEADER, completed_by_states=False)  # (see _header_shortcut)
            return self._head_rule
        if self._held and self.state == self._text_state and self.tentative is None:
            # A header's opener completed between messages is taken by the shortcut (_open_shortcut).
            return self.grow_rule(self.text_markers, completed_by_states=self.watched)
        return FormatLexer.make_rule(self)

    def _collect_head(self, text: str) -> bool:
        """`_header_shortcut` for ``text`` in which no marker can start: False past the cap."""
        size = self._head_size + len(text)
        if size > _HEADER_LIMIT:
            return False
        self._head.append(text)
        self._head_size = size
        return True

    def _body_shortcut(self, text: str) -> bool | None:
        """`shortcut` in a message's text: what `_text_body` would do with ``text``."""
        held = self._held
        if held:
            text = held + text
            if _BODY.may_grow(text, 0):
                self._held = text
                return None
        if held:
            self._held = ""
        route = self._route
        piece = self._text_piece(text, _BODY, route)
        if piece is False:
            self._held = held
            return False
        if piece is None or (not held and route == self.channel):
            return piece  # (True: a message's text on the channel it came in)
        self.emit_text(text, route)  # (an analysis message in content, a final one in reasoning)
        return None

    def _header_shortcut(self, text: str) -> bool | None:
        """`shortcut` in a header: what `_header` would do with ``text`` (False: it has to be
        lexed). A held start of ``<|channel|>`` (the first) or ``<|constrain|>`` that the text completes
        only goes into the header, as the state puts it there."""
        held = self._held
        recorded = ""
        if held:
            text = held + text
            if _HEADER.may_grow(text, 0):
                self._held = text
                return None
            if text.startswith(_CONSTRAIN):
                recorded = _CONSTRAIN
            elif text.startswith(_CHANNEL) and _CHANNEL not in self._head:
                recorded = _CHANNEL
            else:
                return False
            text = text[len(recorded) :]
        if self._head_size + len(text) > _HEADER_LIMIT:
            return False
        stop = len(text)
        if not _HEADER.cannot_start_in(text):
            stop, _resume, marker = _HEADER.find(text, 0, False)
            if marker is not None:
                return False
        if recorded:
            self._head.append(recorded)
        self._held = text[stop:]  # the start of a marker, or nothing: held, as the state does
        if stop:
            self._head.append(text[:stop])
            self._head_size += stop
        return None

    # --- the header -----------------------------------------------------------------------------------------

    def _open_header(self, opener: str) -> None:
        self._head = [opener]
        self._head_size = 0
        self.state = self._header

    def _header(self, buf: str, pos: int, final: bool) -> int:
        stop, resume, marker = _HEADER.find(buf, pos, final)
        if stop > pos:
            self._head.append(buf[pos:stop])
            self._head_size += stop - pos
            if self._head_size > _HEADER_LIMIT:
                self.emit_text("".join(self._head))  # not a header after all
                self.state = self.start
                return stop
        if marker is None:
            return resume
        if marker == _CHANNEL and _CHANNEL in self._head:
            self._drop_header()  # a second channel: a new message began without <|message|>
            self._open_header(marker)
        elif marker in (_CHANNEL, _CONSTRAIN):
            self._head.append(marker)
        elif marker == _MESSAGE:
            self._begin_body(_header("".join(self._head)))
        else:
            self._drop_header()
            if marker == _START:
                self._open_header(marker)
        return resume

    def _drop_header(self) -> None:
        """A header that never reached ``<|message|>``: dropped if it looks like one, else it is text."""
        raw = "".join(self._head)
        self._head = []
        self.state = self.start
        words = raw
        for marker in (_START, _CHANNEL, _CONSTRAIN):
            words = words.replace(marker, " ")
        if _HEADER_WORDS.fullmatch(words) is None:
            self.emit_text(raw)

    def _begin_body(self, header: _Header) -> None:
        if header.author not in ("", "assistant"):
            self.emit_text("".join(self._head) + _MESSAGE)
            self._head = []
            self.state = self._foreign_body
            return
        self._head = []
        recipient = header.recipient
        if not recipient:
            self._route = _CHANNEL_ROUTES.get(header.channel, self.channel)
            self.state = self._text_body
        elif recipient.startswith(_FUNCTIONS_PREFIX) or "json" in header.content_type:
            name = recipient.removeprefix(_FUNCTIONS_PREFIX)
            self.start_call(name)
            self.state = self._json_body
        else:
            self._builtin = recipient
            self._sniffed: list[str] = []
            self._sniffed_size = 0
            self.state = self._sniff_body

    # --- bodies ---------------------------------------------------------------------------------------------

    def _text_body(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_text(buf, pos, final, _BODY, self._route)
        if marker is not None:
            self._after_body(marker)
        return resume

    def _foreign_body(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_text(buf, pos, final, _BODY)
        if marker in _TERMINATORS:
            self.emit_text(marker)
        if marker is not None:
            self._after_body(marker)
        return resume

    def _sniff_body(self, buf: str, pos: int, final: bool) -> int:
        """A built-in tool's body: JSON arguments if it starts with ``{`` or ``[``, else free text."""
        index = space_end(buf, pos)
        if index > pos:
            self._sniffed.append(buf[pos:index])
            self._sniffed_size += index - pos
        if index == len(buf) and self._sniffed_size <= _SNIFF_LIMIT:
            return index
        if index < len(buf) and buf[index] == "<":
            stop, resume, marker = _BODY.find(buf, index, final)
            if stop == index and marker is None and resume == index:
                return index  # perhaps a terminator: wait for it
            if stop == index:
                self.start_call(self._builtin)  # an empty body
                self.state = self._json_body
                return index
        if index < len(buf) and buf[index] in "{[":
            self.start_call(self._builtin)
            self.state = self._json_body
        else:
            self.start_call(self._builtin, kind="custom")
            self.emit_args("".join(self._sniffed))
            self.state = self._free_body
        return index

    def _json_body(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_json_args(buf, pos, final, _BODY)
        if marker is not None:
            self._end_call(marker)
        return resume

    def _free_body(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_free_args(buf, pos, final, _BODY)
        if marker is not None:
            self._end_call(marker)
        return resume

    def _end_call(self, marker: str) -> None:
        if marker in _TERMINATORS or self.call_kind == "custom":
            self.end_call(finished=True)
        else:
            json_args = self.json_args
            self.end_call(finished=json_args is not None and json_args.complete)
        self._after_body(marker)

    def _after_body(self, marker: str) -> None:
        """``marker`` ended a body: a terminator closes the message, an opener starts the next one."""
        if marker in _OPENERS:
            self._open_header(marker)
        else:
            self.state = self.start

    # --- end of input ---------------------------------------------------------------------------------------

    def at_end(self) -> None:
        if self.state == self._header:
            self._drop_header()
        elif self.state == self._sniff_body:
            self.start_call(self._builtin)
        elif self.call_index is not None and self.call_kind == "custom":
            self.end_call(finished=True)
        super().at_end()

# ruff: noqa: RUF001, RUF002  (DeepSeek's markers use full-width bars)
"""``--tool-format auto``: the delimiter format told from the model's own markers, per answer.

:class:`AutoToolRewriter` is a sans-IO stage (chunks in, chunks out) that passes text on unchanged until a
known call marker appears; then it builds the :class:`~operators.delimiters.DelimiterRewriter` of that
format and feeds it what it held. It holds only while the text's end could be the start of a marker (or,
after ``<tool_call>``, until the next characters tell Hermes, Qwen3-Coder and GLM apart), at most
:data:`MAX_HELD_CHARS` characters; past that, or when the answer ends, the held text goes on as text.

The formats it tells apart (:data:`DETECTED_FORMATS`) and their markers:

- ``kimi_k2``: ``<|tool_calls_section_begin|>`` (or ``<|tool_call_section_begin|>``)
- ``deepseek_v3``: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>``
- ``deepseek_v31``: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>``
- ``deepseek_v32``: ``<｜DSML｜function_calls>`` (or ``tool_calls``)
- ``qwen3_coder``: ``<tool_call>`` then ``<function=``
- ``hermes``: ``<tool_call>`` then ``{``
- ``glm45``: ``<tool_call>NAME`` then ``<arg_key>`` or ``</tool_call>``
- ``minimax_m2``: ``<minimax:tool_call>``
- ``mistral``: ``[TOOL_CALLS]``
- ``harmony``: ``<|channel|>`` or ``<|start|>``

Bare JSON calls (``llama3_json``) have no marker and are not detected: name that format.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, Final

from operators.convert._base import IdFactory
from pipeline.models import ChunkResponse

__all__ = ["DETECTED_FORMATS", "MAX_HELD_CHARS", "AutoToolRewriter", "detect_tool_format"]

MAX_HELD_CHARS: Final = 512
"""Cap on the text held while a possible marker is undecided."""

_DS_CALLS: Final = "<｜tool▁calls▁begin｜>"
_DS_CALL: Final = "<｜tool▁call▁begin｜>"
_DS_SEP: Final = "<｜tool▁sep｜>"
_TOOL_CALL: Final = "<tool_call>"
_DIRECT: Final[dict[str, str]] = {
    "<|tool_calls_section_begin|>": "kimi_k2",
    "<|tool_call_section_begin|>": "kimi_k2",
    "<｜DSML｜function_calls>": "deepseek_v32",
    "<｜DSML｜tool_calls>": "deepseek_v32",
    "<minimax:tool_call>": "minimax_m2",
    "[TOOL_CALLS]": "mistral",
    "<|channel|>": "harmony",
    "<|start|>": "harmony",
}
_OPENERS: Final = (*_DIRECT, _DS_CALLS, _TOOL_CALL)
_FIRST_CHARS: Final = frozenset(opener[0] for opener in _OPENERS)
_LONGEST: Final = max(map(len, _OPENERS))
_OPENER: Final = re.compile("|".join(map(re.escape, _OPENERS)))
_GLM_NAME: Final = re.compile(r"[^\s<>]+\s*(?:<arg_key>|</tool_call>)")

DETECTED_FORMATS: Final[tuple[str, ...]] = (
    "kimi_k2",
    "deepseek_v3",
    "deepseek_v31",
    "deepseek_v32",
    "qwen3_coder",
    "hermes",
    "glm45",
    "minimax_m2",
    "mistral",
    "harmony",
)

_UNDECIDED: Final = ""


def detect_tool_format(text: str, final: bool = True) -> str | None:
    """The format whose marker comes first in ``text``; ``None`` if none does. With ``final=False``,
    ``""`` means: a marker may be starting at the end, more text will tell."""
    position = 0
    while True:
        match = _OPENER.search(text, position)
        if match is None:
            break
        opener = match[0]
        if opener in _DIRECT:
            return _DIRECT[opener]
        decided = _after(opener, text[match.end() :], final)
        if decided is not None:
            return decided
        position = match.end()
    if not final and _may_start(text):
        return _UNDECIDED
    return None


def _after(opener: str, rest: str, final: bool) -> str | None:
    """The format an ambiguous opener followed by ``rest`` means; ``""`` to wait; ``None``: not a call."""
    stripped = rest.lstrip()
    if opener == _DS_CALLS:
        body = stripped.removeprefix(_DS_CALL) if stripped.startswith(_DS_CALL) else None
        if body is None:
            return _wait(_DS_CALL.startswith(stripped), final, rest)
        sep = body.find(_DS_SEP)
        if sep < 0:
            return _wait(True, final, rest)
        return "deepseek_v3" if body[:sep].strip() == "function" else "deepseek_v31"
    if stripped.startswith("<function="):
        return "qwen3_coder"
    if stripped.startswith("{"):
        return "hermes"
    if _GLM_NAME.match(rest):
        return "glm45"
    if not stripped or "<function=".startswith(stripped) or _could_be_glm(rest):
        return _wait(True, final, rest)
    return None


def _could_be_glm(rest: str) -> bool:
    name = re.match(r"[^\s<>]*\s*", rest)
    tail = rest[name.end() :] if name else rest
    return not tail or "<arg_key>".startswith(tail) or "</tool_call>".startswith(tail)


def _wait(possible: bool, final: bool, rest: str) -> str | None:
    return _UNDECIDED if possible and not final and len(rest) < MAX_HELD_CHARS else None


def _may_start(text: str) -> bool:
    """Whether the end of ``text`` is the start of an opener."""
    start = max(0, len(text) - _LONGEST)
    for index in range(start, len(text)):
        if text[index] in _FIRST_CHARS:
            tail = text[index:]
            if any(opener.startswith(tail) for opener in _OPENERS):
                return True
    return False


class AutoToolRewriter:
    """Sans-IO stage: chunks in, chunks with tool calls rewritten in the format detected (see the module
    doc). ``tool_schemas``, ``id_factory`` and ``offered_tools`` go to the rewriter once it is built;
    :attr:`format` tells which was detected (``None`` so far)."""

    __slots__ = ("_held", "_options", "_rewriter", "_scanned", "_window", "format")

    def __init__(
        self,
        *,
        tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
        id_factory: IdFactory | None = None,
        offered_tools: Collection[str] | None = None,
    ) -> None:
        self._options: dict[str, Any] = {"tool_schemas": tool_schemas, "offered_tools": offered_tools}
        if id_factory is not None:
            self._options["id_factory"] = id_factory
        self._rewriter: Any = None
        self._held: list[ChunkResponse] = []
        self._window = ""
        """The held text (both channels, in order), from a possible marker start; at most the cap."""
        self._scanned = 0
        self.format: str | None = None

    def feed(self, item: ChunkResponse) -> list[ChunkResponse]:
        if self._rewriter is not None:
            out: list[ChunkResponse] = self._rewriter.feed(item)
            return out
        text = (item.reasoning or "") + (item.content or "")
        if not text and not self._held:
            return [item]
        self._held.append(item)
        window = self._window + text
        decided = detect_tool_format(window, final=False)
        if decided:
            return self._start(decided)
        carries = item.finish_reason or item.is_complete or item.usage or item.tool_calls
        if decided is None or carries:
            return self._release()
        self._window = window[-MAX_HELD_CHARS:]
        return []

    def finish(self) -> list[ChunkResponse]:
        if self._rewriter is not None:
            out: list[ChunkResponse] = self._rewriter.finish()
            return out
        return self._release()

    def abort(self, exc: BaseException) -> list[ChunkResponse]:
        """The stream failed: what was held goes on (released or rewritten)."""
        return self.finish()

    def _release(self) -> list[ChunkResponse]:
        held, self._held, self._window = self._held, [], ""
        return held

    def _start(self, tool_format: str) -> list[ChunkResponse]:
        from operators.delimiters import DelimiterRewriter

        self.format = tool_format
        self._rewriter = DelimiterRewriter(tool_format, **self._options)
        out: list[ChunkResponse] = []
        for chunk in self._release():
            out += self._rewriter.feed(chunk)
        return out

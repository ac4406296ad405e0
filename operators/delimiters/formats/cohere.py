"""Cohere Command tool calls, both generations:

- Command A / Command R7B: ``<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters":
  {...}}]<|END_ACTION|>``, reasoning between ``<|START_THINKING|>`` and ``<|END_THINKING|>``, the
  answer between ``<|START_RESPONSE|>`` and ``<|END_RESPONSE|>``;
- Command R / R+ (text): ``Action: ```json [{"tool_name": "f", "parameters": {...}}] ``` ``.
"""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._jsonblocks import JsonListLexer
from operators.delimiters._lexer import claim_next
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers

__all__ = ["CohereCommandLexer"]

_START_ACTION: Final = "<|START_ACTION|>"
_END_ACTION: Final = "<|END_ACTION|>"
_ACTION: Final = "Action:"
_FENCE: Final = "```"
_START_THINKING: Final = "<|START_THINKING|>"
_END_THINKING: Final = "<|END_THINKING|>"
_START_RESPONSE: Final = "<|START_RESPONSE|>"
_END_RESPONSE: Final = "<|END_RESPONSE|>"
_DROPPED: Final = frozenset({_END_THINKING, _START_RESPONSE, _END_RESPONSE})

_THINKING_END: Final = Markers(_END_THINKING)


@register_format
class CohereCommandLexer(JsonListLexer):
    """Cohere Command's tool calls (vLLM's ``cohere_command`` parsers, Cohere's chat templates): a
    JSON list of ``{"tool_call_id": ..., "tool_name": ..., "parameters": {...}}`` objects after
    ``<|START_ACTION|>`` (up to ``<|END_ACTION|>``) or after ``Action:`` and a ```` ```json ```` fence
    (up to the closing fence). The model's ``tool_call_id`` is the call's id.

    Text between ``<|START_THINKING|>`` and ``<|END_THINKING|>`` is reasoning; the response tokens
    are dropped and their text passes through. Citation tags (``<co>...</co: 0:[1]>``) stay in the
    text. ``Action:`` is plain text: it opens calls only when a fence and ``[{`` (or ``[{`` alone)
    follow it, so prose such as "Action: none" stays text; a fenced list after ``Action:`` in prose
    cannot be told apart.
    """

    name: ClassVar[str] = "cohere_command"
    aliases: ClassVar[tuple[str, ...]] = ("cohere", "command_a", "command_r")
    models: ClassVar[tuple[str, ...]] = ("Command A", "Command R7B", "Command R", "Command R+")
    detect_openers: ClassVar[tuple[str, ...]] = (_START_ACTION, _START_THINKING, _START_RESPONSE, _ACTION)
    markers: ClassVar[tuple[str, ...]] = (
        _START_ACTION,
        _END_ACTION,
        _ACTION,
        _FENCE,
        _START_THINKING,
        _END_THINKING,
        _START_RESPONSE,
        _END_RESPONSE,
    )
    text_markers: ClassVar[Markers] = Markers(
        _START_ACTION, _ACTION, _START_THINKING, _END_THINKING, _START_RESPONSE, _END_RESPONSE
    )
    wrapper_markers: ClassVar[Markers] = Markers(_START_ACTION, _END_ACTION, _ACTION, _FENCE)
    closers: ClassVar[dict[str, str]] = {_START_ACTION: _END_ACTION, _ACTION: _FENCE}
    preamble: ClassVar[tuple[str, ...]] = ("```json",)
    name_keys: ClassVar[frozenset[str]] = frozenset({"tool_name", "name"})
    id_keys: ClassVar[frozenset[str]] = frozenset({"tool_call_id", "id"})

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """Command A's tokens; ``Action:`` only when a fenced or bare JSON list follows it."""
        if opener != _ACTION:
            return True
        return claim_next(rest, final, "```json", "[")

    def opened(self, marker: str) -> None:
        if marker == _START_THINKING:
            self.state = self._thinking
        elif marker not in _DROPPED:
            super().opened(marker)

    def _thinking(self, buf: str, pos: int, final: bool) -> int:
        """Reasoning, up to ``<|END_THINKING|>``."""
        resume, marker = self.stream_text(buf, pos, final, _THINKING_END, "reasoning")
        if marker is not None:
            self.state = self.start
        return resume

    def partial_markers(self) -> Markers | None:
        if self.state == self._thinking:
            return _THINKING_END
        return super().partial_markers()

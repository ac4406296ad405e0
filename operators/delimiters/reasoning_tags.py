"""Reasoning written in the text: ``<think>...</think>`` and Kimi's ``◁think▷...◁/think▷`` to ``reasoning``.

Open-weight reasoning models served without a reasoning parser (DeepSeek-R1, Qwen3, QwQ, GLM-4.5+,
MiniMax-M2, Kimi) write their thinking into ``content`` between tags. :class:`ReasoningTagSplitter` moves
the text between the tags to ``ChunkResponse.reasoning`` and drops the tags; everything else passes
through unchanged, in order::

    content="Hi<thi"   ->  content="Hi"                         ("<thi" held back: it may open a tag)
    content="nk>plan"  ->  reasoning="plan"
    content="</think>A" ->  content="A"

Chunk-safe and linear: a possible partial tag at the end of a chunk (at most ``len(tag) - 1`` characters)
is held back and re-read with the next chunk only; nothing else is ever scanned twice. Run it before a
delimiter tool-format rewriter (the text after ``</think>`` may hold tool calls).

Policies:

- Tags do not nest: inside reasoning, an opening tag is reasoning text and the first closing tag closes.
- Several reasoning blocks in one response (interleaved thinking) each become reasoning.
- ``start_in_reasoning=True`` is for chat templates that open the tag in the prompt (DeepSeek-R1-0528,
  Qwen3 thinking models, GLM-4.5 with thinking): the response begins inside reasoning and only the
  closing tag appears. An opening tag at the very start (after whitespace) is dropped all the same, so
  the option is safe for models that do write it. A response that never closes the tag is all
  reasoning (as vLLM's reasoning parsers decide).
- Without it, a closing tag outside reasoning is ordinary text (passed through, nothing is lost).
- Unclosed reasoning at the end of the response stays reasoning; a held-back partial tag is flushed as
  the text it is (``"<thi"`` at the end is content).
- A response whose provider already separates reasoning (a chunk arrives with ``reasoning`` of its own:
  OpenAI-compatible ``reasoning_content``, ``reasoning``, Anthropic thinking, ...) keeps its ``content`` as
  text from that chunk on: a stray ``<think>`` there is text, not the start of reasoning that would swallow
  the rest of the answer. Text held back then (a partial tag, leading whitespace) is given out as what it
  was (as :meth:`~ReasoningTagSplitter.finish` does); what was split before stays as it was. Decided from
  the stream, per response; the check costs one attribute test per chunk.
- A chunk with ``is_complete=True`` ends the response: the next response starts afresh.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Final, Literal, TypeAlias

import msgspec
from aiostream import pipable_operator

from pipeline.errors import ConfigurationError
from pipeline.models import ChunkResponse
from pipeline.stage import operator_stream

__all__ = ["REASONING_TAG_STYLES", "ReasoningTagSplitter", "ReasoningTagStyle", "split_reasoning_tags"]

ReasoningTagStyle: TypeAlias = Literal["think", "kimi"]

REASONING_TAG_STYLES: Final[dict[str, tuple[str, str]]] = {
    "think": ("<think>", "</think>"),
    "kimi": ("◁think▷", "◁/think▷"),
}
"""Style name -> (opening tag, closing tag). ``think``: DeepSeek-R1, Qwen3, QwQ, GLM, MiniMax-M2."""

_MAX_LEADING_SPACE: Final = 1024
"""Cap of the whitespace held at the start of a ``start_in_reasoning`` response while an opening tag may
still follow; past it the whitespace is reasoning."""


class ReasoningTagSplitter:
    """Sans-IO core of :func:`split_reasoning_tags`: ``feed(chunk)`` and ``finish()`` return chunks.

    Args:
        style: ``"think"``, ``"kimi"``, or an ``(opening, closing)`` pair of non-empty tags.
        start_in_reasoning: each response begins inside reasoning (the chat template opened the tag).

    A chunk whose text spans a tag is split into several chunks so that text and reasoning keep their
    order; the chunk's other fields (tool calls, usage, ``is_complete``, ...) stay on the last of them.
    Chunks without content pass through as the same object (after any held-back text).
    """

    __slots__ = ("_at_start", "_close", "_held", "_inside", "_open", "_passing", "_start_inside")

    def __init__(
        self, style: ReasoningTagStyle | str | tuple[str, str] = "think", *, start_in_reasoning: bool = False
    ) -> None:
        if isinstance(style, str):
            tags = REASONING_TAG_STYLES.get(style)
            if tags is None:
                choices = ", ".join(REASONING_TAG_STYLES)
                raise ConfigurationError(f"unknown reasoning tag style {style!r}; expected one of: {choices}")
        elif (
            isinstance(style, tuple)
            and len(style) == 2
            and all(isinstance(tag, str) and tag for tag in style)
            and style[0] != style[1]
        ):
            tags = style
        else:
            raise ConfigurationError(
                f"reasoning tag style {style!r} is neither a style name nor a pair of distinct non-empty tags"
            )
        if not isinstance(start_in_reasoning, bool):
            raise ConfigurationError(f"start_in_reasoning must be a bool, not {start_in_reasoning!r}")
        self._open, self._close = tags
        self._start_inside = start_in_reasoning
        self._inside = start_in_reasoning
        self._at_start = start_in_reasoning
        """Nothing but whitespace yet in a response that starts inside reasoning: an opening tag here is
        dropped."""
        self._held = ""
        """Text not yet given out: a possible partial tag (or leading whitespace while ``_at_start``)."""
        self._passing = False
        """The provider sent reasoning of its own in this response: content passes through as text."""

    def feed(self, chunk: ChunkResponse) -> list[ChunkResponse]:
        """Move the reasoning between tags in ``chunk.content`` to ``reasoning``."""
        if self._passing or chunk.reasoning:
            return self._pass_through(chunk)
        text = chunk.content
        if not text and not self._held:
            if chunk.is_complete:
                self._reset()
            return [chunk]
        if self._held:
            text = self._held + text
            self._held = ""
        pieces = self._split(text, final=chunk.is_complete)
        if chunk.is_complete:
            self._reset()
        return _chunks(chunk, pieces)

    def finish(self) -> list[ChunkResponse]:
        """End of the stream: the held-back text, as what it is."""
        held, self._held = self._held, ""
        inside = self._inside
        self._reset()
        if not held:
            return []
        return [ChunkResponse(reasoning=held) if inside else ChunkResponse(content=held)]

    def _pass_through(self, chunk: ChunkResponse) -> list[ChunkResponse]:
        """The provider separates reasoning itself: ``chunk`` as it is, after any held-back text."""
        self._passing = True
        out = [chunk]
        if self._held:
            held, self._held = self._held, ""
            out.insert(0, ChunkResponse(reasoning=held) if self._inside else ChunkResponse(content=held))
        if chunk.is_complete:
            self._reset()
        return out

    def _reset(self) -> None:
        self._inside = self._at_start = self._start_inside
        self._held = ""
        self._passing = False

    def _split(self, text: str, *, final: bool) -> list[tuple[bool, str]]:
        """``text`` as (is_reasoning, piece) runs, tags dropped; a possible partial tag at the end is held
        back unless ``final``."""
        pieces: list[tuple[bool, str]] = []
        position = 0
        end = len(text)
        if self._at_start:
            position = self._skip_leading_tag(text, final)
            if self._at_start:  # still undecided: all of it is held
                return pieces
        while position < end:
            tag = self._close if self._inside else self._open
            found = text.find(tag, position)
            if found < 0:
                keep = end if final else _partial_tag_start(text, position, tag)
                if keep > position:
                    pieces.append((self._inside, text[position:keep]))
                self._held = text[keep:]
                break
            if found > position:
                pieces.append((self._inside, text[position:found]))
            position = found + len(tag)
            self._inside = not self._inside
        return pieces

    def _skip_leading_tag(self, text: str, final: bool) -> int:
        """At the start of a response that begins inside reasoning: where its text starts, past an opening
        tag written anyway. Holds the text while it may still be whitespace and part of the tag."""
        opening = self._open
        first = len(text) - len(text.lstrip())
        rest = text[first : first + len(opening)]
        if (
            not final
            and opening.startswith(rest)
            and len(rest) < len(opening)
            and first <= _MAX_LEADING_SPACE
        ):
            self._held = text
            return len(text)
        self._at_start = False
        return first + len(opening) if rest == opening else 0


def _partial_tag_start(text: str, position: int, tag: str) -> int:
    """Where the longest suffix of ``text[position:]`` that is a proper prefix of ``tag`` starts
    (``len(text)`` if none): bounded work, ``len(tag)`` checks at most."""
    end = len(text)
    for start in range(max(position, end - len(tag) + 1), end):
        if tag.startswith(text[start:]):
            return start
    return end


def _chunks(chunk: ChunkResponse, pieces: list[tuple[bool, str]]) -> list[ChunkResponse]:
    """``chunk`` rewritten as ``pieces`` in order; its other fields on the last chunk."""
    # Adjacent pieces of one kind cannot occur (a tag lies between any two), except around an empty tag pair.
    if not pieces:
        return [msgspec.structs.replace(chunk, content="")]
    out = [
        ChunkResponse(reasoning=piece) if inside else ChunkResponse(content=piece)
        for inside, piece in pieces[:-1]
    ]
    inside, piece = pieces[-1]
    if inside:
        reasoning = piece if chunk.reasoning is None else chunk.reasoning + piece
        out.append(msgspec.structs.replace(chunk, content="", reasoning=reasoning))
    else:
        out.append(msgspec.structs.replace(chunk, content=piece))
    return out


@pipable_operator
def split_reasoning_tags(
    source: AsyncIterable[ChunkResponse],
    *,
    style: ReasoningTagStyle | str | tuple[str, str] = "think",
    start_in_reasoning: bool = False,
) -> AsyncIterator[ChunkResponse]:
    """Move reasoning written between tags in the text (``<think>...</think>``) to ``reasoning``."""
    return operator_stream(source, ReasoningTagSplitter(style, start_in_reasoning=start_in_reasoning))

"""Reasoning written in the text to ``reasoning``: ``<think>...</think>``, Kimi's ``◁think▷...◁/think▷`` and
the formats of the models that vLLM and SGLang serve with a reasoning parser (Granite, Hunyuan, ERNIE,
Step-3, Seed-OSS, gpt-oss's harmony analysis channel).

Open-weight reasoning models served without a reasoning parser write their thinking into ``content``.
`ReasoningTagSplitter` moves the text between the markers to ``ChunkResponse.reasoning`` and drops
the markers; everything else passes through unchanged, in order::

    content="Hi<thi"   ->  content="Hi"                         ("<thi" held back: it may open a tag)
    content="nk>plan"  ->  reasoning="plan"
    content="</think>A" ->  content="A"

A format (`ReasoningFormat`, by name in `REASONING_FORMATS`) lists the markers that open
reasoning, those that close it, and those dropped from the answer (Hunyuan's ``<answer>`` wrapper, ERNIE's
``<response>``, harmony's ``final`` channel header). Where several markers could match, the one that
starts first wins.

Chunk-safe and linear: a possible partial marker at the end of a chunk (shorter than the longest marker)
is held back and re-read with the next chunk only; nothing else is ever scanned twice. Run it before a
delimiter tool-format rewriter (the text after the reasoning may hold tool calls).

Policies:

- Markers do not nest: inside reasoning, an opening marker is reasoning text and the first closing one
  closes.
- Several reasoning blocks in one response (interleaved thinking) each become reasoning, except in a
  format whose reasoning may only open at the start (Granite): there a later opening phrase is text.
- ``start_in_reasoning=True`` is for chat templates that open the tag in the prompt (DeepSeek-R1-0528,
  Qwen3 thinking models, GLM-4.5 with thinking; the default of ERNIE, Step-3 and Seed-OSS): the response
  begins inside reasoning and only the closing marker appears. An opening marker at the very start (after
  whitespace) is dropped all the same, so the option is safe for models that do write it. A response
  that never closes is all reasoning (as vLLM's reasoning parsers decide).
- Without it, a closing marker outside reasoning is ordinary text (passed through, nothing is lost).
- Unclosed reasoning at the end of the response stays reasoning; a held-back partial marker is flushed as
  the text it is (``"<thi"`` at the end is content).
- A response whose provider already separates reasoning (a chunk arrives with ``reasoning`` of its own:
  OpenAI-compatible ``reasoning_content``, ``reasoning``, Anthropic thinking, ...) keeps its ``content`` as
  text from that chunk on: a stray ``<think>`` there is text, not the start of reasoning that would swallow
  the rest of the answer. Text held back then (a partial marker, leading whitespace) is given out as what
  it was (as `finish` does); what was split before stays as it was. Decided
  from the stream, per response; the check costs one attribute test per chunk.
- A chunk with a ``finish_reason`` releases what is held (the model's text is over); one with
  ``is_complete=True`` ends the response: the next response starts afresh.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Final, Literal, TypeAlias

import msgspec
from aiostream import pipable_operator

from pipeline.errors import ConfigurationError
from pipeline.models import ChunkResponse
from pipeline.stage import operator_stream

__all__ = [
    "REASONING_FORMATS",
    "REASONING_TAG_STYLES",
    "ReasoningFormat",
    "ReasoningTagSplitter",
    "ReasoningTagStyle",
    "split_reasoning_tags",
]

ReasoningTagStyle: TypeAlias = Literal[
    "think", "kimi", "granite", "hunyuan", "ernie", "step3", "step3p5", "seed_oss", "harmony"
]


class ReasoningFormat(msgspec.Struct, frozen=True, gc=False):
    """How a model writes its reasoning in the text.

    No marker of a group that is matched at once (the opening and dropped markers outside reasoning, the
    closing ones inside) may be a prefix of another of that group: the first to start wins.
    """

    opens: tuple[str, ...]
    """Markers that open reasoning (the text after them is reasoning)."""
    closes: tuple[str, ...]
    """Markers that close it (the text after them is the answer)."""
    drops: tuple[str, ...] = ()
    """Markers dropped from the answer (wrappers and headers around it)."""
    start_in_reasoning: bool = False
    """The default of ``start_in_reasoning``: the chat template opens the reasoning in the prompt."""
    opens_only_at_start: bool = False
    """Reasoning opens only at the start of a response (after whitespace); a later opening marker is text."""
    trims_newline: bool = False
    """One newline right after a marker belongs to the marker (the model writes ``</think>\\n``)."""
    models: str = ""


REASONING_FORMATS: Final[dict[str, ReasoningFormat]] = {
    "think": ReasoningFormat(("<think>",), ("</think>",), models="DeepSeek-R1, Qwen3, QwQ, GLM, MiniMax-M2"),
    "kimi": ReasoningFormat(("◁think▷",), ("◁/think▷",), models="Kimi"),
    "granite": ReasoningFormat(
        ("Here is my thought process:", "Here's my thought process:"),
        ("Here is my response:", "Here's my response:"),
        opens_only_at_start=True,
        models="IBM Granite 3.2 / 3.3 with thinking",
    ),
    "hunyuan": ReasoningFormat(
        ("<think>",),
        ("\n</think>", "</think>"),
        drops=("<answer>", "\n</answer>", "</answer>"),
        trims_newline=True,
        models="Hunyuan-A13B",
    ),
    "ernie": ReasoningFormat(
        ("<think>",),
        ("\n</think>", "</think>"),
        drops=("\n<response>", "<response>", "\n</response>", "</response>"),
        start_in_reasoning=True,
        trims_newline=True,
        models="ERNIE-4.5 thinking",
    ),
    "step3": ReasoningFormat(("<think>",), ("</think>",), start_in_reasoning=True, models="Step-3"),
    "step3p5": ReasoningFormat(
        ("<think>",),
        ("\n</think>", "</think>"),
        start_in_reasoning=True,
        trims_newline=True,
        models="Step-3.5",
    ),
    "seed_oss": ReasoningFormat(
        ("<seed:think>",), ("</seed:think>",), start_in_reasoning=True, models="Seed-OSS"
    ),
    "harmony": ReasoningFormat(
        ("<|start|>assistant<|channel|>analysis<|message|>", "<|channel|>analysis<|message|>"),
        ("<|end|>",),
        drops=("<|start|>assistant<|channel|>final<|message|>", "<|channel|>final<|message|>", "<|return|>"),
        models="gpt-oss (harmony), its analysis channel served as text",
    ),
}
"""Format name -> `ReasoningFormat`: the ``reasoning_tags=`` presets."""

REASONING_TAG_STYLES: Final[dict[str, tuple[str, str]]] = {
    "think": ("<think>", "</think>"),
    "kimi": ("◁think▷", "◁/think▷"),
}
"""Style name -> (opening tag, closing tag), for the formats that are one pair of tags. ``think``:
DeepSeek-R1, Qwen3, QwQ, GLM, MiniMax-M2. Every preset, these included, is in `REASONING_FORMATS`."""

_MAX_LEADING_SPACE: Final = 1024
"""Cap of the whitespace held at the start of a response while an opening marker may still follow; past
it the whitespace is what the response starts with."""


def _reasoning_format(style: object) -> ReasoningFormat:
    """The format ``style`` names or is; a `ConfigurationError` naming the choices otherwise."""
    match style:
        case ReasoningFormat():
            return style
        case str():
            found = REASONING_FORMATS.get(style)
            if found is None:
                choices = ", ".join(REASONING_FORMATS)
                raise ConfigurationError(f"unknown reasoning tag style {style!r}; expected one of: {choices}")
            return found
        case tuple((str(opening), str(closing))) if "" not in style and opening != closing:
            return ReasoningFormat((opening,), (closing,))
    raise ConfigurationError(
        f"reasoning tag style {style!r} is neither a style name nor a pair of distinct non-empty tags"
    )


class ReasoningTagSplitter:
    """Sans-IO core of `split_reasoning_tags`: ``feed(chunk)`` and ``finish()`` return chunks.

    Args:
        style: a name of `REASONING_FORMATS` (``"think"``, ``"kimi"``, ``"granite"``, ...), an
            ``(opening, closing)`` pair of non-empty tags, or a `ReasoningFormat`.
        start_in_reasoning: each response begins inside reasoning (the chat template opened the tag);
            ``None``: the format's default.

    A chunk whose text spans a marker is split into several chunks so that text and reasoning keep their
    order; the chunk's other fields (tool calls, usage, ``is_complete``, ...) stay on the last of them.
    Chunks without content pass through as the same object (after any held-back text).
    """

    __slots__ = (
        "_at_start",
        "_closes",
        "_format",
        "_held",
        "_inside",
        "_outside",
        "_passing",
        "_start_inside",
        "_trim",
    )

    def __init__(
        self,
        style: ReasoningTagStyle | str | tuple[str, str] | ReasoningFormat = "think",
        *,
        start_in_reasoning: bool | None = None,
    ) -> None:
        form = _reasoning_format(style)
        if start_in_reasoning is None:
            start_in_reasoning = form.start_in_reasoning
        elif not isinstance(start_in_reasoning, bool):
            raise ConfigurationError(f"start_in_reasoning must be a bool, not {start_in_reasoning!r}")
        self._format = form
        self._closes = form.closes
        self._outside = form.drops if form.opens_only_at_start else form.opens + form.drops
        """The markers looked for outside reasoning."""
        self._start_inside = start_in_reasoning
        self._inside = start_in_reasoning
        self._at_start = start_in_reasoning or form.opens_only_at_start
        """Nothing but whitespace yet in a response whose start decides: an opening marker here opens (and
        is dropped)."""
        self._held = ""
        """Text not yet given out: a possible partial marker (or leading whitespace while ``_at_start``)."""
        self._passing = False
        """The provider sent reasoning of its own in this response: content passes through as text."""
        self._trim = False
        """A marker that takes the newline after it just ended: a newline next is dropped."""

    def feed(self, chunk: ChunkResponse) -> list[ChunkResponse]:
        """Move the reasoning between markers in ``chunk.content`` to ``reasoning``."""
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
        # (a finish reason ends the model's text too: what is held goes out with it, not after it)
        pieces = self._split(text, final=chunk.is_complete or bool(chunk.finish_reason))
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
        self._inside = self._start_inside
        self._at_start = self._start_inside or self._format.opens_only_at_start
        self._held = ""
        self._passing = False
        self._trim = False

    def _split(self, text: str, *, final: bool) -> list[tuple[bool, str]]:
        """``text`` as (is_reasoning, piece) runs, markers dropped; a possible partial marker at the end is
        held back unless ``final``."""
        pieces: list[tuple[bool, str]] = []
        position = 0
        end = len(text)
        if self._at_start:
            position = self._skip_leading_marker(text, final)
            if self._at_start:  # still undecided: all of it is held
                return pieces
        finder = _Finder(text)
        while position < end:
            if self._trim:
                self._trim = False
                position += text[position] == "\n"
                continue
            markers = self._closes if self._inside else self._outside
            found, marker = finder.first(markers, position)
            if found < 0:
                keep = end if final else _partial_marker_start(text, position, markers)
                if keep > position:
                    pieces.append((self._inside, text[position:keep]))
                self._held = text[keep:]
                break
            if found > position:
                pieces.append((self._inside, text[position:found]))
            position = found + len(marker)
            self._passed(marker)
        return pieces

    def _passed(self, marker: str) -> None:
        """The state after ``marker``: closing markers close, opening ones open, the others are dropped."""
        if self._inside:
            self._inside = False
        elif marker in self._format.opens:
            self._inside = True
        self._trim = self._format.trims_newline

    def _skip_leading_marker(self, text: str, final: bool) -> int:
        """At the start of a response whose start decides: where its text starts, past an opening marker.
        Holds the text while it may still be whitespace and part of one."""
        first = len(text) - len(text.lstrip())
        rest = text[first:]
        for opening in self._format.opens:
            if rest.startswith(opening):
                self._at_start = False
                self._inside = True
                self._trim = self._format.trims_newline
                return first + len(opening)
        undecided = any(opening.startswith(rest) for opening in self._format.opens)
        if not final and undecided and first <= _MAX_LEADING_SPACE:
            self._held = text
            return len(text)
        self._at_start = False
        self._inside = self._start_inside
        return 0


class _Finder:
    """The next occurrence of each marker in one text, each searched again only once passed: finding the
    first of several markers stays linear in the text."""

    __slots__ = ("_next", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._next: dict[str, int] = {}

    def first(self, markers: tuple[str, ...], position: int) -> tuple[int, str]:
        """Where the first of ``markers`` at or after ``position`` starts, and which; ``(-1, "")`` if none."""
        best, best_marker = -1, ""
        for marker in markers:
            found = self._next.get(marker, -2)
            if found == -2 or 0 <= found < position:
                found = self._next[marker] = self._text.find(marker, position)
            if found >= 0 and (best < 0 or found < best):
                best, best_marker = found, marker
        return best, best_marker


def _partial_marker_start(text: str, position: int, markers: tuple[str, ...]) -> int:
    """Where the longest suffix of ``text[position:]`` that is a proper prefix of one of ``markers``
    starts (``len(text)`` if none)."""
    return min((_partial_tag_start(text, position, marker) for marker in markers), default=len(text))


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
    # Two pieces of one kind follow each other around a dropped marker or an empty pair: separate chunks.
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
    style: ReasoningTagStyle | str | tuple[str, str] | ReasoningFormat = "think",
    start_in_reasoning: bool | None = None,
) -> AsyncIterator[ChunkResponse]:
    """Move reasoning written between markers in the text (``<think>...</think>``) to ``reasoning``."""
    return operator_stream(source, ReasoningTagSplitter(style, start_in_reasoning=start_in_reasoning))

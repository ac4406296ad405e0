"""Render a pipeline's events in a terminal: live with rich, or as plain lines on a dumb terminal.

The live view keeps one block per segment in stream order: reasoning (dim), text, each tool call with its
arguments filling in key by key, each file segment as a syntax-highlighted panel whose content streams,
and a line per invocation when it is folded. A finished block is printed above the live region, once, so
the scrollback is a clean transcript at any terminal size; the live region shows the blocks still
streaming, cut to the screen's height. Redrawing is throttled to a refresh rate, and a segment's text is
kept as a list of pieces joined only when drawn.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from pipeline.models import (
    PipelineEvent,
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    ToolInvocation,
)

__all__ = ["LiveRenderer", "PlainRenderer", "Renderer", "make_renderer"]

_LEXERS = {
    ".py": "python",
    ".js": "javascript",
    ".ts": "typescript",
    ".rs": "rust",
    ".go": "go",
    ".json": "json",
    ".md": "markdown",
    ".sh": "bash",
    ".html": "html",
    ".css": "css",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
}


def _lexer(path: str | None, segment_type: SegmentType | None) -> str:
    if segment_type is SegmentType.PATCH_FILE:
        return "diff"
    if path:
        for suffix, lexer in _LEXERS.items():
            if path.endswith(suffix):
                return lexer
    return "text"


class Renderer:
    """Consumes pipeline events one by one; ``close()`` when the stream ends."""

    def feed(self, event: PipelineEvent) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """The stream ended (or failed): leave the terminal in a clean state."""


class PlainRenderer(Renderer):
    """Plain lines for a dumb terminal or a pipe: deltas are written as they arrive, no cursor movement.

    Tool calls show their arguments as they stream (``key: text...``), not the raw JSON.
    """

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._kinds: dict[str, SegmentType | None] = {}
        self._streaming: tuple[str, tuple[Any, ...]] | None = None
        self._column = 0

    def _write(self, text: str) -> None:
        if text:
            try:
                self._out.write(text)
            except UnicodeEncodeError:  # a lone surrogate (from a dict or SDK source): show it escaped
                self._out.write(text.encode("utf-8", "backslashreplace").decode("utf-8"))
            newline = text.rfind("\n")
            self._column = len(text) - newline - 1 if newline >= 0 else self._column + len(text)

    def _line(self, text: str) -> None:
        if self._column:
            self._write("\n")
        self._write(text + "\n")
        self._streaming = None

    def feed(self, event: PipelineEvent) -> None:
        if isinstance(event, SegmentEvent):
            self._segment_event(event)
        elif isinstance(event, ToolInvocation):
            arguments = json.dumps(event.arguments, ensure_ascii=False)
            if len(arguments) > 120:
                arguments = arguments[:117] + "..."
            status = "ready" if event.error is None else f"failed: {event.error.kind}: {event.error.message}"
            self._line(f"=> invocation {event.id} {event.name}({arguments}) {status}")
        elif isinstance(event, ResponseEnd):
            usage = event.usage
            tokens = f", {usage.prompt_tokens} in / {usage.completion_tokens} out tokens" if usage else ""
            self._line(f"[end: {event.finish_reason}{tokens}]")
        self._out.flush()

    def _segment_event(self, event: SegmentEvent) -> None:
        _PLAIN_SEGMENT_EVENTS[event.event_type](self, event)

    def _start(self, event: SegmentEvent) -> None:
        """A segment's header line: its type, or the tool a call calls."""
        self._kinds[event.segment_id] = event.segment_type
        if event.segment_type is SegmentType.TOOL_CALL:
            self._line(f"[tool {event.metadata.get('tool_name', '')}]")
        else:
            self._line(f"[{event.segment_type}]")

    def _content(self, event: SegmentEvent) -> None:
        """Text as it comes; a call's raw arguments are shown by their ARGUMENT events instead."""
        if self._kinds.get(event.segment_id) is not SegmentType.TOOL_CALL:
            self._streaming = None
            self._write(event.payload["delta"])

    def _argument(self, event: SegmentEvent) -> None:
        """A string argument as it streams (``key: text``), any other value whole (``key = value``)."""
        path = tuple(event.payload["path"])
        key = ".".join(str(part) for part in path)
        streamed = self._streaming == (event.segment_id, path)
        if "delta" in event.payload:
            if not streamed:
                if self._column:
                    self._write("\n")
                self._write(f"  {key}: ")
                self._streaming = (event.segment_id, path)
            self._write(event.payload["delta"])
        elif streamed and isinstance(event.payload["value"], str):
            self._write("\n" if self._column else "")  # the string was shown as it streamed
            self._streaming = None
        else:
            self._line(f"  {key} = {json.dumps(event.payload['value'], ensure_ascii=False)}")

    def _end(self, event: SegmentEvent) -> None:
        """The segment's last line ends."""
        del event
        if self._column:
            self._write("\n")
        self._streaming = None


_PLAIN_SEGMENT_EVENTS = {
    SegmentEventType.START: PlainRenderer._start,
    SegmentEventType.CONTENT: PlainRenderer._content,
    SegmentEventType.ARGUMENT: PlainRenderer._argument,
    SegmentEventType.END: PlainRenderer._end,
}


@dataclass
class _Block:
    segment_id: str
    segment_type: SegmentType | None
    name: str = ""
    pieces: list[str] = field(default_factory=list)
    arguments: dict[str, list[str]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    done: bool = False
    invocation: ToolInvocation | None = None

    def add_argument(self, payload: Mapping[str, Any]) -> None:
        """A piece of a string argument, or a whole value (a file tool's ``path`` names the block)."""
        key = ".".join(map(str, payload["path"]))
        if "delta" in payload:
            self.arguments.setdefault(key, []).append(payload["delta"])
            return
        self.values[key] = payload["value"]
        if payload["path"] == ["path"] and isinstance(payload["value"], str):
            self.path = payload["value"]


_FOLDED = frozenset({SegmentType.TOOL_CALL, SegmentType.WRITE_FILE, SegmentType.PATCH_FILE})
"""Segments whose invocation follows their END: a finished one waits for it (or for the next event)."""


class LiveRenderer(Renderer):
    """A rich ``Live`` view of the stream, redrawn at most ``refresh_per_second`` times a second.

    Finished blocks are printed above the live region once each, in stream order, so the scrollback is a
    clean transcript; the live region holds only the blocks still streaming (and those after them), cut to
    its last lines so that it stays within the screen (a taller region could not be redrawn in place).

    Every write to the terminal (a redraw by the ticker thread, a finished block printed by ``feed``) is made
    under one lock: rich's ``Live`` erases its region by the height it last drew, so a redraw between the
    erasing and the drawing of a print would erase lines of the transcript.
    """

    def __init__(self, console: Any, *, refresh_per_second: float = 12) -> None:
        from rich.live import Live

        self._console = console
        self._blocks: dict[str, _Block] = {}
        self._order: list[_Block] = []
        self._printed = 0
        """Blocks of ``_order`` already printed above the live region (a prefix: stream order is kept)."""
        self._end: ResponseEnd | None = None
        self._lock = threading.Lock()
        self._changed = False
        """Whether an event came since the last redraw."""
        self._live = Live(
            get_renderable=self._renderable, console=console, auto_refresh=False, vertical_overflow="crop"
        )
        self._live.start()
        self._closing = threading.Event()
        self._ticker = threading.Thread(
            target=self._tick, args=(1 / refresh_per_second,), name="streamfold-live", daemon=True
        )
        self._ticker.start()

    def _tick(self, interval: float) -> None:
        while not self._closing.wait(interval):
            with self._lock:
                if self._changed:
                    self._changed = False
                    self._live.refresh()

    def feed(self, event: PipelineEvent) -> None:
        with self._lock:
            self._changed = True
            if isinstance(event, ToolInvocation):
                block = self._blocks.get(event.id)
                if block is not None:
                    block.invocation = event
                self._print_finished()
                return
            self._print_finished(settled=True)  # an invocation comes right after its END or not at all
            if isinstance(event, SegmentEvent):
                self._segment_event(event)
                if event.event_type is SegmentEventType.END:
                    self._print_finished()
            elif isinstance(event, ResponseEnd):
                self._end = event

    def refresh(self) -> None:
        """Redraw the live region now, rather than at the next tick."""
        with self._lock:
            self._changed = False
            self._live.refresh()

    def close(self) -> None:
        """Print every block not printed yet and the finish line, leaving an empty live region."""
        self._closing.set()
        self._ticker.join()
        with self._lock:
            try:
                remaining, self._printed = self._order[self._printed :], len(self._order)
                footer, self._end = self._footer(), None
                self._live.refresh()
                for renderable in [*map(self._draw, remaining), *footer]:
                    self._console.print(renderable)
            finally:
                self._live.stop()  # the terminal's cursor back, even if a block cannot be drawn

    def _print_finished(self, *, settled: bool = False) -> None:
        """Print the finished blocks at the head of the live region; ``settled``: also a folded segment
        whose invocation has not come (none will)."""
        order = self._order
        first = self._printed
        while self._printed < len(order):
            block = order[self._printed]
            if not block.done or (block.segment_type in _FOLDED and block.invocation is None and not settled):
                break
            self._printed += 1
        if self._printed > first:
            self._live.refresh()  # the live region without them, so that the print redraws it so
            for block in order[first : self._printed]:
                self._console.print(self._draw(block))

    def _segment_event(self, event: SegmentEvent) -> None:
        kind = event.event_type
        if kind is SegmentEventType.START:
            block = _Block(event.segment_id, event.segment_type, event.metadata.get("tool_name", ""))
            self._blocks[event.segment_id] = block
            self._order.append(block)
            return
        block_or_none = self._blocks.get(event.segment_id)
        if block_or_none is None:
            return
        block = block_or_none
        if kind is SegmentEventType.CONTENT:
            block.pieces.append(event.payload["delta"])
        elif kind is SegmentEventType.ARGUMENT:
            block.add_argument(event.payload)
        elif kind is SegmentEventType.END:
            block.done = True
            path = event.metadata.get("path")
            if isinstance(path, str):
                block.path = path

    def _renderable(self) -> Any:
        from rich.console import Group

        live = self._order[self._printed :]
        return _Tail(Group(*(self._draw(block) for block in live), *self._footer()))

    def _footer(self) -> list[Any]:
        from rich.text import Text

        if self._end is None:
            return []
        usage = self._end.usage
        tokens = f"  {usage.prompt_tokens} in / {usage.completion_tokens} out tokens" if usage else ""
        return [Text(f"finish: {self._end.finish_reason}{tokens}", style="bold")]

    def _draw(self, block: _Block) -> Any:
        from rich.console import Group
        from rich.panel import Panel
        from rich.syntax import Syntax
        from rich.text import Text

        text = "".join(block.pieces)
        if block.segment_type is SegmentType.REASONING:
            return Text(text or "(reasoning)", style="dim italic")
        if block.segment_type is SegmentType.TEXT:
            return Text(text)
        if block.segment_type in (SegmentType.WRITE_FILE, SegmentType.PATCH_FILE):
            title = f"{block.name} {block.path or '…'}"
            body: Any = Syntax(
                text, _lexer(block.path, block.segment_type), line_numbers=True, word_wrap=True
            )
        else:
            title = f"tool {block.name}"
            body = _arguments_table(block, text)
        footer = self._invocation_line(block)
        if footer is not None:
            body = Group(body, footer)
        return Panel(body, title=title, border_style="green" if block.done else "yellow")

    @staticmethod
    def _invocation_line(block: _Block) -> Any:
        from rich.text import Text

        invocation = block.invocation
        if invocation is None:
            return None
        if invocation.error is not None:
            return Text(f"✗ {invocation.error.kind}: {invocation.error.message}", style="red")
        return Text(f"✓ invocation {invocation.id} ready", style="green")


def _arguments_table(block: _Block, text: str) -> Any:
    """A call's arguments, one row each: whole values, then strings still streaming; its raw text while
    no argument is known."""
    from rich.table import Table
    from rich.text import Text

    table = Table.grid(padding=(0, 1))
    table.add_column(style="cyan", no_wrap=True)
    table.add_column()
    for key, value in block.values.items():
        table.add_row(key, json.dumps(value, ensure_ascii=False))
    for key, parts in block.arguments.items():
        if key not in block.values:
            table.add_row(key, Text('"' + "".join(parts) + "…", style="yellow"))
    if not block.values and not block.arguments:
        table.add_row("", Text(text, style="yellow"))
    return table


class _Tail:
    """A renderable's last lines, as many as fit the screen less one (the cursor's line), with a marker
    line first when lines were cut: a live region must fit the screen to be redrawn in place."""

    def __init__(self, renderable: Any) -> None:
        self._renderable = renderable

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.segment import Segment

        room = max((options.height or console.height) - 1, 1)
        lines = console.render_lines(self._renderable, options.update(height=None), pad=False)
        if len(lines) > room:
            shown = lines[len(lines) - room + 1 :]
            marker = f"⋮ {len(lines) - len(shown)} lines above, still streaming"
            lines = [[Segment(marker, console.get_style("dim"))], *shown]
        for number, line in enumerate(lines):
            yield from line
            if number < len(lines) - 1:
                yield Segment.line()


def make_renderer(out: IO[str], *, force_plain: bool = False) -> Renderer:
    """A live renderer on a capable terminal, plain lines otherwise (``TERM=dumb``, pipes, files)."""
    try:
        from rich.console import Console
    except ImportError:  # the cli extra is not installed
        return PlainRenderer(out)
    console = Console(file=out)
    if force_plain or not console.is_terminal or console.is_dumb_terminal:
        return PlainRenderer(out)
    return LiveRenderer(console)

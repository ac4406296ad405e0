"""Line cutting shared by the line-based framers (SSE and JSON Lines), the UTF-8 error they raise, and
what every framer does with a read that is not bytes.

Lines are cut on the raw bytes: a CR or LF byte never occurs inside a UTF-8 multi-byte sequence, so a
character split across reads needs no decoder state, and every error can name its exact byte offset.
"""

from __future__ import annotations

from typing import Any

from pipeline._jsonenc import invalid_utf8
from pipeline.errors import StreamfoldError

BOM = b"\xef\xbb\xbf"


class LineSplitter:
    """Cuts a byte stream into complete lines (without their CR, LF or CRLF ending), linearly.

    `split` returns ``(line, byte offset of the line)`` pairs; a partial last line is held as pieces
    and joined once, when its end arrives. A UTF-8 byte order mark at the very start is dropped.
    """

    __slots__ = ("_pending", "_skip_lf", "offset", "pending_size", "started")

    def __init__(self) -> None:
        self.offset = 0
        """Byte offset of the first byte not yet part of a returned line (the held partial line's start).
        A framer that consumes a whole read itself, at a line start, moves it on."""
        self._pending: list[bytes] = []
        self.pending_size = 0
        """Size of the held partial line, for the framers' caps."""
        self._skip_lf = False
        self.started = False
        """Whether the start of the stream (and a BOM there) is behind."""

    def at_line_start(self) -> bool:
        """Whether nothing of a line is held: the next byte starts a line."""
        return self.started and not self._pending and not self._skip_lf

    def split(self, data: bytes) -> list[tuple[bytes, int]]:
        """The complete lines that ``data`` ends, with their byte offsets."""
        if self._skip_lf and data:
            self._skip_lf = False
            if data[0] == 0x0A:  # the LF of a CRLF whose CR ended the previous read
                data = data[1:]
                self.offset += 1
        if not self.started:
            data = self._strip_bom(data)
        pieces = data.splitlines(keepends=True)  # bytes.splitlines cuts on \r, \n and \r\n only
        if not pieces:
            return []
        last = pieces[-1]
        complete = last.endswith((b"\n", b"\r"))
        if not complete:
            pieces.pop()
        lines: list[tuple[bytes, int]] = []
        for piece in pieces:
            if self._pending:
                self._pending.append(piece)
                piece = b"".join(self._pending)
                self._pending.clear()
                self.pending_size = 0
            ending = 2 if piece.endswith(b"\r\n") else 1
            lines.append((piece[:-ending], self.offset))
            self.offset += len(piece)
        if complete:
            self._skip_lf = last.endswith(b"\r")
        else:
            self._pending.append(last)
            self.pending_size += len(last)
        return lines

    def finish(self) -> list[tuple[bytes, int]]:
        """The partial last line, if any: a stream may end without a final line ending."""
        if not self._pending:
            return []
        line = b"".join(self._pending)
        self._pending.clear()
        self.pending_size = 0
        offset = self.offset
        self.offset += len(line)
        return [(line, offset)]

    def _strip_bom(self, data: bytes) -> bytes:
        """Drop a UTF-8 byte order mark at the very start of the stream, even when split across reads."""
        head = b"".join(self._pending) + data if self._pending else data
        if len(head) < len(BOM) and BOM.startswith(head):
            self._pending = [head] if head else []  # too short to tell yet
            self.pending_size = len(head)
            return b""
        self.started = True
        self._pending.clear()
        self.pending_size = 0
        if head.startswith(BOM):
            self.offset += len(BOM)
            return head[len(BOM) :]
        return head


def decode_text(data: bytes, offset: int) -> str:
    """``data`` as text; invalid UTF-8 raises `StreamDecodeError` naming its byte of the stream
    (``offset`` is that of ``data``)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid_utf8(data, offset) from None


def as_bytes(framer: object, read: object) -> bytes:
    """A read that is not bytes, as bytes: a bytearray or a memoryview is copied (framers call this only
    for a read that is not bytes, so bytes pay nothing for it).

    Raises:
        TypeError: ``read`` is not bytes-like (a ``str``, say), naming the framer and the type.
    """
    if isinstance(read, bytes | bytearray | memoryview):
        return bytes(read)
    raise TypeError(
        f"{type(framer).__name__} reads bytes, a bytearray or a memoryview, not {type(read).__name__}"
    )


def keep_partial(error: StreamfoldError, outputs: list[Any]) -> None:
    """Put what a feed produced before ``error`` first in its ``partial_outputs`` (`drive` yields
    them before raising)."""
    error.partial_outputs = outputs + error.partial_outputs

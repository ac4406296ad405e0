"""JSON Lines (``.jsonl`` recordings, NDJSON bodies): one payload a line.

`JSONLinesFramer` yields each non-blank line's bytes as a `Payload`;
`JSONLinesDecoder` chains it with the generic JSON decode, one value a line.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Final

from aiostream import pipable_operator

from operators.adapter._lines import LineSplitter, as_bytes, keep_partial
from operators.adapter.payloads import Framed, PayloadParser
from pipeline.errors import StreamDecodeError, StreamfoldError
from pipeline.models import Payload
from pipeline.stage import operator_stream

__all__ = ["DEFAULT_MAX_LINE_SIZE", "JSONLinesDecoder", "JSONLinesFramer", "decode_jsonl"]

DEFAULT_MAX_LINE_SIZE: Final = 16 * 1024 * 1024
"""Default cap, in bytes, of one line: 16 MiB."""

_DONE: Final = b"[DONE]"


class JSONLinesFramer:
    """Sans-IO framer: bytes -> each non-blank line (without its ending and surrounding whitespace) as a
    `Payload`.

    Lines end with CR, LF or CRLF, and bytes may be split anywhere. A line ``[DONE]`` is skipped, so that
    recorded SSE payloads can be replayed as they were. A line longer than ``max_line_size`` bytes raises
    `StreamDecodeError` naming its byte offset (the cap also bounds a line that never ends).
    """

    __slots__ = ("_lines", "_max")

    def __init__(self, *, max_line_size: int = DEFAULT_MAX_LINE_SIZE) -> None:
        self._max = max_line_size
        self._lines = LineSplitter()

    def feed(self, chunk: bytes) -> list[Payload]:
        """The payloads of the lines this read completes."""
        if type(chunk) is not bytes:
            chunk = as_bytes(self, chunk)
        out: list[Payload] = []
        try:
            for line, offset in self._lines.split(chunk):
                self._line(line, offset, out)
            if self._lines.pending_size > self._max:
                self._too_large(self._lines.offset)
        except StreamfoldError as error:
            keep_partial(error, out)
            raise
        return out

    def finish(self) -> list[Payload]:
        """The body has ended: the last line, if it had no newline."""
        out: list[Payload] = []
        for line, offset in self._lines.finish():
            self._line(line, offset, out)
        return out

    def _line(self, line: bytes, offset: int, out: list[Payload]) -> None:
        if len(line) > self._max:
            self._too_large(offset)
        stripped = line.strip()
        if stripped and stripped != _DONE:
            out.append(Payload(stripped, offset + len(line) - len(line.lstrip())))

    def _too_large(self, offset: int) -> None:
        raise StreamDecodeError(
            f"JSON line starting at byte {offset} is larger than max_line_size={self._max} bytes",
            offset=offset,
        )


class JSONLinesDecoder(Framed):
    """Sans-IO core: bytes -> one decoded JSON value per non-blank line.

    `JSONLinesFramer` chained with the generic JSON decode. A line that is not JSON raises
    `StreamDecodeError` naming its number (counting the lines that hold a value, from 0) and byte
    offset.

    Args:
        max_line_size: cap, in bytes, of one line (`StreamDecodeError` beyond it).
        check_errors: an in-band provider error object raises `ProviderError`.
        objects_only: a line holding anything but a JSON object raises `StreamDecodeError`.
    """

    __slots__ = ()

    def __init__(
        self,
        *,
        max_line_size: int = DEFAULT_MAX_LINE_SIZE,
        check_errors: bool = True,
        objects_only: bool = False,
    ) -> None:
        super().__init__(
            JSONLinesFramer(max_line_size=max_line_size),
            PayloadParser("line", check_errors=check_errors, objects_only=objects_only),
        )


@pipable_operator
def decode_jsonl(
    source: AsyncIterable[bytes], *, max_line_size: int = DEFAULT_MAX_LINE_SIZE, check_errors: bool = True
) -> AsyncIterator[Any]:
    """Decode a JSON Lines byte stream into one value per non-blank line.

    Args:
        source: the stream's bytes.
        max_line_size: cap, in bytes, of one line.
        check_errors: an in-band provider error object raises `ProviderError`.

    Raises:
        StreamDecodeError: a line is not JSON or is over ``max_line_size``.
    """
    return operator_stream(source, JSONLinesDecoder(max_line_size=max_line_size, check_errors=check_errors))

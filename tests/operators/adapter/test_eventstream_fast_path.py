"""The event-stream framer's whole-frame path (a read that is one whole frame, as live traffic comes) gives
exactly what the frame loop gives: the same payloads, offsets and error as one-byte reads, for every kind
of frame, sound or not."""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import sys
import zlib
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter import EventStreamFramer
from pipeline.models import Payload
from tests.core_runs import run_to_end

CHUNK_HEADERS = ((":event-type", "chunk"), (":content-type", "application/json"), (":message-type", "event"))


def headers_of(headers: tuple[tuple[str, str], ...]) -> bytes:
    return b"".join(
        bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value)) + value.encode()
        for name, value in headers
    )


def frame(
    body: bytes,
    headers: bytes = headers_of(CHUNK_HEADERS),
    *,
    headers_length: int | None = None,
    prelude_crc_delta: int = 0,
    message_crc_delta: int = 0,
) -> bytes:
    """One frame; the deltas and ``headers_length`` make it unsound where the prelude says so."""
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers) if headers_length is None else headers_length)
    prelude += struct.pack(">I", (zlib.crc32(prelude) + prelude_crc_delta) & 0xFFFFFFFF)
    message = prelude + headers + body
    return message + struct.pack(">I", (zlib.crc32(message) + message_crc_delta) & 0xFFFFFFFF)


def wrapped(event: object, padding: str = "abc") -> bytes:
    inner = base64.b64encode(json.dumps(event).encode()).decode()
    return json.dumps({"bytes": inner, "p": padding}, ensure_ascii=False).encode()


FRAMES = [
    frame(wrapped({"type": "ping"})),
    frame(wrapped({"type": "content_block_delta", "delta": {"text": "hi"}})),
    frame(wrapped({"type": "ping"}, padding="caf\u00e9")),  # not ASCII: the general unwrap
    frame(b'{"bytes": "not base64!", "p": "x"}'),
    frame(b'{"bytes": 7}'),
    frame(b'{"type": "message_stop"}'),  # no wrapper: the event itself
    frame(b"[1, 2]"),
    frame(b'{"bytes": '),
    frame(
        b'{"contentBlockIndex": 0, "delta": {"text": "x"}}',
        headers_of(((":event-type", "contentBlockDelta"),)),
    ),
    frame(b"", headers_of(((":event-type", "messageStop"), (":message-type", "event")))),
    frame(
        b'{"message": "slow down"}', headers_of(((":message-type", "exception"), (":exception-type", "x")))
    ),
    frame(b"", headers_of(((":message-type", "error"), (":error-code", "E"), (":error-message", "boom")))),
    frame(b"{}", headers_of(((":message-type", "future"),))),
    frame(b"{}", b"\x05:abc\x0e"),  # a header of an unknown type
    frame(wrapped({"type": "ping"}), prelude_crc_delta=1),
    frame(wrapped({"type": "ping"}), message_crc_delta=1),
    frame(wrapped({"type": "ping"}), headers_length=1000),
    frame(b"x" * 200),  # over the smaller caps
]
"""Frames of every kind: Bedrock's wrapper and what is wrong with it, ConverseStream events, exception,
error and unknown messages, and frames unsound in their prelude, CRCs, lengths or headers."""


def framed(reads: Sequence[bytes | bytearray], max_frame_size: int) -> tuple[list[Payload], str | None]:
    return run_to_end(EventStreamFramer(max_frame_size=max_frame_size), reads)


READS = st.lists(
    st.tuples(
        st.lists(st.sampled_from(FRAMES), min_size=1, max_size=2),  # mostly one frame a read
        st.sampled_from(["whole", "whole", "whole", "bytearray", "cut"]),
        st.integers(min_value=0),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(reads=READS, max_frame_size=st.sampled_from([150, 1 << 20]))
def test_reads_of_one_frame_each_give_the_payloads_of_one_byte_reads(
    reads: list[tuple[list[bytes], str, int]], max_frame_size: int
) -> None:
    """Each read one frame (or two, or a frame cut in two, or a bytearray): the same payloads, offsets and
    error as the frame loop reading one byte at a time."""
    chunks: list[bytes | bytearray] = []
    for frames, how, position in reads:
        read = b"".join(frames)
        if how == "cut":
            at = position % (len(read) + 1)
            chunks += [read[:at], read[at:]]
        else:
            chunks.append(bytearray(read) if how == "bytearray" else read)
    body = b"".join(chunks)
    reference = framed([body[index : index + 1] for index in range(len(body))], max_frame_size)
    assert framed(chunks, max_frame_size) == reference


def named(event_type: str, *more: tuple[str, str]) -> bytes:
    return headers_of(((":event-type", event_type), *more))


def test_a_header_block_of_the_same_length_as_the_last_is_read_again_when_its_bytes_differ() -> None:
    """contentBlockStart and contentBlockDelta have header blocks of one length: each frame is named by
    its own."""
    reads = [
        frame(b'{"start": {}}', named("contentBlockStart")),
        frame(b'{"delta": {}}', named("contentBlockDelta")),
    ]
    assert len(named("contentBlockStart")) == len(named("contentBlockDelta"))
    payloads, error = framed(reads, 1 << 20)
    assert error is None
    assert [payload.data for payload in payloads] == [
        b'{"contentBlockStart":{"start": {}}}',
        b'{"contentBlockDelta":{"delta": {}}}',
    ]


def test_a_header_block_that_starts_with_the_last_one_is_read_again() -> None:
    """A frame whose headers are the last event frame's and more (here: an exception's) is not taken for
    that event."""
    chunk = named("chunk")
    exception = named("chunk", (":message-type", "exception"), (":exception-type", "throttlingException"))
    assert exception.startswith(chunk)
    reads = [frame(wrapped({"type": "ping"}), chunk), frame(b'{"message": "slow down"}', exception)]
    payloads, error = framed(reads, 1 << 20)
    assert [payload.data for payload in payloads] == [b'{"type": "ping"}']
    assert error == "ProviderError: event-stream frame 1: provider error (throttlingException): slow down"


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=600), start=st.integers(min_value=0, max_value=0xFFFFFFFF))
def test_the_crc32_of_the_bedrock_extra_is_zlibs(data: bytes, start: int) -> None:
    """zlib-ng's CRC-32 (what the framer checks frames with when the ``bedrock`` extra is installed) is
    zlib's, the one AWS event-stream frames carry, continued from any value."""
    zlib_ng = pytest.importorskip("zlib_ng.zlib_ng")
    assert zlib_ng.crc32(data, start) == zlib.crc32(data, start)


def test_without_the_bedrock_extra_zlib_checks_the_frames() -> None:
    """Without zlib-ng the framer imports and checks CRCs with zlib's crc32: a sound frame is read, one
    with a bad message CRC is refused."""
    program = f"""
import sys, zlib
sys.modules["zlib_ng"] = None  # as if the extra were not installed
from operators.adapter import eventstream
assert eventstream.crc32 is zlib.crc32
framer = eventstream.EventStreamFramer()
payloads = framer.feed({frame(wrapped({"type": "ping"}))!r})
assert [payload.data for payload in payloads] == [b'{{"type": "ping"}}'], payloads
try:
    framer.feed({frame(wrapped({"type": "ping"}), message_crc_delta=1)!r})
except Exception as error:
    assert "bad message CRC" in str(error), error
else:
    raise AssertionError("a bad message CRC was read")
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr

"""The SSE framer's whole-event path (a read that is one whole event of one ``data`` line, as live traffic
comes) gives exactly what the line-by-line path gives: the same events or payloads as reads cut anywhere
else, down to one byte a read, which no whole-event path can take."""

from __future__ import annotations

from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter import ServerSentEvent, SSEDecoder, SSEFramer, SSEPayloadDecoder
from pipeline.errors import ProviderError, StreamDecodeError
from pipeline.models import Payload
from tests.core_runs import run_to_end

LINES = [
    b'data: {"a": 1}',
    b"data:x",
    b"data",
    b"data:  two spaces",
    b"data: caf\xc3\xa9 \xe2\x98\x95",
    b"data: \xff not UTF-8",
    b"data: " + b"y" * 40,
    b"event: update",
    b"id: 7",
    b"retry: 100",
    b": a comment",
    b"unknown: field",
    b"",
    b"",
    b"",
]
ENDINGS = [b"\n", b"\n", b"\n", b"\n", b"\r\n", b"\r"]


def decode(chunks: list[bytes], max_event_size: int) -> tuple[list[ServerSentEvent], str | None]:
    """Every event, those before an error included, and the error's message."""
    decoder = SSEDecoder(max_event_size=max_event_size)
    events: list[ServerSentEvent] = []
    try:
        for chunk in chunks:
            events.extend(decoder.feed(chunk))
        events.extend(decoder.finish())
    except StreamDecodeError as error:
        return events + error.partial_outputs, str(error)
    return events, None


def one_byte_a_read(chunks: list[bytes]) -> list[bytes]:
    data = b"".join(chunks)
    return [data[index : index + 1] for index in range(len(data))]


def cut(data: bytes, positions: list[int]) -> list[bytes]:
    bounds = sorted({position % (len(data) + 1) for position in positions})
    return [data[start:end] for start, end in zip([0, *bounds], [*bounds, len(data)], strict=True)]


def events_a_read(data: bytes) -> list[bytes]:
    """``data`` cut after each blank line (LF only), so that each read is one event, as a server flushes."""
    pieces = data.split(b"\n\n")
    return [piece + b"\n\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


STREAMS = st.lists(st.tuples(st.sampled_from(LINES), st.sampled_from(ENDINGS)), max_size=40).map(
    lambda lines: b"".join(line + ending for line, ending in lines)
)


@settings(max_examples=300, deadline=None)
@given(
    data=STREAMS,
    positions=st.lists(st.integers(min_value=0, max_value=2000), max_size=6),
    max_event_size=st.sampled_from([48, 100, 1 << 20]),
)
def test_the_whole_event_path_changes_nothing(data: bytes, positions: list[int], max_event_size: int) -> None:
    reference = decode(one_byte_a_read([data]), max_event_size)
    assert decode(events_a_read(data), max_event_size) == reference
    assert decode(cut(data, positions), max_event_size) == reference


@settings(max_examples=200, deadline=None)
@given(data=STREAMS, positions=st.lists(st.integers(min_value=0, max_value=2000), max_size=6))
def test_any_chunking_gives_what_byte_by_byte_gives(data: bytes, positions: list[int]) -> None:
    reference = decode([data[i : i + 1] for i in range(len(data))], 1 << 20)
    assert decode(cut(data, positions), 1 << 20) == reference
    assert decode([data], 1 << 20) == reference


def test_events_of_one_data_line_come_straight_from_a_chunk() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(
        b'id: 1\ndata: {"a": 1}\n\ndata: b\n\ndata:c\n\n: note\nevent: e\ndata: d\n\ndata: e'
    ) == [
        ServerSentEvent(data='{"a": 1}', id="1"),
        ServerSentEvent(data="b", id="1"),
        ServerSentEvent(data="c", id="1"),
        ServerSentEvent(event="e", data="d", id="1"),
    ]
    assert decoder.feed(b"\n\n") == [ServerSentEvent(data="e", id="1")]


def test_an_error_in_a_chunk_of_whole_events_names_its_byte_after_the_events_before() -> None:
    decoder = SSEDecoder()
    with pytest.raises(StreamDecodeError, match=r"^invalid UTF-8 at byte 16 of the stream") as raised:
        decoder.feed(b"data: a\n\ndata: b\xff\n\ndata: c\n\n")
    assert raised.value.partial_outputs == [ServerSentEvent(data="a")]


def test_offsets_run_on_across_chunks_of_whole_events() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: b\n\ndata: c") == [
        ServerSentEvent(data="a"),
        ServerSentEvent(data="b"),
    ]
    assert decoder.feed(b"\n\n: x\n\n") == [ServerSentEvent(data="c")]
    with pytest.raises(StreamDecodeError, match=r"^invalid UTF-8 at byte 47 of the stream"):
        decoder.feed(b"data: d\n\ndata: \xff\n\n")


PAYLOAD_LINES = [
    b'data: {"choices": [{"delta": {"content": "hi"}}]}',
    b'data:{"a":"caf\xc3\xa9 \xe2\x98\x95"}',
    b'data: {"a": "\xed\xa0\x80"}',
    b'data: {"a": "\xff"}',
    b'data: {"a": "\\ud800"}',
    b'data: {"n": 1e999, "pad": 0}',
    b'data: {"error": {"message": "overloaded", "code": 529}}',
    b'data: {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}',
    b'data: {"error": null, "ok": true}',
    b"data: [DONE]",
    b"data:   [DONE]  ",
    b"data: [1, 2, 3, 4, 5, 6]",
    b"data: not json at all",
    b'data: {"cut": ',
    b"event: error",
    b"event: ping",
    b"id: 7",
    b": comment",
    b"",
    b"",
    b"",
]
PAYLOAD_STREAMS = st.lists(
    st.tuples(st.sampled_from(PAYLOAD_LINES), st.sampled_from(ENDINGS)), max_size=30
).map(lambda lines: b"".join(line + ending for line, ending in lines))


def payloads(chunks: list[bytes], max_event_size: int) -> tuple[list[object], str | None]:
    """Every payload of :class:`SSEPayloadDecoder`, those before an error included, and the error."""
    return run_to_end(SSEPayloadDecoder(max_event_size=max_event_size), chunks)


@settings(max_examples=400, deadline=None)
@given(
    data=PAYLOAD_STREAMS,
    positions=st.lists(st.integers(min_value=0, max_value=2000), max_size=6),
    max_event_size=st.sampled_from([40, 100, 1 << 20]),
)
def test_payloads_of_whole_event_reads_are_those_of_the_line_by_line_path(
    data: bytes, positions: list[int], max_event_size: int
) -> None:
    reference = payloads(one_byte_a_read([data]), max_event_size)
    assert payloads(events_a_read(data), max_event_size) == reference
    assert payloads(cut(data, positions), max_event_size) == reference


def test_an_error_payload_after_fast_events_names_its_event_and_keeps_those_before() -> None:
    decoder = SSEPayloadDecoder()
    with pytest.raises(
        ProviderError, match=r"^event 2: provider error \(overloaded_error\): busy$"
    ) as raised:
        decoder.feed(
            b'data: {"a": 1}\n\n: note\n\ndata: {"b": 2}\n\n'
            b'data: {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}\n\n'
            b'data: {"c": 3}\n\n'
        )
    assert raised.value.partial_outputs == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize("reads", [[b"data: [DONE]\n\n", b"data: {\n\n"], [b"data: [DONE]\n\ndata: {\n\n"]])
def test_done_ends_the_data(reads: list[bytes]) -> None:
    """Nothing after ``data: [DONE]`` is read, not even bytes that are not JSON."""
    decoder = SSEPayloadDecoder()
    assert decoder.feed(b'data: {"a": 1}\n\n') == [{"a": 1}]
    assert [value for read in reads for value in decoder.feed(read)] + decoder.finish() == []


def test_bad_json_after_fast_events_names_its_byte() -> None:
    decoder = SSEPayloadDecoder()
    assert decoder.feed(b'data: {"a": 1}\n\n') == [{"a": 1}]
    with pytest.raises(
        StreamDecodeError, match=r"^event 2 \(byte 38\) has data that is not valid JSON"
    ) as raised:
        decoder.feed(b'data: {"b": 2}\n\ndata: {"c": \n\ndata: {"d": 4}\n\n')
    assert raised.value.partial_outputs == [{"b": 2}]


DATA_LINES = [
    b'data: {"a": 1}',
    b"data: [DONE]",
    b"data:  [DONE] ",
    b"data:x",
    b"data: caf\xc3\xa9",
    b"data: ",
    b"data: a\rb",
    b"data: a\nb",
    b'data: {"long": "0123456789"}',
    b'data:{"long": "0123456789"}',
    b'data:  {"long": "0123456789"}',
    b'data: {"long": "0123456789",\r"b": 1}',
    b'data: {"long": "0123456789",\n"b": 1}',
]
"""``data`` lines, valid UTF-8 (the live path leaves their check to the JSON decode); the live path takes
only data longer than ``[DONE]`` with spaces around it."""
NAME_LINES = [
    b"",
    b"event: ping",
    b"event: response.output_text.delta",
    b"event: error",
    b"event:error",
    b"event: caf\xc3\xa9",
    b"event: \xff",
    b"event: a\rb",
    b"event: a\rdata: b",
    b"event: a\revent: error",
    b"event: a\nevent: error",
    b"event: a\ndata:b",
    b"id: 7",
    b": comment",
]
"""What may come before the ``data`` line (nothing, most often live), a CR or LF inside a name included
(where what follows it is a line of its own)."""
NEWLINES = st.sampled_from([b"\n", b"\n", b"\r\n", b"\r"])
LIVE_EVENTS = st.one_of(
    st.tuples(
        st.sampled_from([b"", b"event: ping", *NAME_LINES]),
        st.sampled_from([b'data: {"a": 1}', b"data: caf\xc3\xa9", *DATA_LINES]),
        NEWLINES,
    ).map(lambda event: (event[0] + event[2] if event[0] else b"") + event[1] + event[2] * 2),
    st.lists(st.tuples(st.sampled_from(NAME_LINES + DATA_LINES), NEWLINES), max_size=3).map(
        lambda lines: b"".join(line + newline for line, newline in lines) + b"\n"
    ),
)
"""One event a read: the live shapes, their endings alike, or lines of any kind and endings (the ones
that end the stream drawn less often, so that the reads after them are compared too)."""


def framed(reads: list[bytes], max_event_size: int) -> tuple[list[Payload], str | None]:
    """Every payload of :class:`SSEFramer`, those before an error included, and the error."""
    return run_to_end(SSEFramer(max_event_size=max_event_size), reads)


@settings(max_examples=600, deadline=None)
@given(
    head=st.sampled_from(
        [b"", b"data: {}\n\n", b"\xef\xbb\xbfdata: {}\n\n", b": hi\n\ndata: {}\r\n\r\n", b"<html>\n\n"]
    ),
    events=st.lists(LIVE_EVENTS, min_size=1, max_size=12),
    positions=st.lists(st.integers(min_value=0, max_value=600), max_size=4),
    max_event_size=st.sampled_from([12, 40, 1 << 20, 1 << 20]),
)
def test_framer_reads_of_one_event_each_give_the_payloads_of_one_byte_reads(
    head: bytes, events: list[bytes], positions: list[int], max_event_size: int
) -> None:
    """Each read one whole event (LF, CRLF or CR endings, an ``event:`` line or not), as live traffic
    comes: the same payloads, offsets and error as the line-by-line path, and as reads cut anywhere."""
    body = head + b"".join(events)
    reference = framed(one_byte_a_read([body]), max_event_size)
    assert framed([head, *events], max_event_size) == reference
    assert framed(cut(body, positions), max_event_size) == reference


@settings(max_examples=400, deadline=None)
@given(
    events=st.lists(st.tuples(LIVE_EVENTS, st.none() | st.integers(min_value=0)), min_size=1, max_size=12),
    max_event_size=st.sampled_from([12, 40, 1 << 20, 1 << 20]),
)
def test_framer_reads_cut_inside_an_event_give_the_payloads_of_one_byte_reads(
    events: list[tuple[bytes, int | None]], max_event_size: int
) -> None:
    """Reads of one whole event each, some cut in two (a read that starts an event and ends inside it, its
    ``event:`` line already seen whole): the same payloads, offsets and error as the line-by-line path."""
    head = b"event: ping\ndata: {}\n\nevent: ping\ndata: {}\n\n"
    reads = [head]
    for event, position in events:
        at = len(event) if position is None else position % (len(event) + 1)
        reads += [event[:at], event[at:]]
    assert framed(reads, max_event_size) == framed(one_byte_a_read(reads), max_event_size)


@settings(max_examples=400, deadline=None)
@given(
    groups=st.lists(
        st.tuples(st.lists(LIVE_EVENTS, min_size=1, max_size=6), st.none() | st.integers(min_value=0)),
        min_size=1,
        max_size=6,
    ),
    max_event_size=st.sampled_from([12, 40, 1 << 20, 1 << 20]),
)
def test_framer_reads_of_several_events_give_the_payloads_of_one_byte_reads(
    groups: list[tuple[list[bytes], int | None]], max_event_size: int
) -> None:
    """Reads of several whole events each, as a buffered body comes (some cut inside an event, the rest
    going with the next read): the same payloads, offsets and error as the line-by-line path."""
    reads = [b"data: {}\n\n"]
    held = b""
    for events, position in groups:
        read = held + b"".join(events)
        at = len(read) if position is None else position % (len(read) + 1)
        reads.append(read[:at])
        held = read[at:]
    reads.append(held)
    assert framed(reads, max_event_size) == framed(one_byte_a_read(reads), max_event_size)


RUN_EVENTS = [
    b'data: {"long": "0123456789"}\n\n',
    b'data: {"long": "0123456789"}\n\n',
    b'data: {"long": "0123456789"}\n\n',
    b'data: {"long": "0123456789",\r"b": 1}\n\n',
    b'data: {"long": "0123456789",\n"b": 1}\n\n',
    b'data: {"size": "' + b"y" * 40 + b'"}\n\n',
    b"data: [DONE]\n\n",
    b"data: {}\n\n",
    b": ping\n\n",
    b"\n",
    b'event: ping\ndata: {"long": "0123456789"}\n\n',
    b'event: content_block_delta\ndata: {"long": "0123456789"}\n\n',
    b'event: error\ndata: {"long": "0123456789"}\n\n',
    b'data: {"long": "0123456789"}\r\n\r\n',
    b'data: {"long": "0123456789"}\r\n\r\n',
    b'event: content_block_delta\r\ndata: {"long": "0123456789"}\r\n\r\n',
]
"""Events in runs of the same shape, the one a read of many live events is cut at, and what breaks a run:
data holding a CR or LF, data over a cap, ``[DONE]``, short data, comments, another ``event:`` line or
line ending."""


@settings(max_examples=500, deadline=None)
@given(
    first=st.sampled_from([b"data: {}\n\n", b"data: {}\r\n\r\n", b'data: {"long": "0123456789"}\r\n\r\nda']),
    events=st.lists(st.sampled_from(RUN_EVENTS), min_size=1, max_size=24),
    positions=st.lists(st.integers(min_value=0, max_value=1200), max_size=4),
    max_event_size=st.sampled_from([40, 48, 60, 1 << 20]),
)
def test_framer_reads_of_runs_of_events_give_the_payloads_of_one_byte_reads(
    first: bytes, events: list[bytes], positions: list[int], max_event_size: int
) -> None:
    """Reads of many events, most shaped alike, cut anywhere (the first read's events with LF or CRLF
    endings): the same payloads, offsets and error as the line-by-line path."""
    body = b"".join(events)
    reads = [first, *cut(body, positions)]
    assert framed(reads, max_event_size) == framed(one_byte_a_read(reads), max_event_size)


@pytest.mark.parametrize("ending", [b"\n\n", b"\r\n\r\n"])
def test_framer_reads_of_several_events_give_each_data_at_its_offset(ending: bytes) -> None:
    """Events of several shapes in reads of several events: each shape is learnt and taken whole."""
    newline = ending[: len(ending) // 2]
    delta = b"event: content_block_delta" + newline + b'data: {"type": "content_block_delta"}' + ending
    ping = b"event: ping" + newline + b'data: {"type": "ping"}' + ending
    reads = [
        b'data: {"type": "message_start"}' + ending,
        delta * 3 + ping + delta * 2 + b": comment" + ending + delta[:20],
        delta[20:] + delta * 2,
    ]
    payloads, error = framed(reads, 1 << 20)
    assert error is None
    body = b"".join(reads)
    assert [body[p.offset : p.offset + len(p.data)] for p in payloads] == [p.data for p in payloads]
    assert [p.data for p in payloads] == [
        b'{"type": "message_start"}',
        *[b'{"type": "content_block_delta"}'] * 3,
        b'{"type": "ping"}',
        *[b'{"type": "content_block_delta"}'] * 5,
    ]


def test_framer_live_reads_of_bytearrays_are_those_of_bytes() -> None:
    """A bytearray read (outside the typed contract, which says bytes) still gives what bytes give."""
    reads = [b"data: {}\n\n", b'event: ping\ndata: {"a": 1}\n\n', b'data: {"b": 2}\r\n\r\n', b"event: x\n"]
    arrays = cast("list[bytes]", [bytearray(read) for read in reads])
    assert framed(arrays, 1 << 20) == framed(reads, 1 << 20)


def test_framer_live_reads_give_each_data_at_its_offset() -> None:
    framer = SSEFramer()
    reads = [
        b'data: {"a": 1}\n\n',
        b'event: ping\ndata: {"b": 2}\n\n',
        b'data: {"c": 3}\r\n\r\n',
        b'event: caf\xc3\xa9\ndata: {"d": 4}\n\n',
    ]
    payloads = [payload for read in [*reads[:2], b"", *reads[2:]] for payload in framer.feed(read)]
    body = b"".join(reads)
    assert [body[p.offset : p.offset + len(p.data)] for p in payloads] == [p.data for p in payloads]
    assert [p.data for p in payloads] == [b'{"a": 1}', b'{"b": 2}', b'{"c": 3}', b'{"d": 4}']
    with pytest.raises(ProviderError, match=r"^event 4: "):
        framer.feed(b'event: error\ndata: {"error": {"message": "boom"}}\n\n')


LONG = b'{"text": "0123456789"}'
"""Data long enough for the live path."""


@pytest.mark.parametrize("head", [b"", b"event: ping\n", b"event: ping\r\n"])
@pytest.mark.parametrize("newline", [b"\r", b"\n"])
def test_framer_live_reads_whose_data_holds_a_newline_give_its_lines(head: bytes, newline: bytes) -> None:
    """A read shaped as the live ones but with a CR or LF inside its data is several lines."""
    ending = b"\r\n\r\n" if head.endswith(b"\r\n") else b"\n\n"
    live = head + b"data: " + LONG + ending
    reads = [live, live, head + b"data: " + LONG + newline + b"data: " + LONG + ending, live]
    payloads, error = framed(reads, 1 << 20)
    assert (payloads, error) == framed(one_byte_a_read(reads), 1 << 20)
    assert [payload.data for payload in payloads] == [LONG, LONG, LONG + b"\n" + LONG, LONG]


def test_framer_live_reads_keep_the_space_after_data_colon_when_the_read_before_had_none() -> None:
    """Only one space after ``data:`` is dropped, whatever the reads before looked like."""
    reads = [b"data:" + LONG + b"\n\n", b"data:" + LONG + b"\n\n", b"data:  " + LONG + b"\n\n"]
    payloads, error = framed(reads, 1 << 20)
    assert (payloads, error) == framed(one_byte_a_read(reads), 1 << 20)
    assert [payload.data for payload in payloads] == [LONG, LONG, b" " + LONG]


@pytest.mark.parametrize("head", [b"", b"event: ping\n"])
def test_framer_live_reads_over_the_cap_raise_as_line_by_line(head: bytes) -> None:
    """A read of one event larger than ``max_event_size`` is refused as the line-by-line path refuses it."""
    small = head + b"data: " + LONG + b"\n\n"
    large = head + b'data: {"text": "' + b"y" * 32 + b'"}\n\n'  # its data alone under the cap
    reads = [small, small, large]
    payloads, error = framed(reads, 48)
    assert (payloads, error) == framed(one_byte_a_read(reads), 48)
    assert [payload.data for payload in payloads] == [LONG, LONG]
    assert error is not None
    assert "larger than max_event_size=48" in error

"""SSE bytes into the OpenAI Chat converter through the auto adapter: however the bytes are cut into
reads (one whole event a read, as live traffic comes; several events a read; anywhere, down to one byte a
read, which no whole-event path can take), the same chunks and the same error come out."""

from __future__ import annotations

import itertools
import json
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.auto import _AutoChunks, auto_adapter
from pipeline.models import ChunkResponse
from pipeline.stage import chain
from tests.core_runs import run_to_end
from tests.operators.convert.test_openai_chat_fast_path import EVENT

Result = tuple[list[ChunkResponse], str | None]


def ids(position: int) -> str:
    return f"gen_{position}"


def run(reads: list[bytes]) -> Result:
    """Every chunk (those before an error included) and the error, as :func:`pipeline.stage.drive` ends
    the stream."""
    return run_to_end(auto_adapter(provider="openai", framing="sse", id_factory=ids), reads)


def byte_by_byte(reads: list[bytes]) -> Result:
    body = b"".join(reads)
    return run([body[index : index + 1] for index in range(len(body))])


def sse(event: object, *, space: bool = True) -> bytes:
    return b"data:" + (b" " if space else b"") + json.dumps(event).encode() + b"\n\n"


EXTRA = st.fixed_dictionaries(
    {},
    optional={
        "object": st.sampled_from(["chat.completion.chunk", None]),
        "created": st.sampled_from([1700000000, 1.5, None, "x"]),
        "system_fingerprint": st.sampled_from(["fp_1", None]),
        "service_tier": st.sampled_from(["default", None]),
        "obfuscation": st.sampled_from(["abc", None]),
        "type": st.just("error"),
    },
)
LIVE_EVENT = st.builds(
    lambda event, extra, space: sse({**event, **extra}, space=space), EVENT, EXTRA, st.booleans()
)
ODD_READ = st.sampled_from(
    [
        b"data: [DONE]\n\n",
        b": keep-alive\n\n",
        b"data: not json at all\n\n",
        b'data: {"choices": [\n\n',
        b'event: error\ndata: {"error": {"message": "boom"}}\n\n',
        b'data: {"choices": []}\r\n\r\n',
        b'data: {"choices": [{"delta": {"content": "a"}}]}\n',
        b"\n",
        b'data: ["not", "an", "object"]\n\n',
        b'data: {"choices": [{"delta": {"content": "caf\xc3"}}]}\n\n',
        b"data:\n\n",
        b"data: \n\n",
        b"data:0123456789\n\n",
        b"data: 0123456789\n\n",
        b'data:{"choices":[]}\n\n',
        b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n\n',
        b'data: {"choices": [{"delta": {"content": "a"}}]}\n\r\n',
        b'data: {"choices": [{"delta": {"content": "a"}}]}\r\n\n',
        b'data: {"choices": [{"delta": {"content": "a"}}]}\n\ndata: {"choices": []}\n',
        b'data {"choices": [{"delta": {"content": "a"}}]}\n\n',
        b'id: 7\ndata: {"choices": [{"delta": {"content": "a"}}]}\n\n',
        b"retry: 1000\n\n",
        b'data:  {"choices": [{"delta": {"content": "two spaces"}}]}\n\n',
    ]
)


@settings(max_examples=200, deadline=None)
@given(reads=st.lists(st.one_of(LIVE_EVENT, LIVE_EVENT, ODD_READ), max_size=12))
def test_one_event_a_read_gives_what_byte_by_byte_reads_give(reads: list[bytes]) -> None:
    assert run(reads) == byte_by_byte(reads)


def test_a_chain_calls_the_chosen_core_directly_and_an_early_feed_still_works() -> None:
    """Once the auto adapter has chosen its framer, :func:`chain` calls the chosen chain's feed itself,
    not the adapter's wrapper; a feed taken before the first read (as :func:`drive` takes it) still
    gives the same chunks."""
    head = {"id": "c", "model": "m", "created": 1}
    reads = [sse({**head, "choices": [{"index": 0, "delta": {"content": text}}]}) for text in "abc"]
    early = auto_adapter(provider="openai", framing="sse", id_factory=ids).feed
    expected = [chunk for read in reads for chunk in early(read)]
    with mock.patch.object(_AutoChunks, "feed", autospec=True, side_effect=_AutoChunks.feed) as wrapper:
        core = chain(auto_adapter(provider="openai", framing="sse", id_factory=ids), Passing())
        outputs = [chunk for read in reads for chunk in core.feed(read)]
    assert outputs == expected
    assert [chunk.content for chunk in outputs] == ["a", "b", "c"]
    assert wrapper.call_count == 1  # the first read only: it chose the framer


class Passing:
    def feed(self, item: ChunkResponse) -> list[ChunkResponse]:
        return [item]

    def finish(self) -> list[ChunkResponse]:
        return []


PLAIN_LIVE = st.builds(
    lambda text, space: sse({"id": "c", "choices": [{"index": 0, "delta": {"content": text}}]}, space=space),
    st.sampled_from(["a", "bc", " fox", "é"]),
    st.booleans(),
)
"""The live event of nearly every stream (the next text)."""


@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(st.one_of(LIVE_EVENT, PLAIN_LIVE, PLAIN_LIVE, ODD_READ), max_size=14),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=4),
)
def test_reads_cut_anywhere_give_what_byte_by_byte_reads_give(events: list[bytes], cuts: list[int]) -> None:
    body = b"".join(events)
    bounds = [0, *sorted({cut % (len(body) + 1) for cut in cuts}), len(body)]
    reads = [body[start:end] for start, end in itertools.pairwise(bounds) if end > start]
    assert run(reads) == byte_by_byte(reads)


def test_an_error_after_live_events_in_one_read_keeps_them() -> None:
    head = {"id": "c", "model": "m"}
    first = sse({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    texts = [sse({**head, "choices": [{"index": 0, "delta": {"content": text}}]}) for text in "ab"]
    for bad, kind in (
        (b"data: not json at all\n\n", "StreamDecodeError: "),
        (b": ping\n\ndata: not json\n\n", "StreamDecodeError: "),
        (b"data: []\n\n", "ConverterError: event 3: Expected `object`, got `array`"),
    ):
        reads = [first, b"".join(texts) + bad + texts[0]]
        chunks, error = run(reads)
        assert (chunks, error) == byte_by_byte(reads)
        assert [chunk.content for chunk in chunks] == ["", "a", "b"]
        assert (error or "").startswith(kind)


@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(st.one_of(LIVE_EVENT, PLAIN_LIVE, PLAIN_LIVE, ODD_READ), min_size=1, max_size=14),
    cuts=st.lists(st.integers(min_value=1, max_value=13), max_size=4),
)
def test_reads_of_whole_events_give_what_byte_by_byte_reads_give(
    events: list[bytes], cuts: list[int]
) -> None:
    """Reads cut between events (as a server flushes them)."""
    bounds = [0, *sorted({cut % len(events) for cut in cuts} - {0}), len(events)]
    reads = [b"".join(events[start:end]) for start, end in itertools.pairwise(bounds)]
    assert run(reads) == byte_by_byte(reads)

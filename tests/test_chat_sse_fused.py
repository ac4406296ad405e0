"""SSE bytes into the OpenAI Chat converter: the fused core (a live read decoded straight into the
converter's own types) gives exactly what the decoder and the converter chained give, read by read:
the same chunks, the same errors, the same end."""

from __future__ import annotations

import itertools
import json
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter.sse import FusedSSE, SSEPayloadDecoder
from operators.auto import _AutoChunks, auto_adapter
from pipeline.errors import StreamfoldError
from pipeline.models import ChunkResponse, ToolCallDelta
from pipeline.stage import Core, chain
from tests.test_openai_chat_fast_path import EVENT

Result = list[tuple[list[ChunkResponse], str | None]]


def ids(position: int) -> str:
    return f"gen_{position}"


def run(core: Core[Any, ChunkResponse], reads: list[bytes]) -> Result:
    """What each read gives, then what ``finish`` gives; up to the first error (its partial outputs and
    message), where the stream ends, as :func:`pipeline.stage.drive` ends it."""
    results: Result = []
    for read in [*reads, None]:
        try:
            results.append((core.finish() if read is None else core.feed(read), None))
        except StreamfoldError as error:
            results.append((error.partial_outputs, f"{type(error).__name__}: {error}"))
            break
    return results


def fused(reads: list[bytes]) -> Result:
    return run(auto_adapter(provider="openai", framing="sse", id_factory=ids), reads)


def chained(reads: list[bytes]) -> Result:
    with mock.patch("operators.auto._fused", chain):
        core = auto_adapter(provider="openai", framing="sse", id_factory=ids)
        results = run(core, reads)
    assert type(getattr(core, "_chain", None)) is not FusedSSE
    return results


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


@settings(max_examples=600, deadline=None)
@given(reads=st.lists(st.one_of(LIVE_EVENT, LIVE_EVENT, ODD_READ), max_size=12))
def test_the_fused_core_gives_what_the_chain_gives(reads: list[bytes]) -> None:
    assert fused(reads) == chained(reads)


def test_live_reads_skip_the_event_dicts() -> None:
    """Text and argument reads are converted by the converter's typed decoding: the decoder's own feed
    (which builds the event's dicts) sees only the first read."""
    announce = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    head = {"id": "c", "model": "m", "created": 1, "object": "chat.completion.chunk"}
    reads = [
        sse({**head, "choices": [{"index": 0, "delta": {"tool_calls": [announce]}}]}),
        sse({**head, "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}),
        sse(
            {
                **head,
                "choices": [
                    {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}
                ],
            },
            space=False,
        ),
    ]
    core = auto_adapter(provider="openai", framing="sse", id_factory=ids)
    outputs = core.feed(reads[0])
    with mock.patch.object(SSEPayloadDecoder, "feed", side_effect=AssertionError("decoded to dicts")):
        outputs += core.feed(reads[1]) + core.feed(reads[2])
    assert outputs == [
        ChunkResponse(
            tool_calls=[ToolCallDelta(0, "call_1", "f")], metadata={"id": "c", "model": "m", "created": 1}
        ),
        ChunkResponse(content="Hi"),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="{}")]),
    ]
    assert core.finish() == [ChunkResponse(is_complete=True)]


def test_a_chain_calls_the_chosen_core_directly_and_an_early_feed_still_works() -> None:
    """Once the auto adapter has chosen its decoder, :func:`chain` calls the fused core's feed itself,
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
    assert wrapper.call_count == 1  # the first read only: it chose the decoder


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
"""The live event of nearly every stream (the next text), which the fused core takes without the chain."""


@settings(max_examples=400, deadline=None)
@given(
    events=st.lists(st.one_of(LIVE_EVENT, PLAIN_LIVE, PLAIN_LIVE, ODD_READ), max_size=14),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=4),
)
def test_reads_of_several_events_give_what_the_chain_gives(events: list[bytes], cuts: list[int]) -> None:
    body = b"".join(events)
    bounds = [0, *sorted({cut % (len(body) + 1) for cut in cuts}), len(body)]
    reads = [body[start:end] for start, end in itertools.pairwise(bounds) if end > start]
    assert fused(reads) == chained(reads)


def test_a_read_of_several_live_events_skips_the_event_dicts() -> None:
    head = {"id": "c", "model": "m"}
    first = sse({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    texts = [sse({**head, "choices": [{"index": 0, "delta": {"content": text}}]}) for text in "abc"]
    core = auto_adapter(provider="openai", framing="sse", id_factory=ids)
    outputs = core.feed(first)
    with mock.patch.object(SSEPayloadDecoder, "feed", side_effect=AssertionError("decoded to dicts")):
        outputs += core.feed(b"".join(texts))
    assert outputs == [
        ChunkResponse(metadata={"id": "c", "model": "m"}),
        ChunkResponse(content="a"),
        ChunkResponse(content="b"),
        ChunkResponse(content="c"),
    ]


def test_live_events_after_a_comment_skip_the_event_dicts_with_or_without_the_space() -> None:
    """A read that starts with something else (a keep-alive comment) gives that to the chain as read, and
    takes the live events after it live; so does a stream that writes ``data:`` without the space."""
    head = {"id": "c", "model": "m"}
    first = sse({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    texts = [
        sse({**head, "choices": [{"index": 0, "delta": {"content": text}}]}, space=False) for text in "abc"
    ]
    core = auto_adapter(provider="openai", framing="sse", id_factory=ids)
    outputs = core.feed(first)
    with mock.patch.object(
        SSEPayloadDecoder, "feed", autospec=True, side_effect=SSEPayloadDecoder.feed
    ) as decoder_feed:
        outputs += core.feed(b": keep-alive\n\n" + b"".join(texts))
    assert [call.args[1] for call in decoder_feed.call_args_list] == [b": keep-alive\n\n"]
    assert [chunk.content for chunk in outputs] == ["", "a", "b", "c"]
    assert core.finish() == [ChunkResponse(is_complete=True)]


def test_an_error_after_live_events_in_one_read_keeps_them() -> None:
    head = {"id": "c", "model": "m"}
    first = sse({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    texts = [sse({**head, "choices": [{"index": 0, "delta": {"content": text}}]}) for text in "ab"]
    for bad in (b"data: not json at all\n\n", b": ping\n\ndata: not json\n\n", b"data: []\n\n"):
        reads = [first, b"".join(texts) + bad + texts[0]]
        got = fused(reads)
        assert got == chained(reads)
        assert [chunk.content for chunk in got[1][0]] == ["a", "b"]
        assert (got[1][1] or "").startswith("StreamDecodeError: ")


@settings(max_examples=400, deadline=None)
@given(
    events=st.lists(st.one_of(LIVE_EVENT, PLAIN_LIVE, PLAIN_LIVE, ODD_READ), min_size=1, max_size=14),
    cuts=st.lists(st.integers(min_value=1, max_value=13), max_size=4),
)
def test_reads_of_whole_events_give_what_the_chain_gives(events: list[bytes], cuts: list[int]) -> None:
    """Reads cut between events (as a server flushes them), so that most reads after the first one are
    read event by event in one go (:meth:`FusedSSE._events`)."""
    bounds = [0, *sorted({cut % len(events) for cut in cuts} - {0}), len(events)]
    reads = [b"".join(events[start:end]) for start, end in itertools.pairwise(bounds)]
    assert fused(reads) == chained(reads)

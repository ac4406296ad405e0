"""The proxy's streaming path hands on what one upstream read brought in one piece (pipeline.proxy._reads),
at the core and through the app's routes (an in-memory upstream whose reads the test controls)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any

import anyio
import httpx
import pytest

from pipeline.proxy._reads import forward_reads
from pipeline.proxy.app import create_app
from tests.proxy_upstream import chat_sse, post_scope, sse_events

TOOLS: list[Any] = [{"type": "function", "function": {"name": "log", "parameters": {"type": "object"}}}]
KIMI_CALL = [
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.log:0<|tool_call_argument_begin|>",
    '{"a": ',
    "1}",
    "<|tool_call_end|><|tool_calls_section_end|>",
]


class Reads:
    """An upstream body in reads: the pieces of one read come without waiting; before each later read
    it waits until the test lets it (``next_read``)."""

    def __init__(self, reads: list[list[bytes]], error: Exception | None = None) -> None:
        self.reads = reads
        self.error = error
        self.gates = [anyio.Event() for _ in reads]
        self.gates[0].set()
        self.pieces_read = 0

    def next_read(self) -> None:
        for gate in self.gates:
            if not gate.is_set():
                gate.set()
                return

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for gate, pieces in zip(self.gates, self.reads, strict=True):
            await gate.wait()
            for piece in pieces:
                self.pieces_read += 1
                yield piece
        if self.error is not None:
            raise self.error


def handler(reads: Reads, calls: list[bytes], *, stop_after: int = 0) -> Callable[[bytes], Any]:
    async def handle(data: bytes) -> bool:
        calls.append(data)
        if stop_after and len(calls) >= stop_after:
            return False
        reads.next_read()
        return True

    return handle


@pytest.mark.anyio
async def test_forward_reads_hands_on_each_read_whole() -> None:
    reads = Reads([[b"a", b"b", b"c"], [b"d"], [b"e", b"", b"f"]])
    calls: list[bytes] = []
    await forward_reads(reads, handler(reads, calls))
    assert calls == [b"abc", b"d", b"ef"]


@pytest.mark.anyio
async def test_forward_reads_hands_on_what_came_before_an_error_then_raises_it() -> None:
    reads = Reads([[b"a", b"b"], [b"c"]], error=httpx.ReadError("cut"))
    calls: list[bytes] = []
    with pytest.raises(httpx.ReadError, match="cut"):
        await forward_reads(reads, handler(reads, calls))
    assert calls == [b"ab", b"c"]


@pytest.mark.anyio
async def test_forward_reads_stops_reading_when_the_handler_says_so() -> None:
    reads = Reads([[b"a"], [b"b"], [b"c"]])
    calls: list[bytes] = []
    await forward_reads(reads, handler(reads, calls, stop_after=2))
    assert calls == [b"a", b"b"]
    assert reads.pieces_read == 2


@pytest.mark.anyio
async def test_forward_reads_reads_ahead_at_most_max_pending() -> None:
    reads = Reads([[b"12", b"34", b"56", b"7"]])
    calls: list[bytes] = []
    await forward_reads(reads, handler(reads, calls), max_pending=4)
    assert calls == [b"1234", b"567"]


@pytest.mark.anyio
async def test_forward_reads_raises_the_handlers_error_and_stops_reading() -> None:
    reads = Reads([[b"a"], [b"b"]])

    async def failing(data: bytes) -> bool:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        await forward_reads(reads, failing)
    assert reads.pieces_read == 1


# --- through the app ----------------------------------------------------------------------------------------


class _Body(httpx.AsyncByteStream):
    def __init__(self, reads: Reads) -> None:
        self._reads = reads

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._reads:
            yield piece


async def through_app(path: str, request: dict[str, Any], reads: Reads) -> list[dict[str, Any]]:
    """The ASGI messages the proxy sends for ``request``; each of its body messages lets the next read in."""

    def upstream(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Body(reads))

    client = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
    app = create_app("http://upstream.test", client=client, tool_format="kimi_k2")
    body = json.dumps(request).encode()
    scope = post_scope(
        path, [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    )
    sent: list[dict[str, Any]] = []
    requested = False
    never = anyio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))
        if message["type"] == "http.response.body" and message.get("more_body"):
            reads.next_read()

    await app(scope, receive, send)
    await client.aclose()
    return sent


def bodies(sent: list[dict[str, Any]]) -> list[bytes]:
    return [message["body"] for message in sent if message["type"] == "http.response.body"]


@pytest.mark.anyio
async def test_chat_stream_sends_each_upstream_read_in_one_message() -> None:
    events = sse_events(chat_sse(["one ", "two ", *KIMI_CALL]))
    reads = Reads([events[:3], events[3:]])  # role + two texts; then the call, finish, usage, [DONE]
    sent = await through_app(
        "/v1/chat/completions", {"model": "m", "messages": [], "tools": TOOLS, "stream": True}, reads
    )
    messages = bodies(sent)
    # the third: finish and [DONE] (the usage chunk the client did not ask for is not sent)
    assert [message.count(b"data: ") for message in messages] == [2, 3, 2], "one message per read"
    assert b'"content":"one "' in messages[0]
    assert b'"content":"two "' in messages[0]
    assert messages[1].count(b'"tool_calls"') == 3
    assert messages[2].endswith(b"data: [DONE]\n\n")


@pytest.mark.anyio
async def test_responses_stream_sends_each_upstream_read_in_one_message() -> None:
    events = sse_events(chat_sse(["one ", "two ", "three"]))
    reads = Reads([events[:4], events[4:]])
    request = {"model": "m", "input": "go", "stream": True}
    sent = await through_app("/v1/responses", request, reads)
    messages = bodies(sent)
    assert len(messages) == 2, "one message per read"
    assert messages[0].count(b"event: response.output_text.delta") == 3
    assert b"event: response.completed" in messages[1]


@pytest.mark.anyio
async def test_a_front_door_stream_ended_by_an_upstream_error_event_sends_that_end_once() -> None:
    events = sse_events(chat_sse(["one "], finish_reason=None, usage=None, done=False))
    error = b'data: {"error": {"message": "overloaded", "type": "server_error", "code": "busy"}}\n\n'
    reads = Reads([[*events, error]])
    sent = await through_app("/v1/responses", {"model": "m", "input": "go", "stream": True}, reads)
    everything = b"".join(bodies(sent))
    assert everything.count(b"event: response.failed") == 1
    assert everything.count(b"overloaded") == 1
    assert [message.get("more_body") for message in sent[1:]] == [False], "the read and its end, once"

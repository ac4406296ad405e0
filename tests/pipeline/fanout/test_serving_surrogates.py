"""A lone surrogate in a served answer, end to end: the log replaces it with U+FFFD when the item is
written (UTF-8 cannot hold it), so plain SSE, ``?protocol=vercel`` and ``?protocol=agui`` all read the
whole answer, on the in-memory log, Redis and NATS (real servers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from starlette.applications import Starlette

from pipeline.compose import process
from pipeline.fanout.serving._log import EventLog
from pipeline.fanout.serving.manager import ResponseManager, encode_item
from pipeline.fanout.serving.memory import MemoryEventLog
from pipeline.fanout.web import serving_routes
from pipeline.models import SegmentEvent
from tests.guards import GUARD
from tests.proxy_upstream import serving
from tests.servers import NatsServer, RedisServer, nats_server, redis_server

__all__ = ["nats_server", "redis_server"]

pytestmark = pytest.mark.anyio

DELTAS = ["caf\udce9", " au lait, ", "\ud83d", " then the rest"]
"""Lone surrogates, as a provider's broken ``\\u`` escape or a truncated emoji gives them."""
ANSWER = "caf\ufffd au lait, \ufffd then the rest"


def chunks() -> list[dict[str, Any]]:
    body = [{"index": 0, "delta": {"content": delta}, "finish_reason": None} for delta in DELTAS]
    return [
        {"id": "chatcmpl-1", "model": "m", "choices": [choice]}
        for choice in [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}, *body]
    ] + [{"id": "chatcmpl-1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]


@pytest.fixture(params=["memory", "redis", "nats"])
async def log(request: pytest.FixtureRequest) -> AsyncIterator[EventLog]:
    opened: EventLog
    if request.param == "memory":
        opened = MemoryEventLog()
    elif request.param == "redis":
        from pipeline.fanout.serving.redis import RedisEventLog

        server: RedisServer = request.getfixturevalue("redis_server")
        opened = RedisEventLog(server.url)
    else:
        from pipeline.fanout.serving.nats import NatsEventLog

        nats: NatsServer = request.getfixturevalue("nats_server")
        opened = await NatsEventLog.connect(nats.url)
    yield opened
    await opened.aclose()


def data_of(body: bytes) -> list[Any]:
    """The JSON of each SSE ``data:`` line, read strictly (msgspec rejects lone surrogate escapes)."""
    found = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            found.append(msgspec.json.decode(line.removeprefix(b"data: ")))
    return found


async def test_the_whole_answer_is_served_in_every_protocol(log: EventLog) -> None:
    async with ResponseManager(log) as manager, serving(Starlette(routes=serving_routes(manager))) as url:
        rid = await manager.start(process(chunks(), provider="openai"))
        await manager.wait(rid)
        async with httpx.AsyncClient(base_url=url) as client:
            with anyio.fail_after(GUARD):
                bodies = {
                    protocol: (
                        await client.get(f"/responses/{rid}/events", params={"protocol": protocol})
                    ).content
                    for protocol in ("streamfold", "vercel", "agui")
                }

    plain = data_of(bodies["streamfold"])
    assert "".join(d["payload"]["delta"] for d in plain if d.get("type") == "SEGMENT_CONTENT") == ANSWER
    assert plain[-1]["type"] == "END"
    vercel = data_of(bodies["vercel"])
    assert "".join(d["delta"] for d in vercel if d["type"] == "text-delta") == ANSWER
    assert vercel[-1] == {"type": "finish", "finishReason": "stop", "messageMetadata": {"model": "m"}}
    assert bodies["vercel"].endswith(b"data: [DONE]\n\n")
    agui = data_of(bodies["agui"])
    assert "".join(d["delta"] for d in agui if d["type"] == "TEXT_MESSAGE_CONTENT") == ANSWER
    assert agui[-1]["type"] == "RUN_FINISHED"


@pytest.mark.parametrize(
    ("text", "written"),
    [("\ud800", "\ufffd"), ("a\udfffb", "a\ufffdb"), ("\U0001f600\ud83d", "\U0001f600\ufffd"), ("ok", "ok")],
)
def test_encode_item_replaces_a_lone_surrogate(text: str, written: str) -> None:
    event = SegmentEvent.content("s", text)
    assert msgspec.json.decode(encode_item(event)) == {**event.to_dict(), "payload": {"delta": written}}
    assert msgspec.json.decode(encode_item({text: [text]})) == {written: [written]}

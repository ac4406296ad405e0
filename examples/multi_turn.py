"""Two turns of an agent conversation: stream, run the tools, send the model's turn back with the results.

A fake Anthropic Messages server on 127.0.0.1 answers with two recorded responses of one conversation
(from the Anthropic SDK's tool-runner tests): first a ``get_weather`` call, then the final answer. The agent
streams each response through ``process()``, folds it with a ``TurnBuilder``, runs the tools, and builds
the next request from ``turn.messages`` and ``turn.tool_results(...)``. The same loop works for the other
wire formats: change ``TurnBuilder("anthropic")`` and the request shape.

Run: ``python examples/multi_turn.py``
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.abc import SocketAttribute, SocketStream, TaskStatus
from anyio.streams.buffered import BufferedByteReceiveStream

from pipeline.agent import TurnBuilder
from pipeline.compose import process

RECORDINGS = Path(__file__).parent.parent / "tests" / "fixtures" / "anthropic"
TURNS = [
    RECORDINGS / "anthropic-sdk-python_claude-haiku-4-5_tool_use_only_streamed.sse",
    RECORDINGS / "anthropic-sdk-python_claude-haiku-4-5_text_after_tool_result.sse",
]

TOOLS_SCHEMA = [
    {
        "name": "get_weather",
        "description": "The current weather of a city.",
        "input_schema": {
            "type": "object",
            "properties": {"location": {"type": "string"}, "units": {"type": "string", "enum": ["c", "f"]}},
            "required": ["location", "units"],
        },
    }
]


def get_weather(location: str, units: str) -> str:
    return json.dumps({"location": location, "temperature": 68 if units == "f" else 20, "units": units})


TOOLS: dict[str, Callable[..., str]] = {"get_weather": get_weather}


class FakeProvider:
    """An HTTP/1.1 server on 127.0.0.1 that answers each POST with the next recorded SSE body.

    ``requests`` keeps the JSON body of every request it received.
    """

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = list(bodies)
        self.requests: list[Any] = []
        self.port = 0

    async def serve(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen on a free port (given to ``task_group.start``) until cancelled."""
        async with await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0) as listener:
            self.port = listener.extra(SocketAttribute.local_port)
            task_status.started(self.port)
            await listener.serve(self._answer)

    async def _answer(self, client: SocketStream) -> None:
        async with client:
            reader = BufferedByteReceiveStream(client)
            head = await reader.receive_until(b"\r\n\r\n", 65536)
            headers = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
            length = int({k.strip().lower(): v for k, v in headers.items()}[b"content-length"])
            self.requests.append(json.loads(await reader.receive_exactly(length)))
            body = self.bodies.pop(0)
            await client.send(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                + body
            )


async def converse(base_url: str, question: str, *, max_steps: int = 4) -> list[dict[str, Any]]:
    """Run the conversation until the model stops calling tools; return its messages."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    async with httpx.AsyncClient(base_url=base_url) as client:
        for _ in range(max_steps):
            request = {
                "model": "claude-haiku-4-5",
                "max_tokens": 1024,
                "stream": True,
                "tools": TOOLS_SCHEMA,
                "messages": messages,
            }
            builder = TurnBuilder("anthropic")
            async with client.stream("POST", "/v1/messages", json=request) as response:
                response.raise_for_status()
                async with process(response.aiter_bytes(), provider="anthropic").stream() as events:
                    async for event in events:
                        builder.feed(event)
            turn = builder.finish()
            messages.extend(turn.messages)
            if not turn.invocations:
                break
            outputs = [(call.id, TOOLS[call.name](**call.arguments)) for call in turn.invocations]
            messages.extend(turn.tool_results(outputs))
    return messages


async def main() -> tuple[FakeProvider, list[dict[str, Any]]]:
    server = FakeProvider([path.read_bytes() for path in TURNS])
    async with anyio.create_task_group() as task_group:
        port = await task_group.start(server.serve)
        messages = await converse(f"http://127.0.0.1:{port}", "What's the weather in San Francisco?")
        task_group.cancel_scope.cancel()
    return server, messages


if __name__ == "__main__":
    _, conversation = anyio.run(main)
    for message in conversation:
        print(json.dumps(message, ensure_ascii=False)[:200])

"""Build pipeline/cli/demo/coding_agent.sse: the stream `streamfold demo` replays by default.

It is an Anthropic Messages stream in the exact wire format of the recordings in tests/fixtures/anthropic
(thinking with a signature, text, a get_weather call and a write_file call whose content is a Python file),
cut into deltas of 1 to 9 characters the way the API cuts them. It is constructed, not recorded: no public
recording streams a file through a tool call. Run: python tools/make_demo_stream.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

THINKING = (
    "The user wants the weather in Paris and a small script that prints it. "
    "I should call get_weather first, then write the script with write_file."
)
TEXT = "I'll check the current weather in Paris, then write a script you can run again later."
WEATHER = {"location": "Paris, France", "unit": "celsius"}
SCRIPT = '''"""Print the weather for a city, every ten minutes."""

import time

import httpx

API = "https://api.example.com/weather"


def fetch(city: str) -> dict[str, object]:
    response = httpx.get(API, params={"q": city, "units": "metric"}, timeout=10)
    response.raise_for_status()
    return response.json()


def main() -> None:
    while True:
        report = fetch("Paris")
        print(f"{report['city']}: {report['temperature']}°C, {report['sky']}")
        time.sleep(600)


if __name__ == "__main__":
    main()
'''
FILE = {"path": "weather/watch.py", "content": SCRIPT}


def pieces(text: str, rng: random.Random) -> list[str]:
    out, position = [], 0
    while position < len(text):
        size = rng.randint(1, 9)
        out.append(text[position : position + size])
        position += size
    return out


def event(kind: str, data: dict[str, object]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def build() -> str:
    rng = random.Random(7)
    out = [
        event(
            "message_start",
            {
                "message": {
                    "id": "msg_01DemoStreamfold",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": 412, "output_tokens": 1},
                }
            },
        )
    ]
    out.append(
        event("content_block_start", {"index": 0, "content_block": {"type": "thinking", "thinking": ""}})
    )
    for piece in pieces(THINKING, rng):
        out.append(
            event("content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": piece}})
        )
    signature = {"type": "signature_delta", "signature": "EqQBCkYIBxgCKkDemoSignature"}
    out.append(event("content_block_delta", {"index": 0, "delta": signature}))
    out.append(event("content_block_stop", {"index": 0}))
    out.append(event("content_block_start", {"index": 1, "content_block": {"type": "text", "text": ""}}))
    for piece in pieces(TEXT, rng):
        out.append(event("content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": piece}}))
    out.append(event("content_block_stop", {"index": 1}))
    calls = [("toolu_01WeatherDemo", "get_weather", WEATHER), ("toolu_01WriteFileDemo", "write_file", FILE)]
    for index, (call_id, name, arguments) in enumerate(calls, start=2):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        out.append(event("content_block_start", {"index": index, "content_block": block}))
        for piece in ["", *pieces(json.dumps(arguments), rng)]:
            delta = {"type": "input_json_delta", "partial_json": piece}
            out.append(event("content_block_delta", {"index": index, "delta": delta}))
        out.append(event("content_block_stop", {"index": index}))
    usage = {"output_tokens": 389}
    out.append(
        event("message_delta", {"delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": usage})
    )
    out.append(event("message_stop", {}))
    return "".join(out)


if __name__ == "__main__":
    target = Path(__file__).parent.parent / "pipeline" / "cli" / "demo" / "coding_agent.sse"
    target.write_text(build())
    print(f"wrote {target} ({target.stat().st_size} bytes)")

"""The Gemini ``generateContent`` converter alone, per event, against the floor of decoding the same bytes.

Run: ``python -m benchmarks.bench_gemini_convert`` (``--events 2000``, ``--repeat 7``). To time an older
tree whose converter reads dicts, run this file with that tree first on the path (``cd ../before &&
PYTHONPATH=$PWD python ../gemini/benchmarks/bench_gemini_convert.py``): each event's bytes are then decoded
to a dict by ``msgspec.json.decode`` and the dict is fed.

Streams: ``--events`` chunks as Gemini sends them (one part, usage, model version and response id on every
chunk), of short text parts and of thought parts. Rows: the floor (``msgspec.json.decode`` of each event's
bytes), the converter fed each event, and the ratio. Costs are CPU time of this process per event, the best
of ``--repeat`` interleaved runs, with the garbage collector enabled as in real use.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import msgspec

from operators.convert.gemini import GeminiConverter

try:
    from pipeline.models import Payload
except ImportError:  # a tree from before Payload: its converter reads dicts
    Payload = None  # type: ignore[assignment,misc]


def chunk_bytes(count: int, *, thought: bool) -> list[bytes]:
    """``count`` streamed chunks of a few words each, as the Gemini API writes them."""
    events = []
    for number in range(count):
        part: dict[str, Any] = {"text": f"word{number % 97} and more "}
        if thought:
            part["thought"] = True
        event = {
            "candidates": [{"content": {"parts": [part], "role": "model"}, "index": 0}],
            "usageMetadata": {
                "promptTokenCount": 9,
                "candidatesTokenCount": 5 + number,
                "totalTokenCount": 14 + number,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 9}],
            },
            "modelVersion": "gemini-2.5-flash",
            "responseId": "bH6LaZW8Fp_3nsEPqtaSwQ4",
        }
        events.append(json.dumps(event, separators=(",", ":")).encode())
    return events


def floor(events: list[bytes]) -> None:
    decode = msgspec.json.decode
    for data in events:
        decode(data)


def converter(events: list[bytes]) -> None:
    feed = GeminiConverter().feed
    if Payload is None:
        decode = msgspec.json.decode
        for data in events:
            feed(decode(data))
        return
    offset = 0
    for data in events:
        feed(Payload(data, offset))
        offset += len(data) + 8


def best_times(runs: Sequence[tuple[str, Callable[[], None]]], repeat: int) -> dict[str, float]:
    """The best CPU time of each run, interleaved so that noise spreads over all of them."""
    best = dict.fromkeys((name for name, _ in runs), float("inf"))
    for _ in range(repeat):
        for name, run in runs:
            start = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"| stream ({args.events} events) | floor ns/event | converter ns/event | x floor |")
    print("|---|---|---|---|")
    for label, thought in (("text parts", False), ("thought parts", True)):
        events = chunk_bytes(args.events, thought=thought)
        runs = [("floor", partial(floor, events)), ("converter", partial(converter, events))]
        best = best_times(runs, args.repeat)
        floor_ns = best["floor"] / args.events * 1e9
        converter_ns = best["converter"] / args.events * 1e9
        print(f"| {label} | {floor_ns:.0f} | {converter_ns:.0f} | {converter_ns / floor_ns:.2f} |")


if __name__ == "__main__":
    main()

"""Live traffic of every provider: one event per read, short deltas, a couple of tool calls.

Run: ``python -m benchmarks.bench_live`` (``--deltas 2000``, ``--repeat 5``). The file uses only public API
(``process`` and its ``provider`` / ``framing`` options), so the same file measures an older tree too:
``cd OLD_TREE && PYTHONPATH=$PWD python /path/to/bench_live.py``.

This is what an agent sees from a model answering live: each network read carries one event of a few
characters of text (or reasoning). One stream per row, each on its own bytes:

- OpenAI Chat text; ``reasoning_content`` deltas (DeepSeek, Qwen, GLM, Kimi through vLLM / SGLang) and
  ``reasoning`` deltas (OpenRouter, Groq);
- Anthropic text; Anthropic thinking;
- OpenAI Responses text; OpenAI Responses reasoning summary;
- Gemini text (SSE, ``alt=sse``, CRLF endings); Gemini thoughts;
- Bedrock: Anthropic events in AWS event-stream frames.

Each row, measured in the same run on the same reads, in microseconds of CPU time per event (best of
``--repeat``, the rows interleaved): the floor (split each read into its payloads with the simplest code and
``msgspec``-decode each, in a bare loop: no library could read the stream for less), streamfold
``process()`` (bytes in, segment events, invocations and the response end out), and ``process()`` over the
floor. The issue's target is at most 2x the floor for every stream.

With ``--read-size 16384``, the same streams again in reads of that many bytes cut anywhere, as a buffered
HTTP read gives a body that arrives faster than it is read (the floor holds a line or frame cut by a read's
end for the next).

Then, on the OpenAI Chat text stream: the floor pulling each read from an async generator (the cost of the
async source), ``process(telemetry=...)`` where OpenTelemetry is installed, and the operators piped with
``|``.
"""

from __future__ import annotations

import argparse
import base64
import functools
import gc
import json
import struct
import time
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

import anyio
import msgspec

SENTENCE = "The quick brown fox jumps over the lazy dog while the agent streams its answer live"
WORDS = SENTENCE.split()
CALLS = [("get_weather", '{"city": "Paris", "unit": "celsius"}'), ("get_time", '{"zone": "Europe/Paris"}')]
"""The tool calls at the end of each stream (name, arguments)."""
TEXT_AFTER_REASONING = 20
"""Text deltas after the reasoning of a reasoning stream."""


def word(number: int) -> str:
    return " " + WORDS[number % len(WORDS)]


def pieces(arguments: str, size: int = 8) -> list[str]:
    return [arguments[start : start + size] for start in range(0, len(arguments), size)]


def compact(payload: object) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


# --- OpenAI Chat Completions ------------------------------------------------------------------------------


def chat_event(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-live",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    return b"data: " + compact(payload) + b"\n\n"


def openai_chat(deltas: int, field: str = "content") -> list[bytes]:
    """Deltas of ``field`` (``content``, or ``reasoning_content`` / ``reasoning`` then a little text), two
    small tool calls, ``[DONE]``."""
    events = [chat_event({"role": "assistant", "content": ""})]
    events += [chat_event({field: word(n)}) for n in range(deltas)]
    if field != "content":
        events += [chat_event({"content": word(n)}) for n in range(TEXT_AFTER_REASONING)]
    for index, (name, arguments) in enumerate(CALLS):
        first = {"index": index, "id": f"call_{index}", "type": "function"}
        events.append(chat_event({"tool_calls": [{**first, "function": {"name": name, "arguments": ""}}]}))
        for piece in pieces(arguments):
            events.append(chat_event({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    events.append(chat_event({}, "tool_calls"))
    events.append(b"data: [DONE]\n\n")
    return events


# --- Anthropic Messages -----------------------------------------------------------------------------------


def anthropic_payloads(deltas: int, thinking: bool) -> list[dict[str, Any]]:
    """The Messages stream events: text (or thinking, then a little text), two tool_use blocks."""
    message: dict[str, Any] = {
        "id": "msg_live",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 25, "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": message}, {"type": "ping"}]
    index = 0

    def block(start: dict[str, Any], block_deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events.extend(
            {"type": "content_block_delta", "index": index, "delta": delta} for delta in block_deltas
        )
        events.append({"type": "content_block_stop", "index": index})
        index += 1

    if thinking:
        thoughts = [{"type": "thinking_delta", "thinking": word(n)} for n in range(deltas)]
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [*thoughts, {"type": "signature_delta", "signature": "EqQBCkYIBxgCKkBsignature"}],
        )
    count = TEXT_AFTER_REASONING if thinking else deltas
    block({"type": "text", "text": ""}, [{"type": "text_delta", "text": word(n)} for n in range(count)])
    for number, (name, arguments) in enumerate(CALLS):
        block(
            {"type": "tool_use", "id": f"toolu_{number}", "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": piece} for piece in pieces(arguments)],
        )
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": deltas},
        }
    )
    events.append({"type": "message_stop"})
    return events


def anthropic(deltas: int, thinking: bool = False) -> list[bytes]:
    return [
        b"event: " + event["type"].encode() + b"\ndata: " + compact(event) + b"\n\n"
        for event in anthropic_payloads(deltas, thinking)
    ]


def bedrock_frame(payload: bytes) -> bytes:
    """One AWS event-stream ``chunk`` event frame around Bedrock's ``{"bytes": base64}`` wrapper."""
    body = compact({"bytes": base64.b64encode(payload).decode(), "p": "abcdefghijklmnopqrstuvwxyzABCDEF"})
    headers = b"".join(
        bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value)) + value.encode()
        for name, value in (
            (":event-type", "chunk"),
            (":content-type", "application/json"),
            (":message-type", "event"),
        )
    )
    prelude = struct.pack(">II", 12 + len(headers) + len(body) + 4, len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


def bedrock(deltas: int) -> list[bytes]:
    return [bedrock_frame(compact(event)) for event in anthropic_payloads(deltas, thinking=False)]


# --- OpenAI Responses -------------------------------------------------------------------------------------


def responses(deltas: int, reasoning: bool = False) -> list[bytes]:
    """Text deltas (or reasoning summary deltas, then a little text), two function calls."""
    events: list[dict[str, Any]] = []
    response: dict[str, Any] = {
        "id": "resp_live",
        "object": "response",
        "created_at": 1700000000,
        "model": "gpt-5",
    }
    events.append(
        {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}}
    )
    output = 0
    if reasoning:
        item: dict[str, Any] = {"id": "rs_live", "type": "reasoning", "summary": []}
        where = {"item_id": "rs_live", "output_index": output, "summary_index": 0}
        part: dict[str, Any] = {"type": "summary_text", "text": ""}
        events.append({"type": "response.output_item.added", "item": item, "output_index": output})
        events.append({"type": "response.reasoning_summary_part.added", **where, "part": part})
        events += [
            {"type": "response.reasoning_summary_text.delta", **where, "delta": word(n)}
            for n in range(deltas)
        ]
        events.append({"type": "response.reasoning_summary_part.done", **where, "part": part})
        events.append({"type": "response.output_item.done", "item": item, "output_index": output})
        output += 1
    item = {"id": "msg_live", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    where = {"item_id": "msg_live", "output_index": output, "content_index": 0}
    part = {"type": "output_text", "text": "", "annotations": []}
    events.append({"type": "response.output_item.added", "item": item, "output_index": output})
    events.append({"type": "response.content_part.added", **where, "part": part})
    count = TEXT_AFTER_REASONING if reasoning else deltas
    events += [
        {"type": "response.output_text.delta", **where, "delta": word(n), "logprobs": []}
        for n in range(count)
    ]
    events.append({"type": "response.content_part.done", **where, "part": part})
    events.append(
        {"type": "response.output_item.done", "item": {**item, "status": "completed"}, "output_index": output}
    )
    for number, (name, arguments) in enumerate(CALLS):
        output += 1
        call = {"id": f"fc_{number}", "type": "function_call", "call_id": f"call_{number}", "name": name}
        events.append(
            {
                "type": "response.output_item.added",
                "item": {**call, "status": "in_progress", "arguments": ""},
                "output_index": output,
            }
        )
        events += [
            {
                "type": "response.function_call_arguments.delta",
                "item_id": f"fc_{number}",
                "output_index": output,
                "delta": piece,
            }
            for piece in pieces(arguments)
        ]
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "item_id": f"fc_{number}",
                "output_index": output,
                "arguments": arguments,
            }
        )
        events.append(
            {
                "type": "response.output_item.done",
                "item": {**call, "status": "completed", "arguments": arguments},
                "output_index": output,
            }
        )
    usage = {"input_tokens": 25, "output_tokens": deltas, "total_tokens": deltas + 25}
    events.append(
        {"type": "response.completed", "response": {**response, "status": "completed", "usage": usage}}
    )
    reads = []
    for number, event in enumerate(events):
        event["sequence_number"] = number
        reads.append(b"event: " + event["type"].encode() + b"\ndata: " + compact(event) + b"\n\n")
    return reads


# --- Gemini -----------------------------------------------------------------------------------------------


def gemini_event(parts: list[dict[str, Any]], number: int, finish_reason: str | None = None) -> bytes:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish_reason is not None:
        candidate["finishReason"] = finish_reason
    payload = {
        "candidates": [candidate],
        "usageMetadata": {
            "promptTokenCount": 25,
            "candidatesTokenCount": number,
            "totalTokenCount": number + 25,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "live",
    }
    return b"data: " + compact(payload) + b"\r\n\r\n"


def gemini(deltas: int, thoughts: bool = False) -> list[bytes]:
    """Text parts (or thought parts, then a little text) one a read, then two function calls at once."""
    events = []
    if thoughts:
        events += [gemini_event([{"text": word(n), "thought": True}], n) for n in range(deltas)]
    count = TEXT_AFTER_REASONING if thoughts else deltas
    events += [gemini_event([{"text": word(n)}], n) for n in range(count)]
    calls = [{"functionCall": {"name": name, "args": json.loads(arguments)}} for name, arguments in CALLS]
    events.append(gemini_event(calls, deltas, "STOP"))
    return events


# --- the floor and process() ------------------------------------------------------------------------------


class Stream(NamedTuple):
    name: str
    reads: list[bytes]
    provider: str
    framing: str
    events: int = 0
    """Events of the stream when its reads are not one event each (`buffered`)."""


def streams(deltas: int) -> list[Stream]:
    return [
        Stream("OpenAI Chat text", openai_chat(deltas), "openai", "sse"),
        Stream("OpenAI Chat reasoning_content", openai_chat(deltas, "reasoning_content"), "openai", "sse"),
        Stream("OpenAI Chat reasoning", openai_chat(deltas, "reasoning"), "openai", "sse"),
        Stream("Anthropic text", anthropic(deltas), "anthropic", "sse"),
        Stream("Anthropic thinking", anthropic(deltas, thinking=True), "anthropic", "sse"),
        Stream("OpenAI Responses text", responses(deltas), "openai-responses", "sse"),
        Stream("OpenAI Responses reasoning", responses(deltas, reasoning=True), "openai-responses", "sse"),
        Stream("Gemini text (alt=sse)", gemini(deltas), "gemini", "sse"),
        Stream("Gemini thoughts (alt=sse)", gemini(deltas, thoughts=True), "gemini", "sse"),
        Stream("Bedrock Anthropic (event-stream)", bedrock(deltas), "anthropic", "eventstream"),
    ]


def floor_sse(reads: list[bytes]) -> float:
    """Each read's ``data:`` lines, each decoded (a CR left at a line's end is JSON whitespace); a line cut
    by the end of a read waits for the next."""
    decode = msgspec.json.decode
    start = time.process_time()
    held = b""
    for read in reads:
        lines = (held + read if held else read).split(b"\n")
        held = lines.pop()
        for line in lines:
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                decode(line[6:])
    return time.process_time() - start


def floor_eventstream(reads: list[bytes]) -> float:
    """Each frame of the reads: its payload sliced out, the wrapper decoded, the event in it decoded; a frame
    cut by the end of a read waits for the next."""
    decode, unwrap = msgspec.json.decode, base64.b64decode
    start = time.process_time()
    held = b""
    for read in reads:
        data = held + read if held else read
        at = 0
        while len(data) - at >= 12 and len(data) - at >= (size := int.from_bytes(data[at : at + 4], "big")):
            headers = int.from_bytes(data[at + 4 : at + 8], "big")
            decode(unwrap(decode(data[at + 12 + headers : at + size - 4])["bytes"]))
            at += size
        held = data[at:]
    return time.process_time() - start


def buffered(stream: Stream, read_size: int) -> Stream:
    """``stream``'s body in reads of ``read_size`` bytes, cut anywhere, as a buffered HTTP read gives it."""
    body = b"".join(stream.reads)
    reads = [body[start : start + read_size] for start in range(0, len(body), read_size)]
    return stream._replace(reads=reads, events=len(stream.reads))


def floor(stream: Stream) -> float:
    return (floor_eventstream if stream.framing == "eventstream" else floor_sse)(stream.reads)


async def _source(reads: list[bytes]) -> AsyncIterator[bytes]:
    for read in reads:
        yield read


def streamfold_process(stream: Stream, telemetry: Any = None) -> float:
    from pipeline import process

    options: dict[str, Any] = {"provider": stream.provider, "framing": stream.framing}
    if telemetry is not None:
        options["telemetry"] = telemetry

    async def run() -> float:
        count = 0
        start = time.process_time()
        async with process(_source(stream.reads), **options).stream() as items:
            async for _ in items:
                count += 1
        elapsed = time.process_time() - start
        assert count > (stream.events or len(stream.reads)) // 2, (stream.name, count)
        return elapsed

    return anyio.run(run)


def measure(rows: list[tuple[str, Callable[[], float]]], repeat: int) -> dict[str, float]:
    """Seconds of CPU time of each row, best of ``repeat``, the rows interleaved in each round."""
    for _, function in rows:
        function()  # warm-up: imports and first-call costs are not the steady state
    times: dict[str, list[float]] = {name: [] for name, _ in rows}
    for _ in range(repeat):
        for name, function in rows:
            gc.collect()
            times[name].append(function())
    return {name: min(values) for name, values in times.items()}


def provider_table(deltas: int, repeat: int, read_size: int | None = None) -> None:
    chosen = streams(deltas)
    rows: list[tuple[str, Callable[[], float]]] = []
    if read_size is not None:
        chosen = [buffered(stream, read_size) for stream in chosen]
    for stream in chosen:
        rows.append((f"floor {stream.name}", functools.partial(floor, stream)))
        rows.append((f"process {stream.name}", functools.partial(streamfold_process, stream)))
    best = measure(rows, repeat)
    shape = "one event per read" if read_size is None else f"reads of {read_size:,} bytes"
    print(f"{shape}, {deltas:,} deltas; microseconds of CPU time per event, best of {repeat}")
    print(f"{'stream':<34} {'events':>6} {'floor':>7} {'process':>8} {'x floor':>8}")
    for stream in chosen:
        events = stream.events or len(stream.reads)
        base = best[f"floor {stream.name}"] / events * 1e6
        ours = best[f"process {stream.name}"] / events * 1e6
        print(f"{stream.name:<34} {events:>6} {base:>7.2f} {ours:>8.2f} {ours / base:>8.2f}")


# --- more rows on the OpenAI Chat text stream --------------------------------------------------------------


def floor_async(stream: Stream) -> float:
    async def run() -> float:
        decode = msgspec.json.decode
        start = time.process_time()
        async for read in _source(stream.reads):
            for line in read.split(b"\n"):
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    decode(line[6:])
        return time.process_time() - start

    return anyio.run(run)


def streamfold_piped(stream: Stream) -> float:
    from aiostream import stream as streams_

    from operators import convert_openai_chat, emit_segments, fold_invocations, split_arguments, sse_events

    async def run() -> float:
        count = 0
        start = time.process_time()
        pipeline = (
            streams_.iterate(_source(stream.reads))
            | sse_events.pipe()
            | convert_openai_chat.pipe()
            | split_arguments.pipe()
            | emit_segments.pipe()
            | fold_invocations.pipe()
        )
        async with pipeline.stream() as items:
            async for _ in items:
                count += 1
        elapsed = time.process_time() - start
        assert count > len(stream.reads) // 2, count
        return elapsed

    return anyio.run(run)


def telemetry_rows(stream: Stream) -> list[tuple[str, Callable[[], float]]]:
    """``process(telemetry=...)`` with the OpenTelemetry API alone (no-op spans and instruments) and with
    the SDK recording into memory, where installed (the ``telemetry`` extra; the SDK is a test dependency)."""
    try:
        from pipeline.telemetry import Telemetry
    except ImportError:
        return []
    rows: list[tuple[str, Callable[[], float]]] = [
        ("process(telemetry=), OTel API no-op", functools.partial(streamfold_process, stream, Telemetry()))
    ]
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return rows
    sdk = Telemetry(
        tracer_provider=TracerProvider(),
        meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]),
    )
    rows.append(("process(telemetry=), OTel SDK memory", functools.partial(streamfold_process, stream, sdk)))
    return rows


def chat_table(deltas: int, repeat: int) -> None:
    stream = streams(deltas)[0]
    rows: list[tuple[str, Callable[[], float]]] = [
        ("floor: split + msgspec decode", functools.partial(floor, stream)),
        ("floor, async source", functools.partial(floor_async, stream)),
        ("process()", functools.partial(streamfold_process, stream)),
        *telemetry_rows(stream),
        ("operators piped", functools.partial(streamfold_piped, stream)),
    ]
    best = measure(rows, repeat)
    events = len(stream.reads)
    print(f"\n{stream.name}, {events:,} events")
    print(f"{'implementation':<38} {'us/event':>9} {'x floor':>8}")
    base = best[rows[0][0]] / events * 1e6
    for name, _ in rows:
        per_event = best[name] / events * 1e6
        print(f"{name:<38} {per_event:>9.2f} {per_event / base:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--providers-only", action="store_true", help="leave out the OpenAI Chat detail rows")
    parser.add_argument(
        "--read-size",
        type=int,
        help="also time each stream in reads of this many bytes, cut anywhere (a buffered HTTP body)",
    )
    args = parser.parse_args()
    provider_table(args.deltas, args.repeat)
    if args.read_size:
        print()
        provider_table(args.deltas, args.repeat, args.read_size)
    if not args.providers_only:
        chat_table(args.deltas, args.repeat)


if __name__ == "__main__":
    main()

"""Stage 1, the provider adapter: from a source (SDK streams, dicts, SSE or JSON Lines bytes, AWS
event-stream frames) to provider event dicts.

Modules: `sse` (SSE / JSON Lines decoding), `sources` (files,
bytes, httpx responses, SDK streams), `eventstream` (Bedrock's binary framing),
`detect` (which framing and wire format a stream is).

The framers read bytes; a bytearray or a memoryview is taken too, and any other read (a ``str``, say)
raises a ``TypeError`` that names the framer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "operators.adapter.detect": (
            "detect_framing",
            "detect_wire_format",
            "sniff_framing",
        ),
        "operators.adapter.eventstream": (
            "DEFAULT_MAX_FRAME_SIZE",
            "EventStreamDecoder",
            "EventStreamFramer",
            "decode_eventstream",
        ),
        "operators.adapter.json_array": (
            "JSONArrayFramer",
            "JSONSequenceDecoder",
            "decode_json_sequence",
        ),
        "operators.adapter.jsonl": (
            "JSONLinesDecoder",
            "JSONLinesFramer",
            "decode_jsonl",
        ),
        "operators.adapter.payloads": ("PayloadParser",),
        "operators.adapter.sources": (
            "from_bytes",
            "from_dicts",
            "from_file",
            "from_httpx",
            "from_sdk",
            "is_sdk_stream",
            "provider_events",
            "sdk_error",
            "sdk_object_to_dict",
        ),
        "operators.adapter.sse": (
            "DEFAULT_MAX_EVENT_SIZE",
            "EventParser",
            "SSEDecoder",
            "SSEFramer",
            "SSEPayloadDecoder",
            "ServerSentEvent",
            "decode_sse",
            "parse_events",
            "sse_events",
        ),
    },
)

if TYPE_CHECKING:  # written from the table by `python -m tests.test_public_surface`
    from operators.adapter.detect import detect_framing as detect_framing
    from operators.adapter.detect import detect_wire_format as detect_wire_format
    from operators.adapter.detect import sniff_framing as sniff_framing
    from operators.adapter.eventstream import DEFAULT_MAX_FRAME_SIZE as DEFAULT_MAX_FRAME_SIZE
    from operators.adapter.eventstream import EventStreamDecoder as EventStreamDecoder
    from operators.adapter.eventstream import EventStreamFramer as EventStreamFramer
    from operators.adapter.eventstream import decode_eventstream as decode_eventstream
    from operators.adapter.json_array import JSONArrayFramer as JSONArrayFramer
    from operators.adapter.json_array import JSONSequenceDecoder as JSONSequenceDecoder
    from operators.adapter.json_array import decode_json_sequence as decode_json_sequence
    from operators.adapter.jsonl import JSONLinesDecoder as JSONLinesDecoder
    from operators.adapter.jsonl import JSONLinesFramer as JSONLinesFramer
    from operators.adapter.jsonl import decode_jsonl as decode_jsonl
    from operators.adapter.payloads import PayloadParser as PayloadParser
    from operators.adapter.sources import from_bytes as from_bytes
    from operators.adapter.sources import from_dicts as from_dicts
    from operators.adapter.sources import from_file as from_file
    from operators.adapter.sources import from_httpx as from_httpx
    from operators.adapter.sources import from_sdk as from_sdk
    from operators.adapter.sources import is_sdk_stream as is_sdk_stream
    from operators.adapter.sources import provider_events as provider_events
    from operators.adapter.sources import sdk_error as sdk_error
    from operators.adapter.sources import sdk_object_to_dict as sdk_object_to_dict
    from operators.adapter.sse import DEFAULT_MAX_EVENT_SIZE as DEFAULT_MAX_EVENT_SIZE
    from operators.adapter.sse import EventParser as EventParser
    from operators.adapter.sse import ServerSentEvent as ServerSentEvent
    from operators.adapter.sse import SSEDecoder as SSEDecoder
    from operators.adapter.sse import SSEFramer as SSEFramer
    from operators.adapter.sse import SSEPayloadDecoder as SSEPayloadDecoder
    from operators.adapter.sse import decode_sse as decode_sse
    from operators.adapter.sse import parse_events as parse_events
    from operators.adapter.sse import sse_events as sse_events

from __future__ import annotations

from collections.abc import Callable

from pipeline import (
    ChunkResponse,
    ResponseEnd,
    SegmentEvent,
    SegmentType,
    TokenUsage,
    ToolCallDelta,
    ToolCallError,
    ToolInvocation,
)


def test_segment_event_wire_format() -> None:
    start = SegmentEvent.start(
        "call_1", SegmentType.TOOL_CALL, {"tool_name": "get_weather", "call_id": "call_1"}
    )
    assert start.to_dict() == {
        "type": "SEGMENT_START",
        "segment_id": "call_1",
        "segment_type": "tool_call",
        "payload": {"metadata": {"tool_name": "get_weather", "call_id": "call_1"}},
    }
    assert SegmentEvent.content("s", "hi").to_dict() == {
        "type": "SEGMENT_CONTENT",
        "segment_id": "s",
        "payload": {"delta": "hi"},
    }
    assert SegmentEvent.argument_delta("s", ("files", 0, "body"), "x").to_dict()["payload"] == {
        "path": ["files", 0, "body"],
        "delta": "x",
    }
    assert SegmentEvent.argument_value("s", ("n",), 3).to_dict()["payload"] == {"path": ["n"], "value": 3}
    assert SegmentEvent.end("s").to_dict() == {"type": "SEGMENT_END", "segment_id": "s", "payload": {}}


def test_invocation_wire_format() -> None:
    ok = ToolInvocation("call_1", "get_weather", {"city": "Paris"})
    assert ok.ok
    assert ok.to_dict() == {
        "type": "TOOL_INVOCATION",
        "id": "call_1",
        "name": "get_weather",
        "arguments": {"city": "Paris"},
        "error": None,
    }
    bad = ToolInvocation("c", "f", {}, error=ToolCallError("truncated", "arguments cut off", raw='{"a": '))
    assert not bad.ok
    assert bad.to_dict()["error"] == {"kind": "truncated", "message": "arguments cut off", "raw": '{"a": '}


def test_chunk_defaults_match_the_seeds() -> None:
    chunk = ChunkResponse()
    assert (chunk.content, chunk.reasoning, chunk.is_complete, chunk.usage) == ("", None, False, None)
    assert (chunk.image_urls, chunk.audio_urls, chunk.video_urls, chunk.tool_calls) == ([], [], [], None)
    delta = ToolCallDelta(0, call_id="a", name="f", arguments_delta="{")
    assert delta == ToolCallDelta(index=0, call_id="a", name="f", arguments_delta="{")
    assert not delta.finished


def test_response_end_and_usage() -> None:
    end = ResponseEnd(
        finish_reason="stop", usage=TokenUsage(prompt_tokens=3, completion_tokens=4, total_tokens=7)
    )
    assert end.to_dict() == {
        "type": "RESPONSE_END",
        "finish_reason": "stop",
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        "metadata": {},
    }


def test_chunk_url_lists_default_to_one_shared_frozen_empty_list() -> None:
    """A chunk without URLs allocates no lists (live traffic builds one chunk per event); the default is
    still a list equal to ``[]``, encoded as ``[]``, kept by copies and pickles, and cannot change."""
    import copy
    import pickle

    import msgspec
    import pytest

    first, second = ChunkResponse(content="a"), ChunkResponse(content="b")
    assert first.image_urls is second.image_urls is first.audio_urls is first.video_urls
    assert isinstance(first.image_urls, list)
    assert first.image_urls == []
    assert first == ChunkResponse(content="a", image_urls=[], audio_urls=[], video_urls=[])
    assert repr(first) == repr(ChunkResponse(content="a", image_urls=[], audio_urls=[], video_urls=[]))
    assert msgspec.json.encode(first) == msgspec.json.encode(
        ChunkResponse(content="a", image_urls=[], audio_urls=[], video_urls=[])
    )
    assert pickle.loads(pickle.dumps(first)).image_urls is first.image_urls
    assert copy.deepcopy(first).image_urls is first.image_urls
    assert copy.copy(first.image_urls) is first.image_urls
    changes: list[Callable[[list[str]], object]] = [
        lambda urls: urls.append("u"),
        lambda urls: urls.extend(["u"]),
        lambda urls: urls.insert(0, "u"),
        lambda urls: urls.__setitem__(slice(0, 0), ["u"]),
        lambda urls: urls.__iadd__(["u"]),
    ]
    for change in changes:
        with pytest.raises(TypeError, match="shared and cannot change"):
            change(first.image_urls)
    assert second.image_urls == []
    assert ChunkResponse(image_urls=["u"]).image_urls == ["u"]

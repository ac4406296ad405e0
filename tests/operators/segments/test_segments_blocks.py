"""Provider blocks the emitter keeps apart: reasoning blocks, server results, citations, duplicate ids."""

from __future__ import annotations

from typing import Any

from operators.arguments.splitter import ArgumentSplitter
from operators.segments import SegmentEmitter
from pipeline import ChunkResponse, ToolCallDelta
from pipeline.models import SegmentEvent, SegmentEventType, ToolResult
from tests.operators.segments.test_segments import argument, content, end, run, start

END: dict[str, Any] = {"type": "RESPONSE_END", "finish_reason": None, "usage": None, "metadata": {}}


def test_adjacent_signed_thinking_blocks_are_two_segments_each_with_its_signature() -> None:
    chunks = [
        ChunkResponse(reasoning="first"),
        ChunkResponse(reasoning_signature="sig-1", reasoning_done=True),
        ChunkResponse(reasoning="second"),
        ChunkResponse(reasoning_signature="sig-2", reasoning_done=True),
        ChunkResponse(content="answer"),
    ]
    assert run(chunks) == [
        start("reasoning0", "reasoning"),
        content("reasoning0", "first"),
        end("reasoning0", {"signature": "sig-1"}),
        start("reasoning1", "reasoning"),
        content("reasoning1", "second"),
        end("reasoning1", {"signature": "sig-2"}),
        start("text2", "text"),
        content("text2", "answer"),
        end("text2"),
        END,
    ]


def test_a_second_signature_or_encrypted_block_starts_a_new_segment_without_a_done_marker() -> None:
    chunks = [
        ChunkResponse(encrypted_reasoning="redacted-1"),
        ChunkResponse(encrypted_reasoning="redacted-2"),
        ChunkResponse(reasoning="x", reasoning_signature="sig-a"),
        ChunkResponse(reasoning_signature="sig-b"),
    ]
    assert run(chunks) == [
        start("reasoning0", "reasoning"),
        end("reasoning0", {"encrypted_content": "redacted-1"}),
        start("reasoning1", "reasoning"),
        end("reasoning1", {"encrypted_content": "redacted-2"}),
        start("reasoning2", "reasoning"),
        content("reasoning2", "x"),
        end("reasoning2", {"signature": "sig-a"}),
        start("reasoning3", "reasoning"),
        end("reasoning3", {"signature": "sig-b"}),
        END,
    ]


def test_reasoning_ids_split_blocks_and_are_kept_in_start_and_end() -> None:
    chunks = [
        ChunkResponse(reasoning_id="rs_1"),
        ChunkResponse(reasoning="a", reasoning_id="rs_1"),
        ChunkResponse(encrypted_reasoning="enc-1", reasoning_id="rs_1"),
        ChunkResponse(reasoning_id="rs_2", reasoning="b"),
        ChunkResponse(reasoning="c"),
    ]
    assert run(chunks) == [
        start("reasoning0", "reasoning", {"reasoning_id": "rs_1"}),
        content("reasoning0", "a"),
        end("reasoning0", {"reasoning_id": "rs_1", "encrypted_content": "enc-1"}),
        start("reasoning1", "reasoning", {"reasoning_id": "rs_2"}),
        content("reasoning1", "b"),
        content("reasoning1", "c"),
        end("reasoning1", {"reasoning_id": "rs_2"}),
        END,
    ]


def test_citations_go_to_the_text_segment_end_with_their_offsets() -> None:
    cite = {"type": "web_search_result_location", "url": "https://example.com", "cited_text": "x"}
    chunks = [
        ChunkResponse(content="Intro. "),
        ChunkResponse(citations=[cite]),
        ChunkResponse(content="Cited."),
        ChunkResponse(content=" More", citations=[{"type": "url_citation", "url": "u"}]),
    ]
    assert run(chunks) == [
        start("text0", "text"),
        content("text0", "Intro. "),
        content("text0", "Cited."),
        content("text0", " More"),
        end(
            "text0",
            {
                "citations": [
                    {"offset": 7, "citation": cite},
                    {"offset": 13, "citation": {"type": "url_citation", "url": "u"}},
                ]
            },
        ),
        END,
    ]


def test_a_citation_before_any_text_opens_the_text_segment_at_offset_zero() -> None:
    chunks = [ChunkResponse(reasoning="r"), ChunkResponse(citations=[{"n": 1}]), ChunkResponse(content="t")]
    assert run(chunks)[3:6] == [
        start("text1", "text"),
        content("text1", "t"),
        end("text1", {"citations": [{"offset": 0, "citation": {"n": 1}}]}),
    ]


def test_a_server_tool_call_and_its_result() -> None:
    result = ToolResult(
        call_id="srvtoolu_1",
        name="web_search",
        content=[{"type": "web_search_result", "url": "https://example.com"}],
        result_type="web_search_tool_result",
    )
    chunks = [
        ChunkResponse(
            tool_calls=[ToolCallDelta(0, "srvtoolu_1", "web_search", '{"query": "q"}', True, "server")]
        ),
        ChunkResponse(tool_results=[result]),
        ChunkResponse(content="Found it."),
    ]
    call = {"tool_name": "web_search", "call_id": "srvtoolu_1", "provider_executed": True}
    meta = {
        "call_id": "srvtoolu_1",
        "provider_executed": True,
        "tool_name": "web_search",
        "result_type": "web_search_tool_result",
    }
    assert run(chunks) == [
        start("srvtoolu_1", "tool_call", call),
        content("srvtoolu_1", '{"query": "q"}'),
        argument("srvtoolu_1", ["query"], delta="q"),
        argument("srvtoolu_1", ["query"], value="q"),
        end("srvtoolu_1", {**call, "arguments": {"query": "q"}}),
        {
            "type": "TOOL_INVOCATION",
            "id": "srvtoolu_1",
            "name": "web_search",
            "arguments": {"query": "q"},
            "error": None,
            "provider_executed": True,
        },
        start("srvtoolu_1:result", "tool_result", meta),
        content("srvtoolu_1:result", '[{"type":"web_search_result","url":"https://example.com"}]'),
        end("srvtoolu_1:result", {**meta, "result": result.content}),
        start("text0", "text"),
        content("text0", "Found it."),
        end("text0"),
        END,
    ]


def test_a_failed_server_tool_result_says_so() -> None:
    chunks = [
        ChunkResponse(tool_results=[ToolResult(call_id="c", content={"error_code": "x"}, is_error=True)])
    ]
    meta: dict[str, Any] = {"call_id": "c", "provider_executed": True}
    assert run(chunks)[2] == end("c:result", {**meta, "result": {"error_code": "x"}, "is_error": True})


def test_two_calls_with_the_same_provider_id_give_two_invocations() -> None:
    chunks = [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "toolu_1", "a", '{"x": 1}', True)]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, "toolu_1", "b", '{"y": 2}', True)]),
    ]
    invocations = [item for item in run(chunks) if item["type"] == "TOOL_INVOCATION"]
    assert [(item["id"], item["name"], item["arguments"]) for item in invocations] == [
        ("toolu_1", "a", {"x": 1}),
        ("toolu_1_2", "b", {"y": 2}),
    ]
    starts = [item for item in run(chunks) if item["type"] == "SEGMENT_START"]
    assert starts[1]["payload"]["metadata"] == {
        "tool_name": "b",
        "call_id": "toolu_1_2",
        "provider_call_id": "toolu_1",
    }


def test_a_signature_on_text_goes_to_the_text_segment_not_to_an_empty_reasoning_segment() -> None:
    chunks = [ChunkResponse(content="Hi", content_signature="sig-t"), ChunkResponse(content=" there")]
    assert run(chunks) == [
        start("text0", "text"),
        content("text0", "Hi"),
        content("text0", " there"),
        end("text0", {"signature": "sig-t"}),
        END,
    ]


def test_two_signed_text_parts_are_two_text_segments_each_with_its_signature() -> None:
    chunks = [
        ChunkResponse(content="a", content_signature="s1"),
        ChunkResponse(content="b"),
        ChunkResponse(content="c", content_signature="s2"),
    ]
    assert run(chunks) == [
        start("text0", "text"),
        content("text0", "a"),
        content("text0", "b"),
        end("text0", {"signature": "s1"}),
        start("text1", "text"),
        content("text1", "c"),
        end("text1", {"signature": "s2"}),
        END,
    ]


class _CountingSet(set[str]):
    """A set that counts its membership tests: the probes of the emitter's unique-id search."""

    probes = 0

    def __contains__(self, item: object) -> bool:
        type(self).probes += 1
        return super().__contains__(item)


def _probes_for_repeats(repeats: int) -> tuple[int, list[str]]:
    splitter, emitter = ArgumentSplitter(), SegmentEmitter()
    _CountingSet.probes = 0
    emitter._used_ids = _CountingSet()  # count the probes of the unique-id search
    ids: list[str] = []
    for index in range(repeats):
        delta = ToolCallDelta(index, "call_1", "f", "{}", True)
        (chunk,) = splitter.feed(ChunkResponse(tool_calls=[delta]))
        for event in emitter.feed(chunk):
            if isinstance(event, SegmentEvent) and event.event_type is SegmentEventType.START:
                ids.append(event.segment_id)
    return _CountingSet.probes, ids


def test_a_call_id_repeated_n_times_is_made_unique_with_a_constant_number_of_probes_per_call() -> None:
    probes, ids = _probes_for_repeats(2000)
    assert ids == ["call_1"] + [f"call_1_{number}" for number in range(2, 2001)]
    assert probes == 2 * 2000 - 1  # one test of the id, one of its next suffix (none for the first)


def test_a_provider_id_that_looks_like_a_renamed_one_is_skipped_once() -> None:
    chunks = [
        ChunkResponse(tool_calls=[ToolCallDelta(i, call_id, "f", "{}", True)])
        for i, call_id in enumerate(["a", "a_2", "a", "a", "a_3"])
    ]
    starts = [item["segment_id"] for item in run(chunks) if item["type"] == "SEGMENT_START"]
    assert starts == ["a", "a_2", "a_3", "a_4", "a_3_2"]

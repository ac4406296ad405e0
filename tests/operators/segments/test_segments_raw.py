"""A call's raw arguments text, kept for error reports, is exact however many deltas it came in (the
emitter joins its pieces into blocks as they pile up)."""

from __future__ import annotations

import pytest

from operators.arguments.splitter import ArgumentSplitter
from operators.invocations import InvocationFolder
from operators.segments import SegmentEmitter
from pipeline.models import ChunkResponse, SegmentEvent, ToolCallDelta, ToolInvocation


def invocation(deltas: list[str]) -> ToolInvocation:
    """The invocation of one ``write_file`` call streamed in ``deltas`` of a stream that ends early."""
    splitter = ArgumentSplitter()
    emitter = SegmentEmitter()
    folder = InvocationFolder()
    chunks = [ChunkResponse(tool_calls=[ToolCallDelta(0, "call_1", "write_file")])]
    chunks += [ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta=delta)]) for delta in deltas]
    events: list[SegmentEvent | ToolInvocation | object] = []
    for chunk in chunks:
        for piece in splitter.feed(chunk):
            for event in emitter.feed(piece):
                events.extend(folder.feed(event))
    for event in emitter.finish():
        events.extend(folder.feed(event))
    (folded,) = [event for event in events if isinstance(event, ToolInvocation)]
    return folded


@pytest.mark.parametrize("count", [1023, 1024, 1025, 5000])
def test_a_truncated_call_reports_all_its_raw_text(count: int) -> None:
    text = '{"path": "a.py", "content": "' + "".join(f"line {n}\\n" for n in range(count))
    deltas = [text[start : start + 3] for start in range(0, len(text), 3)]
    folded = invocation(deltas)
    assert folded.error is not None
    assert folded.error.kind == "truncated"
    assert folded.error.raw == text
    assert folded.arguments == {"path": "a.py"}


def test_invalid_arguments_after_many_deltas_report_all_their_raw_text() -> None:
    text = '{"content": "' + "x" * 4000 + '", oops'
    folded = invocation(list(text))
    assert folded.error is not None
    assert folded.error.kind == "invalid_json"
    assert folded.error.offset == text.index("oops")
    assert folded.error.raw == text[: text.index("oops") + 1]  # the call ends at its error

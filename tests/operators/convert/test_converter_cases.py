"""The shared converter-test helpers catch what they promise to catch (a helper that cannot fail would
make every test built on it vacuous)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.models import ChunkResponse, ToolCallDelta
from tests.converter_cases import FoldedCall, fold_calls, load_events


def calls(*deltas: ToolCallDelta) -> ChunkResponse:
    return ChunkResponse(tool_calls=list(deltas))


def test_fold_calls_joins_arguments_in_order_of_first_appearance() -> None:
    chunks = [
        calls(ToolCallDelta(0, "a", "f", '{"x":', signature="s")),
        calls(ToolCallDelta(1, "b", "g", kind="custom"), ToolCallDelta(0, arguments_delta=" 1}")),
        calls(ToolCallDelta(0, finished=True, signature="later")),
        calls(ToolCallDelta(1, arguments_delta="free text", kind="custom")),
    ]
    assert fold_calls(chunks) == [
        FoldedCall(0, "a", "f", "function", "s", '{"x": 1}', True),
        FoldedCall(1, "b", "g", "custom", None, "free text", False),
    ]


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        ([calls(ToolCallDelta(0, None, "f"))], "names it"),
        ([calls(ToolCallDelta(0, "a", None))], "names it"),
        (
            [calls(ToolCallDelta(0, "a", "f", finished=True)), calls(ToolCallDelta(0, arguments_delta="x"))],
            "after",
        ),
        ([calls(ToolCallDelta(0, "a", "f")), calls(ToolCallDelta(0, kind="server"))], "kind"),
        ([calls(ToolCallDelta(1, "a", "f"))], "first appearance"),
        ([calls(ToolCallDelta(1, "a", "f"), ToolCallDelta(0, "b", "g"))], "first appearance"),
    ],
)
def test_fold_calls_rejects_what_breaks_the_converter_contract(
    chunks: list[ChunkResponse], message: str
) -> None:
    with pytest.raises(AssertionError, match=message):
        fold_calls(chunks)


def test_load_events_reads_sse_data_lines_and_jsonl(tmp_path: Path) -> None:
    sse = tmp_path / "stream.sse"
    sse.write_text(
        'event: a\ndata: {"n": 1}\n\n: comment\ndata:{"n": 2}\n\ndata: [DONE]\n\n', encoding="utf-8"
    )
    jsonl = tmp_path / "stream.jsonl"
    jsonl.write_text('{"n": 1}\n\n  {"n": 2}  \n', encoding="utf-8")
    assert load_events(sse) == load_events(jsonl) == [{"n": 1}, {"n": 2}]

"""The ``streamfold`` command: replay, demo, errors. Run in-process through ``main``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import main
from tests.conftest import FIXTURES
from tests.reference import expected


def jsonl(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(list(argv)) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.mark.parametrize(
    "fixture",
    [
        "openai_chat/openai-python_parallel_tool_calls_gpt4o.sse",
        "anthropic/fantasy_claude-sonnet-4_thinking_then_tool_use.sse",
        "gemini/vercel_gemini-3.1-pro_streamed_function_call_args_parallel.jsonl",
        "openai_responses/fantasy_gpt-5_reasoning_summary_then_function_call.sse",
    ],
)
def test_replay_jsonl_gives_the_invocations_of_the_recording(
    capsys: pytest.CaptureFixture[str], fixture: str
) -> None:
    lines = jsonl(capsys, "replay", str(FIXTURES / fixture), "--output", "jsonl")
    invocations = [line for line in lines if line["type"] == "TOOL_INVOCATION"]
    reference = expected(FIXTURES / fixture)
    assert [(i["name"], i["arguments"]) for i in invocations] == [
        (call.name, call.arguments) for call in reference.invocations
    ]
    assert lines[-1]["type"] == "RESPONSE_END"
    assert lines[-1]["finish_reason"] == reference.finish_reason
    text = "".join(
        line["payload"]["delta"]
        for line in lines
        if line["type"] == "SEGMENT_CONTENT" and line["segment_id"].startswith(("text", "msg"))
    )
    assert reference.text.startswith(text[:20])
    assert {line["type"] for line in lines} <= {
        "SEGMENT_START",
        "SEGMENT_CONTENT",
        "SEGMENT_ARGUMENT",
        "SEGMENT_END",
        "TOOL_INVOCATION",
        "RESPONSE_END",
    }


def test_replay_text_with_a_tool_format(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "raw_model_output" / "vllm-test_kimi-k2_text_then_3_parallel_tools.txt"
    lines = jsonl(
        capsys, "replay", str(path), "--provider", "text", "--tool-format", "kimi_k2", "--output", "jsonl"
    )
    invocations = [
        (line["id"], line["name"], line["arguments"]) for line in lines if line["type"] == "TOOL_INVOCATION"
    ]
    assert invocations == [
        ("functions.get_weather:0", "get_weather", {"city": "New York"}),
        ("functions.get_news:1", "get_news", {"topic": "technology"}),
        ("functions.send_email:2", "send_email", {"to": "user@example.com", "subject": "Daily Update"}),
    ]
    assert lines[-1]["finish_reason"] == "tool_calls"


def test_demo_plain_shows_every_kind_of_segment(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--speed", "0", "--plain"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[reasoning]\nThe user wants the weather in Paris")
    assert "[tool get_weather]\n  location: Paris, France\n  unit: celsius\n" in out
    assert "=> invocation toolu_01WeatherDemo get_weather(" in out
    assert '[write_file]\n  path: weather/watch.py\n"""Print the weather for a city' in out
    assert "=> invocation toolu_01WriteFileDemo write_file(" in out
    assert out.rstrip().endswith("[end: tool_calls, 412 in / 389 out tokens]")


@pytest.mark.parametrize("stream", ["anthropic-parallel", "openai-parallel", "gemini-thinking"])
def test_every_bundled_demo_stream_plays(capsys: pytest.CaptureFixture[str], stream: str) -> None:
    assert main(["demo", "--stream", stream, "--speed", "0", "--plain"]) == 0
    assert "=> invocation" in capsys.readouterr().out


def test_bad_input_is_reported_with_a_clear_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.sse"
    broken.write_bytes(
        b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\ndata: {not json}\n\n'
    )
    assert main(["replay", str(broken), "--provider", "openai", "--output", "jsonl"]) == 1
    captured = capsys.readouterr()
    assert "StreamDecodeError" in captured.err
    assert '"delta": "hi"' in captured.out  # what came before the error was not lost


def test_unknown_provider_is_a_configuration_error(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "openai_chat" / "openai-python_text_only_gpt4o.sse"
    assert main(["replay", str(path), "--provider", "mystery"]) == 1
    assert "unknown provider 'mystery'" in capsys.readouterr().err


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "/nonexistent/stream.sse"]) == 2
    assert "No such file" in capsys.readouterr().err

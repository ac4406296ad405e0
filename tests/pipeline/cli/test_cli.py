"""The ``streamfold`` command: replay, demo, errors. Run in-process through ``main``."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from operators.delimiters import FORMATS
from pipeline.cli.main import main
from tests.conftest import FIXTURES, ROOT
from tests.reference import expected, read_payloads


def jsonl(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(list(argv)) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The exit status is 2 and the last line on stderr is argparse's message: return the message."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    last = captured.err.splitlines()[-1]
    assert last.startswith("streamfold")
    return last.split(": error: ", 1)[1]


def bad_input(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    """The exit status is 1 and stderr is one line: return stdout and that line."""
    assert main(list(argv)) == 1
    captured = capsys.readouterr()
    assert captured.err.endswith("\n")
    assert captured.err.count("\n") == 1
    return captured.out, captured.err.rstrip("\n")


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
    assert '"delta":"hi"' in captured.out  # what came before the error was not lost
    assert captured.err.startswith(f"streamfold: {broken}: StreamDecodeError: event 1")
    assert captured.err.count("\n") == 1


def test_unknown_provider_is_a_usage_error_listing_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "openai_chat" / "openai-python_text_only_gpt4o.sse"
    assert usage_error(capsys, "replay", str(path), "--provider", "mystery") == (
        "argument --provider: invalid choice: 'mystery' (choose from 'auto', 'openai', 'openai-responses',"
        " 'anthropic', 'gemini', 'cohere', 'bedrock-converse', 'ollama', 'text')"
    )


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "/nonexistent/stream.sse"]) == 2
    assert capsys.readouterr().err == "streamfold: /nonexistent/stream.sse: No such file or directory\n"


def test_a_text_file_that_is_not_utf8_replays_the_text_before_then_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "model.txt"
    path.write_bytes(b"hello \xff world")
    out, err = bad_input(capsys, "replay", str(path), "--output", "jsonl")
    assert err == (
        f"streamfold: {path}: StreamDecodeError: the text is not valid UTF-8: byte 0xff at byte offset 6"
    )
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["payload"].get("delta") for line in lines if line["type"] == "SEGMENT_CONTENT"] == [
        "hell",
        "o ",
    ]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"not json", "StreamDecodeError: the file is not JSON: Expecting value: line 1 column 1 (char 0)"),
        (b"\xff[]", "StreamDecodeError: the file is not valid UTF-8: byte 0xff at byte offset 0"),
        (
            b'"a"',
            "StreamDecodeError: expected a JSON list of text deltas (strings) or of provider events"
            " (objects), got a string",
        ),
        (
            b'["a", 2]',
            "StreamDecodeError: expected a JSON list of text deltas (strings) or of provider events"
            " (objects): item 1 is a number",
        ),
        (
            b'["a\\ud800"]',
            "StreamDecodeError: item 0 holds a lone surrogate escape, which is not I-JSON (RFC 7493)",
        ),
        (b"[1e999]", "StreamDecodeError: the file is not I-JSON: the number 1e999 is beyond a double"),
    ],
    ids=["not-json", "not-utf8", "string", "mixed", "surrogate", "overflow"],
)
def test_a_json_file_that_is_not_a_list_of_deltas_or_events_is_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "deltas.json"
    path.write_bytes(content)
    out, err = bad_input(capsys, "replay", str(path), "--output", "jsonl")
    assert out == ""
    assert err.startswith(f"streamfold: {path}: {problem}")


def test_a_json_list_of_provider_events_replays_as_the_recording(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    recording = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"
    path = tmp_path / "events.json"
    path.write_text(json.dumps([payload for _, payload in read_payloads(recording)]))
    from_json = jsonl(capsys, "replay", str(path), "--output", "jsonl")
    from_sse = jsonl(capsys, "replay", str(recording), "--output", "jsonl")
    assert [line for line in from_json if line["type"] == "TOOL_INVOCATION"] == [
        line for line in from_sse if line["type"] == "TOOL_INVOCATION"
    ]
    assert from_json[-1] == from_sse[-1]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--chunk-size", "-3", "argument --chunk-size: expected an integer >= 1, got '-3'"),
        ("--chunk-size", "0", "argument --chunk-size: expected an integer >= 1, got '0'"),
        ("--speed", "-1", "argument --speed: expected a number >= 0, got '-1'"),
        ("--speed", "nan", "argument --speed: expected a number >= 0, got 'nan'"),
        (
            "--tool-format",
            "kimi-k9",
            "argument --tool-format: unknown tool format 'kimi-k9'; expected one of: none, auto, ",
        ),
        ("--tool-format", "", "argument --tool-format: unknown tool format ''; expected one of: none,"),
    ],
)
def test_bad_replay_options_are_usage_errors(
    capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    path = FIXTURES / "openai_chat" / "openai-python_text_only_gpt4o.sse"
    assert usage_error(capsys, "replay", str(path), option, value).startswith(message)


@pytest.mark.parametrize("spelling", ["none", "api_tool_call"])
def test_tool_format_none_means_no_rewriting(capsys: pytest.CaptureFixture[str], spelling: str) -> None:
    path = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"
    lines = jsonl(capsys, "replay", str(path), "--tool-format", spelling, "--output", "jsonl")
    plain = jsonl(capsys, "replay", str(path), "--output", "jsonl")
    assert [line for line in lines if line["type"] == "TOOL_INVOCATION"] == [
        line for line in plain if line["type"] == "TOOL_INVOCATION"
    ]


def _openai_sse_of(capsys: pytest.CaptureFixture[str], path: Path, status: int) -> str:
    assert main(["replay", str(path), "--provider", "openai", "--output", "openai-sse"]) == status
    return capsys.readouterr().out


def test_openai_sse_output_is_what_the_proxy_sends(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from pipeline.proxy.rewriter import ChatStreamRewriter

    recording = FIXTURES / "openai_chat" / "openai-python_text_only_gpt4o.sse"
    data = recording.read_bytes()
    proxy = ChatStreamRewriter(None)
    assert _openai_sse_of(capsys, recording, 0) == (proxy.feed(data) + proxy.finish()).decode()

    truncated = tmp_path / "truncated.sse"
    truncated.write_bytes(data[: data.index(b'data: {"id"', data.index(b'"content":"I\'m"'))])
    proxy = ChatStreamRewriter(None)
    expected = (proxy.feed(truncated.read_bytes()) + proxy.finish()).decode()
    out = _openai_sse_of(capsys, truncated, 1)
    assert out == expected
    assert "[DONE]" not in out
    assert json.loads(out.rsplit("data: ", 1)[1])["error"]["code"] == "upstream_truncated"


def test_a_truncated_openai_sse_replay_says_so_on_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = (FIXTURES / "openai_chat" / "openai-python_text_only_gpt4o.sse").read_bytes()
    truncated = tmp_path / "truncated.sse"
    truncated.write_bytes(data[: data.rindex(b"data: ", 0, data.index(b'finish_reason":"stop'))])
    out, err = bad_input(capsys, "replay", str(truncated), "--provider", "openai", "--output", "openai-sse")
    assert err == (
        f"streamfold: {truncated}: TruncatedStreamError:"
        " the upstream stream ended without a finish_reason (truncated)"
    )
    assert out.endswith('"code":"upstream_truncated"}}\n\n')


@pytest.mark.anyio
async def test_jsonl_output_escapes_a_lone_surrogate() -> None:
    from pipeline.cli.main import _run

    async def events() -> AsyncIterator[dict[str, Any]]:
        yield {"choices": [{"index": 0, "delta": {"content": "a\ud800b"}, "finish_reason": "stop"}]}

    out = io.StringIO()
    await _run(events(), out, provider="openai", tool_format="api_tool_call", output="jsonl")
    text = out.getvalue()
    text.encode("utf-8")  # no lone surrogate left in the output
    deltas = [json.loads(line).get("payload", {}).get("delta") for line in text.splitlines()]
    assert "a\ud800b" in deltas


@pytest.mark.parametrize("argv", [[], ["demo"], ["replay"], ["proxy"]])
def test_help_is_plain_text(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: streamfold {' '.join(argv)}".rstrip())
    assert "``" not in out
    assert ":func:" not in out


def test_speed_is_described_one_way(capsys: pytest.CaptureFixture[str]) -> None:
    helps = []
    for command in ("demo", "replay", "serve"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        helps.append(" ".join(capsys.readouterr().out.split()))
    for text in helps:
        assert "--speed RATE pieces per second: " in text
        assert "; 0: as fast as possible (default: " in text
    assert (
        "--speed RATE pieces per second: provider events (SSE events, JSON lines, .json list items)"
        in helps[1]
    )


def test_proxy_help_shows_the_tool_format_default_and_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["proxy", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: kimi_k2)" in text
    names = sorted({lexer.name for lexer in FORMATS.values()})
    assert f"(default: kimi_k2): {', '.join(names)}; auto" in text
    assert "or none (no rewriting)" in text


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"streamfold {version('streamfold')}\n"


def _without(module: str, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where importing ``module`` fails, as when it is not installed."""
    script = f"import sys\nsys.modules[{module!r}] = None\n{code}"
    root = ROOT
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=60,
        check=False,
    )


def test_proxy_without_the_server_extra_names_it() -> None:
    done = _without(
        "starlette",
        "from pipeline.cli.main import main\nraise SystemExit(main(['proxy', '--upstream', 'http://127.0.0.1:9']))",
    )
    assert done.returncode == 1
    assert done.stderr == (
        "streamfold: MissingExtraError: streamfold proxy needs the 'server' extra (module 'starlette' is not"
        " installed): pip install 'streamfold[server]'\n"
    )


def test_stream_routes_without_starlette_names_the_extra() -> None:
    done = _without(
        "starlette",
        "from pipeline.errors import MissingExtraError\n"
        "from pipeline.fanout.web import stream_routes\n"
        "try:\n"
        "    stream_routes({})\n"
        "except MissingExtraError as exc:\n"
        "    assert isinstance(exc, ImportError) and exc.extra == 'server' and exc.name == 'starlette'\n"
        "    print(exc)\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "pipeline.fanout.web.stream_routes needs the 'server' extra (module 'starlette' is not installed):"
        " pip install 'streamfold[server]'\n"
    )


@pytest.mark.parametrize("missing", ["starlette", "httpx"])
def test_importing_the_proxy_without_the_server_extra_names_it(missing: str) -> None:
    done = _without(
        missing,
        "from pipeline.errors import MissingExtraError\n"
        "try:\n"
        "    import pipeline.proxy.app\n"
        "except MissingExtraError as exc:\n"
        "    print(exc.extra, exc.name)\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"server {missing}\n"

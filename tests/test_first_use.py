"""First use: the mistakes a new user makes first are reported, in ``process()`` and in the CLI alike.

A wrong ``provider=`` is a :class:`ConverterError` naming what the first event looks like, never an empty
response.
"""

from __future__ import annotations

import io
import itertools
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
from rich.cells import cell_len
from rich.console import Console

from operators.adapter.sources import from_httpx
from pipeline.cli.main import main
from pipeline.cli.render import LiveRenderer
from pipeline.compose import process
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import PipelineEvent, ResponseEnd, SegmentEvent, SegmentType, ToolInvocation
from tests.conftest import FIXTURES
from tests.proxy_upstream import serving
from tests.servers import free_port

RECORDINGS = {
    "anthropic": FIXTURES / "anthropic" / "fantasy_claude-sonnet-4_text_then_tool_use.sse",
    "openai": FIXTURES / "openai_chat" / "openai-python_single_tool_call_gpt4o.sse",
    "openai-responses": FIXTURES / "openai_responses" / "fantasy_gpt-4o_2_parallel_function_calls.sse",
    "gemini": FIXTURES / "gemini" / "fantasy_gemini-2.5-flash_thought_summary_then_function_call.sse",
    "cohere": FIXTURES / "cohere" / "vercel_cohere_v2_tool_plan_then_2_parallel_tool_calls.jsonl",
    "bedrock-converse": FIXTURES / "bedrock_converse" / "pydantic-ai_nova-micro_text.eventstream.bin",
    "ollama": FIXTURES / "ollama" / "ollama-docs_llama3.2_chat_streamed_tool_call.jsonl",
}
"""One recording per wire format."""

FIRST_EVENT_LOOKS = {
    "anthropic": "type 'message_start', keys: message, type",
    "openai": "keys: choices, created, id, model, object, system_fingerprint",
    "openai-responses": "type 'response.created', keys: response, sequence_number, type",
    "gemini": "keys: candidates, modelVersion, responseId, usageMetadata",
    "cohere": "type 'message-start', keys: delta, id, type",
    "bedrock-converse": "keys: messageStart",
    "ollama": "keys: created_at, done, message, model",
}
"""How the wrong-provider error describes each recording's first event."""

WRONG_PAIRS = list(itertools.permutations(RECORDINGS, 2))


def wrong_provider_message(actual: str, given: str) -> str:
    return (
        f"event 0: the stream was read as provider {given!r}, but its first event looks like {actual!r}"
        f" ({FIRST_EVENT_LOOKS[actual]}); pass provider={actual!r} or 'auto'"
    )


async def events_of(path: Path, provider: str) -> list[PipelineEvent]:
    body = await anyio.Path(path).read_bytes()
    return [event async for event in process(body, provider=provider)]  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.parametrize(("actual", "given"), WRONG_PAIRS)
async def test_process_with_the_wrong_provider_names_the_first_event(actual: str, given: str) -> None:
    with pytest.raises(ConverterError) as failure:
        await events_of(RECORDINGS[actual], given)
    assert str(failure.value) == wrong_provider_message(actual, given)
    assert failure.value.event_number == 0
    assert failure.value.partial_outputs == []


@pytest.mark.anyio
@pytest.mark.parametrize("provider", list(RECORDINGS))
async def test_process_with_the_right_provider_reads_the_recording(provider: str) -> None:
    named = await events_of(RECORDINGS[provider], provider)
    detected = await events_of(RECORDINGS[provider], "auto")
    assert [type(event) for event in named] == [type(event) for event in detected]
    assert named[-1] == detected[-1]
    assert len(named) > 3


@pytest.mark.parametrize("output", ["jsonl", "pretty", "openai-sse"])
@pytest.mark.parametrize(("actual", "given"), WRONG_PAIRS)
def test_replay_with_the_wrong_provider_fails_on_stderr(
    capsys: pytest.CaptureFixture[str], actual: str, given: str, output: str
) -> None:
    path = RECORDINGS[actual]
    assert main(["replay", str(path), "--provider", given, "--output", output, "--plain"]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"streamfold: {path}: ConverterError: {wrong_provider_message(actual, given)}\n"
    assert "RESPONSE_END" not in captured.out


TRUNCATED_LINE = "TruncatedStreamError: the upstream stream ended without a finish_reason (truncated)"


def cut_before_the_finish(path: Path, into: Path) -> Path:
    """``path`` up to the event before its first finish reason."""
    data = path.read_bytes()
    finish = data.index(b'"finish_reason":"tool_calls"')
    into.write_bytes(data[: data.rindex(b"data: ", 0, finish)])
    return into


@pytest.mark.anyio
async def test_process_ends_a_cut_stream_with_no_finish_reason(tmp_path: Path) -> None:
    cut = cut_before_the_finish(RECORDINGS["openai"], tmp_path / "cut.sse")
    events = await events_of(cut, "openai")
    end = events[-1]
    assert isinstance(end, ResponseEnd)
    assert end.finish_reason is None
    invocations = [event for event in events if isinstance(event, ToolInvocation)]
    assert [(call.name, call.error) for call in invocations] == [("GetWeatherArgs", None)]


@pytest.mark.parametrize("output", ["jsonl", "pretty", "openai-sse"])
def test_every_replay_output_reports_a_cut_stream_on_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, output: str
) -> None:
    cut = cut_before_the_finish(RECORDINGS["openai"], tmp_path / "cut.sse")
    assert main(["replay", str(cut), "--output", output]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"streamfold: {cut}: {TRUNCATED_LINE}\n"
    assert "GetWeatherArgs" in captured.out  # what came before the cut is written first


@pytest.mark.parametrize("output", ["jsonl", "pretty", "openai-sse"])
def test_a_whole_replay_exits_0_with_nothing_on_stderr(
    capsys: pytest.CaptureFixture[str], output: str
) -> None:
    assert main(["replay", str(RECORDINGS["openai"]), "--output", output]) == 0
    assert capsys.readouterr().err == ""


OPENAI_ERROR_BODY = b"""{
  "error": {
    "message": "Incorrect API key provided",
    "type": "invalid_request_error",
    "param": null,
    "code": "invalid_api_key"
  }
}
"""
ANTHROPIC_ERROR_BODY = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'


@pytest.mark.parametrize(
    ("body", "provider", "error"),
    [
        (
            OPENAI_ERROR_BODY,
            "auto",
            "event 0: provider error (invalid_api_key): Incorrect API key provided",
        ),
        (
            OPENAI_ERROR_BODY,
            "openai",
            "event 0: provider error (invalid_api_key): Incorrect API key provided",
        ),
        (ANTHROPIC_ERROR_BODY, "auto", "event 0: provider error (overloaded_error): Overloaded"),
        (ANTHROPIC_ERROR_BODY, "anthropic", "event 0: provider error (overloaded_error): Overloaded"),
        (b'{"a": "b"}', "auto", "cannot tell the wire format of an event with type None and keys: a"),
    ],
    ids=["openai", "openai-named", "anthropic", "anthropic-named", "no-format"],
)
@pytest.mark.parametrize("suffix", [".json", ".sse"])
def test_an_error_body_saved_as_json_raises_as_it_does_as_sse(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, body: bytes, provider: str, error: str, suffix: str
) -> None:
    path = tmp_path / f"body{suffix}"
    path.write_bytes(body)
    assert main(["replay", str(path), "--provider", provider, "--output", "jsonl"]) == 1
    captured = capsys.readouterr()
    kind = "ConfigurationError" if "cannot tell" in error else "ProviderError"
    assert (captured.out, captured.err) == ("", f"streamfold: {path}: {kind}: {error}\n")


ANTHROPIC_AUTH_ERROR = {
    "type": "error",
    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
}


def messages_app(recording: bytes) -> Any:
    """A Messages endpoint on Starlette: the recording for a request with a key, a 401 error body without."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def messages(request: Request) -> Response:
        if "x-api-key" not in request.headers:
            return JSONResponse(ANTHROPIC_AUTH_ERROR, status_code=401)
        return Response(recording, media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])


@pytest.mark.anyio
async def test_process_reads_an_httpx_response_as_from_httpx_does() -> None:
    recording = await anyio.Path(RECORDINGS["anthropic"]).read_bytes()
    expected = [event async for event in process(recording, id_factory=str, segment_ids=str)]
    async with serving(messages_app(recording)) as url, httpx.AsyncClient(base_url=url) as client:
        request = client.build_request("POST", "/v1/messages", json={}, headers={"x-api-key": "k"})
        response = await client.send(request, stream=True)
        assert [event async for event in process(response, id_factory=str, segment_ids=str)] == expected
        assert response.is_closed


@pytest.mark.anyio
async def test_process_raises_the_error_status_of_an_httpx_response() -> None:
    async with serving(messages_app(b"")) as url, httpx.AsyncClient(base_url=url) as client:
        async with client.stream("POST", "/v1/messages", json={}) as response:
            with pytest.raises(ProviderError) as failure:
                [event async for event in process(response)]
        async with client.stream("POST", "/v1/messages", json={}) as response:
            with pytest.raises(ProviderError) as by_from_httpx:
                async with from_httpx(response).stream() as body:
                    [item async for item in body]
    assert str(failure.value) == (
        f"HTTP 401 from {url}/v1/messages: provider error (authentication_error): invalid x-api-key"
    )
    assert str(failure.value) == str(by_from_httpx.value)
    assert (failure.value.status, failure.value.payload) == (401, ANTHROPIC_AUTH_ERROR)


def test_the_first_readme_example_reads_an_httpx_response() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    first = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert "client.stream(" in first
    assert "process(response).stream() as events" in first


DEMO_HELP = """\
usage: streamfold demo [-h]
                       [--stream {anthropic-parallel,coding-agent,gemini-thinking,openai-parallel}]
                       [--speed RATE] [--plain]

Replay a bundled recorded response through the whole pipeline, live (no network).

options:
  -h, --help            show this help message and exit
  --stream {anthropic-parallel,coding-agent,gemini-thinking,openai-parallel}
                        which recording (default: coding-agent)
  --speed RATE          pieces per second: the recording's provider events (SSE events); 0: as
                        fast as possible (default: 120.0)
  --plain               plain lines, as on a dumb terminal
"""


def help_of(capsys: pytest.CaptureFixture[str], command: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_demo_help_is_exactly_its_options(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert help_of(capsys, "demo") == DEMO_HELP


@pytest.mark.parametrize("command", ["demo", "serve", "replay"])
def test_help_mentions_only_the_flags_its_command_takes(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    text = help_of(capsys, command)
    usage, rest = text.split("\n\n", 1)
    taken = set(re.findall(r"\[(--[a-z-]+)", usage))
    assert taken
    assert set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest)) <= taken | {"--help"}


def test_serve_help_describes_speed_for_what_serve_replays(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    text = " ".join(help_of(capsys, "serve").split())
    assert (
        "--speed RATE pieces per second: provider events (SSE events, JSON lines, .json list items) or text"
        " deltas; 0: as fast as possible (default: 60.0) --host HOST"
    ) in text


def replicas_walkthrough() -> str:
    readme = (Path(__file__).parent.parent / "docs" / "serving.md").read_text()
    start = readme.index("- `examples/replicas/`")
    return readme[start : readme.index("\n- ", start + 1)]


def test_the_replicas_walkthrough_starts_the_replicas_and_balancer_before_the_producer() -> None:
    text = replicas_walkthrough()
    commands = re.search(r"```bash\n(.*?)```", text, flags=re.DOTALL)
    assert commands is not None
    lines = [line.strip() for line in commands.group(1).splitlines() if line.strip()]
    assert [line.split()[0] for line in lines] == [
        "redis-server",
        "export",
        "REPLICA_NAME=a",
        "REPLICA_NAME=b",
        "python",
        "python",
    ]
    assert "--port 8001" in lines[2]
    assert "replica_8001=$!" in lines[2]
    assert lines[4].startswith(
        "python examples/replicas/balancer.py --port 8000 127.0.0.1:8001 127.0.0.1:8002"
    )
    assert lines[5].startswith("python examples/replicas/producer.py")
    assert "--pace 0.3" in lines[5]
    assert "`GET /responses/demo/events -> 127.0.0.1:8001`" in text
    assert "`kill -9 $replica_8001`" in text


@pytest.mark.anyio
async def test_the_balancer_says_which_replica_serves_each_request() -> None:
    """The balancer, run as the walkthrough runs it, prints the line the walkthrough quotes."""

    async def backend(client: anyio.abc.SocketStream) -> None:
        async with client:
            await client.receive()
            await client.send(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")

    root = Path(__file__).parent.parent
    async with (
        await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0) as replica,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(replica.serve, backend)
        replica_port = replica.extra(anyio.abc.SocketAttribute.local_port)
        port = free_port()
        argv = [
            sys.executable,
            "examples/replicas/balancer.py",
            "--port",
            str(port),
            f"127.0.0.1:{replica_port}",
        ]
        async with await anyio.open_process(argv, cwd=root) as balancer:
            try:
                with anyio.fail_after(30):
                    async with httpx.AsyncClient() as client:
                        while True:
                            try:
                                answer = await client.get(f"http://127.0.0.1:{port}/responses/demo/events")
                                break
                            except httpx.ConnectError:
                                await anyio.sleep(0.05)
                    assert answer.text == "ok"
                    assert balancer.stdout is not None
                    line = await balancer.stdout.receive()
            finally:
                balancer.kill()
        tasks.cancel_scope.cancel()
    assert line.decode() == f"GET /responses/demo/events -> 127.0.0.1:{replica_port}\n"


CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


async def demo_events() -> list[PipelineEvent]:
    body = (resources.files("pipeline.cli") / "demo" / "coding_agent.sse").read_bytes()
    return [event async for event in process(body)]


def transcript(output: str, width: int, height: int) -> list[str]:
    """What a terminal of ``width`` x ``height`` shows, scrollback included, once ``output`` is written."""
    import pyte

    screen = pyte.HistoryScreen(width, height, history=100_000)
    pyte.Stream(screen).feed(output.replace("\n", "\r\n"))
    rows = [screen.buffer[number] for number in range(height)]
    lines = [
        "".join(row[column].data for column in range(width)).rstrip() for row in [*screen.history.top, *rows]
    ]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@pytest.mark.anyio
@pytest.mark.parametrize(("width", "height"), [(80, 24), (100, 30)])
async def test_the_live_view_leaves_a_clean_transcript(width: int, height: int) -> None:
    events = await demo_events()
    out = io.StringIO()
    console = Console(file=out, width=width, height=height, force_terminal=True, color_system=None)
    renderer = LiveRenderer(console, refresh_per_second=500)  # its ticker redraws as the events come
    for number, event in enumerate(events):
        renderer.feed(event)
        if number % 5 == 0:
            renderer.refresh()  # a redraw at least every five events, the region at every height
    renderer.close()
    output = out.getvalue()
    drawn = [piece for line in CONTROL.sub("\n", output).split("\n") for piece in line.split("\r")]
    assert max(map(cell_len, drawn)) <= width  # no line wider than the screen

    lines = transcript(output, width, height)
    heads = [
        "The user wants the weather in Paris",
        "I'll check the current weather in Paris",
        "╭─",  # tool get_weather
        "│ ✓ invocation toolu_01WeatherDemo ready",
        "╭─",  # write_file weather/watch.py
        "│ ✓ invocation toolu_01WriteFileDemo ready",
        "finish: tool_calls  412 in / 389 out tokens",
    ]
    found = [
        next(head for head in heads if line.startswith(head))
        for line in lines
        if line.startswith(tuple(heads))
    ]
    assert found == heads  # each block once, in order
    titles = [line for line in lines if line.startswith("╭")]
    assert titles == [
        f"╭{' tool get_weather '.center(width - 2, '─')}╮",
        f"╭{' write_file weather/watch.py '.center(width - 2, '─')}╮",
    ]
    assert lines[-1] == heads[6]
    numbered = [int(match.group(1)) for line in lines if (match := re.match(r"│ +(\d+) ", line))]
    assert numbered == list(range(1, 26))  # each line of the file once, in order
    assert sum(line.startswith("╰─") for line in lines) == 2  # each panel closed once
    assert not [line for line in lines if "⋮" in line or "…" in line]  # no live-region residue


SHOW_CURSOR, HIDE_CURSOR = "\x1b[?25h", "\x1b[?25l"


def test_the_live_view_gives_the_terminal_back_when_a_block_cannot_be_drawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, height=24, force_terminal=True, color_system=None)
    renderer = LiveRenderer(console)
    renderer.feed(SegmentEvent.start("t", SegmentType.TEXT))
    renderer.feed(SegmentEvent.content("t", "partial"))

    def cannot_draw(self: LiveRenderer, block: Any) -> Any:
        raise RuntimeError("cannot draw")

    monkeypatch.setattr(LiveRenderer, "_draw", cannot_draw)
    with pytest.raises(RuntimeError, match=r"^cannot draw$"):
        renderer.close()
    output = out.getvalue()
    assert output.rfind(SHOW_CURSOR) > output.rfind(HIDE_CURSOR) >= 0  # the live display was stopped

"""Every recorded stream, encoded for the UIs, read by the real clients.

Vercel: tests/ui_clients/consume.mjs runs the ``ai`` package's own reader (``parseJsonEventStream`` with
``uiMessageChunkSchema``, then ``readUIMessageStream``, as ``useChat`` does); the UI message it rebuilds
must equal streamfold's own folded view. AG-UI: every event must validate with the ``ag-ui-protocol``
package's models and ``@ag-ui/core``'s zod schemas, and the events must rebuild the same view; run through
``@ag-ui/client``'s agent, a response is one assistant message and only the client's calls are left to it.
All the recordings go through one Node process per test run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from operators.encode import encoder_for
from operators.encode.vercel import vercel_finish_reason
from pipeline.compose import process
from pipeline.models import (
    PipelineEvent,
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    ToolInvocation,
    ToolOutput,
)
from pipeline.testing import counter_segment_ids
from tests.conftest import TESTS
from tests.reference import FIXTURES, call_id_for, fixture_paths

CLIENTS = TESTS / "ui_clients"
NO_RESULT = "The provider ran this tool; its result is not part of this response."
RAW_FORMATS = {
    "harmony_": "harmony",
    "vllm-test_deepseek-v3.1_": "deepseek_v31",
    "vllm-test_deepseek-v3_": "deepseek_v3",
    "vllm-test_glm-4.5_": "glm45",
    "vllm-test_hermes_": "hermes",
    "vllm-test_kimi-k2_": "kimi_k2",
    "vllm-test_qwen3-coder_": "qwen3_coder",
    "vllm-test_pythonic_": "pythonic",
    "vllm-test_llama4-pythonic_": "pythonic",
    "vllm-test_olmo3_": "olmo3",
    "vllm-test_lfm2_": "lfm2",
    "vllm-test_gemma4_": "gemma4",
    "vllm-test_functiongemma_": "functiongemma",
    "vllm-test_cohere-command_": "cohere_command",
    "vllm-test_gigachat35_": "gigachat35",
    "vllm-test_gigachat31_": "gigachat3",
    "vllm-test_gigachat3_": "gigachat3",
    "vllm-test_granite-20b-fc_": "granite_20b_fc",
    "vllm-test_granite_": "granite",
    "vllm-test_internlm2_": "internlm2",
    "vllm-test_jamba_": "jamba",
    "vllm-test_longcat_": "longcat",
    "vllm-test_phi4-mini_": "phi4_mini",
    "vllm-test_xlam_": "xlam",
    "vllm-test_seed-oss_": "seed_oss",
    "vllm-test_step3_": "step3",
    "vllm-test_step3p5_": "step3p5",
    "vllm-test_ernie-4.5_": "ernie45",
    "vllm-test_deepseek-v4_": "deepseek_v4",
    "vllm-test_hunyuan-a13b_": "hunyuan_a13b",
    "vllm-test_hy-v3_": "hunyuan",
    "vllm-test_minimax-m3_": "minimax_m3",
    "vllm-docstring_kimi-k3_": "kimi_k3",
    "kimi-tool-parser-test_": "kimi_k2",
}
"""The delimiter format of each recording of raw model text, by its name's prefix."""


def raw_format(path: Path) -> str:
    return next(fmt for prefix, fmt in RAW_FORMATS.items() if path.name.startswith(prefix))


PATHS = fixture_paths() + sorted((FIXTURES / "raw_model_output").iterdir())
TOOL_SEGMENTS = {SegmentType.TOOL_CALL, SegmentType.WRITE_FILE, SegmentType.PATCH_FILE}


async def _pipeline_events(path: Path, data: bytes) -> tuple[list[PipelineEvent], BaseException | None]:
    """The events of a recording, and the error that ended it (kept: an error stream is encoded too).
    Raw model text is replayed in deltas of 4 characters (a ``.json`` list: delta by delta)."""
    events: list[PipelineEvent] = []
    if path.parent.name == "raw_model_output":
        text = data.decode()
        deltas = (
            json.loads(text) if path.suffix == ".json" else [text[i : i + 4] for i in range(0, len(text), 4)]
        )
        stream = process(
            deltas,
            provider="text",
            tool_format=raw_format(path),  # type: ignore[arg-type]
            id_factory=call_id_for,
            segment_ids=counter_segment_ids(),
        )
    else:
        stream = process(data, id_factory=call_id_for, segment_ids=counter_segment_ids())
    try:
        async with stream.stream() as items:
            async for event in items:
                events.append(event)
    except Exception as exc:
        return events, exc
    return events, None


@cache
def recorded(path: Path) -> tuple[list[PipelineEvent], BaseException | None]:
    return asyncio.run(_pipeline_events(path, path.read_bytes()))


PARALLEL = FIXTURES / "anthropic/fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse"


def agent_events(after_end: bool) -> list[PipelineEvent | ToolOutput]:
    """The parallel-calls recording with the eager runner's outputs: the first call's ok, the second's an
    error; each right after its invocation, or all after the response's end."""
    events, _ = recorded(PARALLEL)
    invocations = [event for event in events if isinstance(event, ToolInvocation)]
    outputs = {
        invocations[0].id: ToolOutput(call_id=invocations[0].id, name=invocations[0].name, output={"sum": 5}),
        invocations[1].id: ToolOutput(
            call_id=invocations[1].id, name=invocations[1].name, output="boom", status="error"
        ),
    }
    items: list[PipelineEvent | ToolOutput] = []
    for event in events:
        items.append(event)
        if not after_end and isinstance(event, ToolInvocation):
            items.append(outputs[event.id])
    if after_end:
        items += outputs.values()
    return items


def encode_items(items: list[Any], error: BaseException | None, protocol: str) -> str:
    core = encoder_for(protocol).core(response_id="resp_1")
    frames: list[bytes] = []
    for item in items:
        frames += core.feed(item)
    frames += core.abort(error) if error is not None else core.finish()
    return b"".join(frames).decode()


def encode(path: Path, protocol: str) -> str:
    events, error = recorded(path)
    core = encoder_for(protocol).core(response_id="resp_1")
    frames: list[bytes] = []
    for event in events:
        frames += core.feed(event)
    frames += core.abort(error) if error is not None else core.finish()
    return b"".join(frames).decode()


# -- streamfold's own folded view ---------------------------------------------------------------------


def folded_view(events: list[PipelineEvent]) -> list[tuple[Any, ...]]:
    """The parts a UI should show, in order: text, reasoning (with its signature), tool calls with their
    input (and a provider-executed tool's output)."""
    parts: list[tuple[Any, ...]] = []
    where: dict[str, int] = {}
    kinds: dict[str, SegmentType | None] = {}
    pieces: dict[str, list[str]] = {}
    for event in events:
        if isinstance(event, SegmentEvent):
            segment_id = event.segment_id
            if event.event_type is SegmentEventType.START:
                kinds[segment_id] = event.segment_type
                pieces[segment_id] = []
                if event.segment_type in (SegmentType.TEXT, SegmentType.REASONING):
                    where[segment_id] = len(parts)
                    parts.append((event.segment_type.value, "", None))
                elif event.segment_type in TOOL_SEGMENTS:
                    where[segment_id] = len(parts)
                    parts.append(("tool", segment_id, event.tool_name, "input-streaming", None))
            elif event.event_type is SegmentEventType.CONTENT:
                pieces[segment_id].append(event.delta or "")
            elif event.event_type is SegmentEventType.END:
                kind = kinds[segment_id]
                if kind in (SegmentType.TEXT, SegmentType.REASONING):
                    metadata = event.metadata
                    signature = metadata.get("signature") or metadata.get("encrypted_content")
                    signature = signature if kind is SegmentType.REASONING else None
                    parts[where[segment_id]] = (kind.value, "".join(pieces[segment_id]), signature)
                elif kind is SegmentType.TOOL_RESULT:
                    call_id = event.metadata["call_id"]
                    if call_id in where:
                        _, _, name, _, input_ = parts[where[call_id]]
                        state = "output-error" if event.metadata.get("is_error") else "output-available"
                        parts[where[call_id]] = ("tool", call_id, name, state, input_)
        elif isinstance(event, ToolInvocation) and event.id in where:
            if event.error is None:
                parts[where[event.id]] = ("tool", event.id, event.name, "input-available", event.arguments)
            else:
                raw = event.error.raw or event.arguments
                parts[where[event.id]] = ("tool", event.id, event.name, "output-error", raw)
    return parts


def finish_reason(events: list[PipelineEvent], error: BaseException | None) -> str | None:
    if error is not None:
        return "error"
    ends = [event for event in events if isinstance(event, ResponseEnd)]
    return vercel_finish_reason(ends[-1].finish_reason) if ends else None


def ui_message_view(message: dict[str, Any]) -> list[tuple[Any, ...]]:
    parts: list[tuple[Any, ...]] = []
    for part in message["parts"]:
        kind = part["type"]
        if kind == "text":
            parts.append(("text", part["text"], None))
        elif kind == "reasoning":
            provider = (part.get("providerMetadata") or {}).get("streamfold", {})
            signature = provider.get("signature") or provider.get("encryptedContent")
            parts.append(("reasoning", part["text"], signature))
        elif kind.startswith("tool-") or kind == "dynamic-tool":
            name = part.get("toolName") or kind.removeprefix("tool-")
            state = part["state"]
            input_ = (
                part.get("rawInput") if state == "output-error" and "rawInput" in part else part.get("input")
            )
            parts.append(("tool", part["toolCallId"], name, state, input_))
    return parts


# -- the Node clients ---------------------------------------------------------------------------------


@cache
def node_results() -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip(
            "Node.js is not installed: the UI clients' conformance tests need it (.ci/run installs it)"
        )
    if not all((CLIENTS / "node_modules" / name).is_dir() for name in ("ai", "@ag-ui/client")):
        if os.environ.get("CI"):
            pytest.fail("tests/ui_clients/node_modules is missing: .ci/run must run `npm ci` there")
        pytest.skip("the UI clients are not installed: run `npm ci` in tests/ui_clients")
    request = {
        "vercel": [{"name": path.name, "body": encode(path, "vercel")} for path in PATHS]
        + [
            {"name": f"agent:{after_end}", "body": encode_items(agent_events(after_end), None, "vercel")}
            for after_end in (False, True)
        ],
        "agui": [{"name": path.name, "body": encode(path, "agui")} for path in PATHS]
        + [
            {"name": f"agent:{after_end}", "body": encode_items(agent_events(after_end), None, "agui")}
            for after_end in (False, True)
        ]
        + [{"name": "x_search", "body": encode_items(X_SEARCH_STEPS, None, "agui")}],
    }
    done = subprocess.run(
        [node, "consume.mjs"],
        cwd=CLIENTS,
        input=json.dumps(request).encode(),
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode()
    results: dict[str, Any] = json.loads(done.stdout)
    return results


def by_name(path: Path) -> str:
    return path.name


@pytest.mark.parametrize("path", PATHS, ids=by_name)
def test_useChat_rebuilds_streamfolds_view(path: Path) -> None:
    result = node_results()["vercel"][path.name]
    events, error = recorded(path)
    if error is None:
        assert result["errors"] == []
    else:  # the error chunk: useChat's onError, once
        assert [message.split(":")[0] for message in result["errors"]] == ["client"]
    assert result["extraKeys"] == []
    assert ui_message_view(result["message"]) == folded_view(events)
    assert result["finishReason"] == finish_reason(events, error)


@pytest.mark.parametrize("path", PATHS, ids=by_name)
def test_agui_events_validate_with_the_typescript_schemas(path: Path) -> None:
    result = node_results()["agui"][path.name]
    assert result["errors"] == []
    assert result["events"][0]["type"] == "RUN_STARTED"


X_SEARCH_STEPS: list[Any] = [
    SegmentEvent.start("text_0", SegmentType.TEXT),
    SegmentEvent.content("text_0", "Searching X."),
    SegmentEvent.end("text_0", segment_type=SegmentType.TEXT),
    *[
        event
        for call_id, name in (("xs_call_1", "x_keyword_search"), ("xs_call_2", "view_x_video"))
        for event in (
            SegmentEvent.start(
                call_id,
                SegmentType.TOOL_CALL,
                {"tool_name": name, "call_id": call_id, "provider_executed": True},
            ),
            SegmentEvent.content(call_id, "{}"),
            SegmentEvent.end(
                call_id,
                {"tool_name": name, "call_id": call_id, "arguments": {}, "provider_executed": True},
                segment_type=SegmentType.TOOL_CALL,
            ),
            ToolInvocation(call_id, name, {}, provider_executed=True),
        )
    ],
    ResponseEnd(finish_reason="stop"),
]
"""xAI's x_search steps: provider-executed calls whose results the response does not carry."""


def test_ag_ui_client_leaves_no_provider_executed_call_to_the_client() -> None:
    result = node_results()["agui"]["x_search"]
    assert result["clientErrors"] == []
    assert result["pendingToolCallIds"] == []
    assert [
        (message["role"], message.get("content"), [call["id"] for call in message.get("toolCalls", [])])
        for message in result["messages"]
    ] == [
        ("assistant", "Searching X.", ["xs_call_1", "xs_call_2"]),
        ("tool", NO_RESULT, []),
        ("tool", NO_RESULT, []),
    ]


def client_calls(events: list[PipelineEvent]) -> list[str]:
    """The ids of the calls the client must run: every tool call but the provider-executed ones."""
    return [
        event.segment_id
        for event in events
        if isinstance(event, SegmentEvent)
        and event.event_type is SegmentEventType.START
        and event.segment_type in TOOL_SEGMENTS
        and not event.metadata.get("provider_executed")
    ]


@pytest.mark.parametrize("path", PATHS, ids=by_name)
def test_ag_ui_client_makes_one_assistant_message_and_leaves_only_client_calls(path: Path) -> None:
    result = node_results()["agui"][path.name]
    events, error = recorded(path)
    assert result["clientErrors"] == []
    with_calls = [message for message in result["messages"] if message.get("toolCalls")]
    assert len(with_calls) <= 1  # every call of the response in one assistant message
    if error is None:
        assert result["pendingToolCallIds"] == client_calls(events)


# -- AG-UI in Python ----------------------------------------------------------------------------------


def agui_view(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What an AG-UI client rebuilds: text and reasoning messages (with the reasoning's encrypted value),
    tool calls with their parsed arguments (None when the call failed) and whether a result came."""
    parts: list[tuple[Any, ...]] = []
    where: dict[str, int] = {}
    pieces: dict[str, list[str]] = {}
    for event in events:
        kind = event["type"]
        if kind in ("TEXT_MESSAGE_START", "REASONING_MESSAGE_START"):
            where[event["messageId"]] = len(parts)
            pieces[event["messageId"]] = []
            parts.append(("text" if kind == "TEXT_MESSAGE_START" else "reasoning", "", None))
        elif kind in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT", "TOOL_CALL_ARGS"):
            assert event["delta"], "AG-UI forbids empty deltas"
            pieces[event.get("messageId") or event["toolCallId"]].append(event["delta"])
        elif kind in ("TEXT_MESSAGE_END", "REASONING_MESSAGE_END"):
            index = where[event["messageId"]]
            parts[index] = (parts[index][0], "".join(pieces[event["messageId"]]), None)
        elif kind == "REASONING_ENCRYPTED_VALUE" and event["subtype"] == "message":
            index = where[event["entityId"]]
            if parts[index][2] is None:  # the signature comes first, then any encrypted content
                parts[index] = (parts[index][0], parts[index][1], event["encryptedValue"])
        elif kind == "TOOL_CALL_START":
            where[event["toolCallId"]] = len(parts)
            pieces[event["toolCallId"]] = []
            parts.append(("tool", event["toolCallId"], event["toolCallName"], "open", False))
        elif kind == "TOOL_CALL_END":
            index = where[event["toolCallId"]]
            try:  # a failed call's raw text need not parse: its CUSTOM error follows
                arguments = json.loads("".join(pieces[event["toolCallId"]]) or "{}")
            except ValueError:
                arguments = None
            parts[index] = (*parts[index][:3], arguments, False)
        elif kind == "CUSTOM" and event["name"] == "streamfold.tool_call_error":
            index = where[event["value"]["toolCallId"]]
            parts[index] = (*parts[index][:3], None, False)
        elif kind == "TOOL_CALL_RESULT" and event["toolCallId"] in where:
            index = where[event["toolCallId"]]
            parts[index] = (*parts[index][:4], True)
    return parts


def agui_expected(events: list[PipelineEvent]) -> list[tuple[Any, ...]]:
    """The folded view in :func:`agui_view`'s terms."""
    view: list[tuple[Any, ...]] = []
    results = {
        event.metadata.get("call_id")
        for event in events
        if isinstance(event, SegmentEvent)
        and event.event_type is SegmentEventType.END
        and event.segment_type is SegmentType.TOOL_RESULT
    }
    for part in folded_view(events):
        if part[0] != "tool":
            view.append(part)
            continue
        _, call_id, name, state, input_ = part
        arguments = input_ if state in ("input-available", "output-available") else None
        if state == "output-error" and call_id in results:
            arguments = input_
        view.append(
            ("tool", call_id, name, "open" if state == "input-streaming" else arguments, call_id in results)
        )
    return view


@pytest.mark.parametrize("path", PATHS, ids=by_name)
def test_agui_events_validate_and_rebuild_streamfolds_view(path: Path) -> None:
    models = pytest.importorskip(
        "ag_ui.core", reason="ag-ui-protocol is not installed (the test extra has it)"
    )
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(models.Event)
    body = encode(path, "agui")
    frames = [json.loads(block.removeprefix("data: ")) for block in body.split("\n\n") if block]
    for frame in frames:
        adapter.validate_python(frame)
    events, error = recorded(path)
    assert frames[0]["type"] == "RUN_STARTED"
    assert frames[-1]["type"] == ("RUN_FINISHED" if error is None else "RUN_ERROR")
    assert agui_view(frames) == agui_expected(events)


@pytest.mark.parametrize("after_end", [False, True], ids=["inline", "after-end"])
def test_useChat_shows_the_eager_runners_outputs(after_end: bool) -> None:
    result = node_results()["vercel"][f"agent:{after_end}"]
    assert result["errors"] == []
    assert result["extraKeys"] == []
    tools = [part for part in result["message"]["parts"] if part["type"].startswith("tool-")]
    assert [(part["type"], part["state"], part.get("output"), part.get("errorText")) for part in tools] == [
        ("tool-add", "output-available", {"sum": 5}, None),
        ("tool-multiply", "output-error", None, "error: boom"),
    ]
    assert [part["input"] for part in tools] == [{"a": 2, "b": 3}, {"a": 2, "b": 3}]
    agui = node_results()["agui"][f"agent:{after_end}"]
    assert agui["errors"] == []
    results = [event for event in agui["events"] if event["type"] == "TOOL_CALL_RESULT"]
    assert [(event["toolCallId"], event["content"]) for event in results] == [
        (tools[0]["toolCallId"], '{"sum":5}'),
        (tools[1]["toolCallId"], "boom"),
    ]

"""The Bedrock Converse next-turn builder on the Converse recordings, and its conversation check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from pipeline.agent import ToolOutput, assistant_turn, check_conversation
from pipeline.models import PipelineEvent
from pipeline.testing import replay
from tests.reference import FIXTURES, call_id_for
from tests.reference_converse import read_frames

FOLDER = FIXTURES / "bedrock_converse"


def events_of(path: Path) -> list[PipelineEvent]:
    async def run() -> list[PipelineEvent]:
        return await replay(path, id_factory=call_id_for)

    return anyio.run(run)


def wire_deltas(path: Path, key: str) -> list[Any]:
    """Every ``reasoningContent[key]`` of the recording's deltas, read from the frames."""
    return [
        body["delta"]["reasoningContent"][key]
        for name, body in read_frames(path.read_bytes())
        if name == "contentBlockDelta" and key in body["delta"].get("reasoningContent", {})
    ]


def test_a_server_tool_its_result_and_a_client_call() -> None:
    turn = assistant_turn(
        events_of(FOLDER / "pydantic-ai_nova-2-lite_server_code_interpreter_then_tool_use.eventstream.bin"),
        "bedrock_converse",
    )
    server, client = "tooluse_VQNZJRUFMoqZzszVsRd4og", "tooluse_ptgCcZ0uQu-UUMz0abqoWw"
    result = {"stdOut": "7006652", "stdErr": "", "exitCode": 0, "isError": False}
    assert turn.messages == [
        {
            "role": "assistant",
            "content": [
                {
                    "toolUse": {
                        "toolUseId": server,
                        "name": "nova_code_interpreter",
                        "input": {"snippet": "1234 * 5678"},
                        "type": "server_tool_use",
                    }
                },
                {
                    "toolResult": {
                        "toolUseId": server,
                        "content": [{"json": result}],
                        "status": "success",
                        "type": "nova_code_interpreter_result",
                    }
                },
                {"toolUse": {"toolUseId": client, "name": "final_result", "input": {"result": 7006652.0}}},
            ],
        }
    ]
    assert [call.id for call in turn.invocations] == [client]
    answers = turn.tool_results([ToolOutput(call_id=client, output="bad", status="error")])
    assert answers == [
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": client, "content": [{"text": "bad"}], "status": "error"}}
            ],
        }
    ]
    assert turn.tool_results({client: {"ok": 1}})[0]["content"][0]["toolResult"]["content"] == [
        {"json": {"ok": 1}}
    ]
    conversation = [{"role": "user", "content": [{"text": "1234 * 5678?"}]}, *turn.messages, *answers]
    assert check_conversation(conversation, "bedrock_converse") == []


def test_signed_reasoning_goes_back_with_its_signature() -> None:
    path = FOLDER / "pydantic-ai_claude-sonnet-4_reasoning_signature_text.eventstream.bin"
    (message,) = assistant_turn(events_of(path), "bedrock_converse").messages
    (signature,) = wire_deltas(path, "signature")
    assert message["content"] == [
        {
            "reasoningContent": {
                "reasoningText": {"text": "".join(wire_deltas(path, "text")), "signature": signature}
            }
        },
        {"text": "Hello! It's nice to meet you. How can I help you today?"},
    ]


def test_redacted_reasoning_goes_back_as_its_base64_text_one_block_each() -> None:
    path = FOLDER / "pydantic-ai_claude-3-7-sonnet_redacted_reasoning_text.eventstream.bin"
    (message,) = assistant_turn(events_of(path), "bedrock_converse").messages
    redacted = wire_deltas(path, "redactedContent")
    assert len(redacted) == 2
    assert message["content"][:2] == [{"reasoningContent": {"redactedContent": data}} for data in redacted]
    assert list(message["content"][2]) == ["text"]


def test_unsigned_reasoning_goes_back_as_text() -> None:
    path = FOLDER / "pydantic-ai_gpt-oss-120b_empty_text_reasoning_text.eventstream.bin"
    (message,) = assistant_turn(events_of(path), "bedrock_converse").messages
    assert message["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "".join(wire_deltas(path, "text"))}}},
        {"text": "Hello! How can I help you today?"},
    ]


def test_another_providers_signature_is_dropped() -> None:
    events = events_of(FIXTURES / "anthropic" / "fantasy_claude-sonnet-4_thinking_then_tool_use.sse")
    turn = assistant_turn(events, "bedrock_converse", source="anthropic")
    reasoning = turn.messages[0]["content"][0]["reasoningContent"]["reasoningText"]
    assert list(reasoning) == ["text"]
    assert {dropped.what for dropped in turn.dropped} == {"signature"}


@pytest.mark.parametrize(
    ("conversation", "rules"),
    [
        (
            [
                {"role": "assistant", "content": [{"toolUse": {"toolUseId": "a", "name": "f", "input": {}}}]},
                {"role": "user", "content": [{"text": "never mind"}]},
            ],
            [("messages[0].content[0]", "unanswered_call")],
        ),
        (
            [{"role": "user", "content": [{"toolResult": {"toolUseId": "b", "content": [{"text": "x"}]}}]}],
            [("messages[0].content[0]", "orphan_result")],
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": [
                        {"toolUse": {"toolUseId": "s", "name": "f", "input": {}, "type": "server_tool_use"}}
                    ],
                }
            ],
            [],
        ),
    ],
)
def test_the_conversation_check_names_unanswered_calls_and_orphan_results(
    conversation: list[dict[str, Any]], rules: list[tuple[str, str]]
) -> None:
    violations = check_conversation(conversation, "bedrock_converse")
    assert [(violation.position, violation.rule) for violation in violations] == rules

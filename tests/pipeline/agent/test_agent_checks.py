"""Conversations checked against each provider's rules, repaired where that is safe, and next turns built
for another provider than the one that answered (checked against the SDKs' request types)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from anthropic.types.beta import BetaMessageParam
from google.genai import types as genai_types
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

from pipeline.agent import (
    SKIP_THOUGHT_SIGNATURE,
    Dropped,
    TurnBuilder,
    Violation,
    assistant_turn,
    check_conversation,
    reasoning_content_rule,
    repair_conversation,
)
from pipeline.errors import ConfigurationError
from pipeline.models import PipelineEvent
from pipeline.testing import replay
from tests.reference import FIXTURES, call_id_for

CHAT = TypeAdapter(list[ChatCompletionMessageParam])
RESPONSES = TypeAdapter(list[ResponseInputItemParam])
ANTHROPIC = TypeAdapter(list[BetaMessageParam])


def events_of(path: Path) -> list[PipelineEvent]:
    async def run() -> list[PipelineEvent]:
        return await replay(path, id_factory=call_id_for)

    return anyio.run(run)


def sdk_accepts(adapter: TypeAdapter[Any], value: Any) -> bool:
    """The SDK's request type takes ``value``: validation (iterables included, by dumping) raises if not."""
    return bool(adapter.dump_json(adapter.validate_python(value)))


def rules(violations: list[Violation]) -> list[tuple[str, str, bool]]:
    return [(v.position, v.rule, v.fixed) for v in violations]


# --------------------------------------------------------------------------------------------------
# OpenAI Chat


CHAT_LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": "weather in Paris and Rome?"},
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "two cities, two calls",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"c":"Paris"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"c":"Rome"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "18C"},
]


def test_a_chat_call_without_its_result_is_named_where_it_was_made() -> None:
    violations = check_conversation(CHAT_LOOP, "openai_chat")
    assert violations == [
        Violation(
            position="messages[1].tool_calls[1]",
            rule="unanswered_call",
            message="the call 'call_b' has no result before the next message",
        )
    ]
    answered = [*CHAT_LOOP, {"role": "tool", "tool_call_id": "call_b", "content": "21C"}]
    assert check_conversation(answered, "openai_chat") == []
    assert check_conversation(
        [*answered, {"role": "tool", "tool_call_id": "call_z", "content": "?"}], "openai_chat"
    ) == [
        Violation(
            position="messages[4]",
            rule="orphan_result",
            message="a tool result for 'call_z', which no open call made",
        )
    ]


def test_a_chat_result_after_the_next_user_message_does_not_answer_the_call() -> None:
    late = [*CHAT_LOOP[:2], {"role": "user", "content": "?"}, *CHAT_LOOP[2:]]
    assert rules(check_conversation(late, "openai_chat")) == [
        ("messages[1].tool_calls[0]", "unanswered_call", False),
        ("messages[1].tool_calls[1]", "unanswered_call", False),
        ("messages[3]", "orphan_result", False),
    ]


def test_reasoning_content_is_removed_for_a_model_that_refuses_it_and_required_by_one_that_needs_it() -> None:
    answered = [*CHAT_LOOP, {"role": "tool", "tool_call_id": "call_b", "content": "21C"}]
    repair = repair_conversation(answered, "openai_chat", reasoning_content="forbidden")
    assert rules(repair.violations) == [
        ("messages[1].reasoning_content", "reasoning_content_forbidden", True)
    ]
    assert repair.remaining == []
    assert "reasoning_content" not in repair.messages[1]
    assert "reasoning_content" in answered[1]  # the caller's messages are not changed
    assert sdk_accepts(CHAT, repair.messages)
    lost = [dict(message) for message in answered]
    del lost[1]["reasoning_content"]
    assert rules(check_conversation(lost, "openai_chat", reasoning_content="required")) == [
        ("messages[1]", "reasoning_content_missing", False)
    ]
    assert check_conversation(answered, "openai_chat", reasoning_content="required") == []


@pytest.mark.parametrize(
    ("model", "rule"),
    [
        ("deepseek-reasoner", "forbidden"),
        ("deepseek-ai/DeepSeek-R1", "forbidden"),
        ("kimi-k2-thinking", "required"),
        ("moonshotai/Kimi-K2-Thinking", "required"),
        ("deepseek-v3.2-thinking", "required"),
        ("gpt-4o-mini", None),
        ("kimi-k2-instruct", None),
    ],
)
def test_the_reasoning_content_rule_is_told_from_the_model_name(model: str, rule: str | None) -> None:
    assert reasoning_content_rule(model) == rule


# --------------------------------------------------------------------------------------------------
# Anthropic


def anthropic_loop() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "list the repo"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should look", "signature": "sig=="},
                {"type": "text", "text": ""},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}},
                {"type": "tool_use", "id": "functions.read:1", "name": "read", "input": {"path": "a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "here you go"},
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a b"},
                {"type": "tool_result", "tool_use_id": "functions.read:1", "content": "x"},
            ],
        },
    ]


def test_anthropic_rules_are_named_and_the_safe_ones_fixed() -> None:
    conversation = anthropic_loop()
    assert rules(check_conversation(conversation, "anthropic", thinking=True)) == [
        ("messages[1].content[3]", "tool_use_id", False),
        ("messages[1].content[1]", "empty_text", False),
        ("messages[2].content[0]", "results_not_first", False),
    ]
    repair = repair_conversation(conversation, "anthropic", thinking=True)
    assert repair.remaining == []
    assert repair.messages[1]["content"] == [
        {"type": "thinking", "thinking": "I should look", "signature": "sig=="},
        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}},
        {"type": "tool_use", "id": "functions_read_1_0", "name": "read", "input": {"path": "a"}},
    ]
    assert repair.messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a b"},
        {"type": "tool_result", "tool_use_id": "functions_read_1_0", "content": "x"},
        {"type": "text", "text": "here you go"},
    ]
    assert sdk_accepts(ANTHROPIC, repair.messages)
    assert check_conversation(repair.messages, "anthropic", thinking=True) == []


def test_unsigned_thinking_is_dropped_and_then_thinking_no_longer_opens_the_tool_loop() -> None:
    conversation = anthropic_loop()
    del conversation[1]["content"][0]["signature"]
    repair = repair_conversation(conversation, "anthropic", thinking=True)
    assert [(v.position, v.rule) for v in repair.remaining] == [
        ("messages[1].content[0]", "thinking_not_first")
    ]
    assert ("messages[1].content[0]", "unsigned_thinking", True) in rules(repair.violations)
    assert [block["type"] for block in repair.messages[1]["content"]] == ["tool_use", "tool_use"]
    assert rules(check_conversation(conversation, "anthropic"))[:1] == [
        ("messages[1].content[3]", "tool_use_id", False)
    ]


def test_anthropic_calls_must_be_answered_in_the_next_message_and_roles_are_two() -> None:
    conversation = [
        *anthropic_loop()[:2],
        {"role": "user", "content": "go on"},
        {"role": "system", "content": "x"},
    ]
    assert rules(check_conversation(conversation, "anthropic")) == [
        ("messages[1].content[3]", "tool_use_id", False),
        ("messages[1].content[1]", "empty_text", False),
        ("messages[1].content[2]", "unanswered_call", False),
        ("messages[1].content[3]", "unanswered_call", False),
        ("messages[3].role", "role", False),
    ]


# --------------------------------------------------------------------------------------------------
# OpenAI Responses


def test_responses_reasoning_items_need_an_id_and_with_store_false_their_encrypted_content() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "summary": []},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "item_reference", "id": "ws_1"},
        {"type": "function_call_output", "call_id": "call_2", "output": "?"},
    ]
    assert rules(check_conversation(items, "openai_responses", store=False)) == [
        ("messages[1]", "reasoning_without_id", False),
        ("messages[2]", "reasoning_without_encrypted_content", False),
        ("messages[4]", "item_reference_without_store", False),
        ("messages[5]", "orphan_result", False),
        ("messages[3]", "unanswered_call", False),
    ]
    repair = repair_conversation(items, "openai_responses")
    assert rules(repair.violations) == [
        ("messages[1]", "reasoning_without_id", True),
        ("messages[5]", "orphan_result", False),
        ("messages[3]", "unanswered_call", False),
    ]
    assert [item.get("type") for item in repair.messages] == [
        None,
        "reasoning",
        "function_call",
        "item_reference",
        "function_call_output",
    ]


def test_a_responses_reasoning_item_must_be_followed_by_its_output_item() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]
    assert rules(check_conversation(items, "openai_responses")) == [
        ("messages[1]", "reasoning_without_following_item", False)
    ]


# --------------------------------------------------------------------------------------------------
# Gemini


def gemini_history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"output": "sun"}}}]},
        {"role": "user", "parts": [{"text": "and tomorrow?"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "forecast", "args": {}}},
                {"functionCall": {"name": "alerts", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "forecast", "response": {"output": "rain"}}}],
        },
    ]


def test_gemini_signatures_are_required_in_the_running_turn_only_and_given_the_sentinel() -> None:
    history = gemini_history()
    assert rules(check_conversation(history, "gemini", thought_signatures=True)) == [
        ("contents[4].parts[0]", "missing_thought_signature", False),
        ("contents[4].parts[1]", "unanswered_call", False),
    ]
    repair = repair_conversation(history, "gemini", thought_signatures=True)
    assert repair.messages[4]["parts"][0]["thoughtSignature"] == SKIP_THOUGHT_SIGNATURE
    assert "thoughtSignature" not in repair.messages[1]["parts"][0]  # an earlier turn: not required
    assert [v.rule for v in repair.remaining] == ["unanswered_call"]
    for content in repair.messages:
        genai_types.Content.model_validate(content)
    assert rules(check_conversation(history, "gemini")) == [
        ("contents[4].parts[1]", "unanswered_call", False)
    ]


def test_a_gemini_response_for_no_call_and_an_unknown_role_are_named() -> None:
    history = [
        {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {}}}]},
        {"role": "assistant", "parts": [{"text": "hi"}]},
    ]
    assert rules(check_conversation(history, "gemini")) == [
        ("contents[0].parts[0]", "orphan_result", False),
        ("contents[1].role", "role", False),
    ]


def test_an_unknown_target_and_a_message_that_is_not_an_object_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="target must be one of openai_chat, openai_responses"):
        check_conversation([], "bedrock")
    with pytest.raises(ConfigurationError, match=r"^message 1 is a str, not an object$"):
        check_conversation([{"role": "user", "content": "hi"}, "hello"], "openai_chat")


# --------------------------------------------------------------------------------------------------
# The builder's check, and turns for another provider


def test_the_builder_checks_a_conversation_in_its_own_format() -> None:
    assert TurnBuilder("openai_chat").check(CHAT_LOOP) == check_conversation(CHAT_LOOP, "openai_chat") != []
    assert TurnBuilder("gemini").check(gemini_history(), thought_signatures=True)[0].rule == (
        "missing_thought_signature"
    )


ANTHROPIC_THINKING = FIXTURES / "anthropic" / "dive_claude-3-7-sonnet_thinking_signature_text.jsonl"
GEMINI_THOUGHTS = FIXTURES / "gemini" / "fantasy_gemini-2.5-flash_thought_summary_then_function_call.sse"
GEMINI_SIGNED_CALL = FIXTURES / "gemini" / "fantasy_gemini-3.1-pro_function_call_id_signature_thinking.sse"


def test_an_anthropic_answer_goes_to_gemini_without_its_signature_and_says_so() -> None:
    events = events_of(ANTHROPIC_THINKING)
    same = assistant_turn(events, "anthropic")
    assert same.dropped == ()
    turn = assistant_turn(events, "gemini", source="anthropic")
    (content,) = turn.messages
    genai_types.Content.model_validate(content)
    assert all("thoughtSignature" not in part for part in content["parts"])
    assert [part.get("thought", False) for part in content["parts"]] == [True, False]
    reasoning_id = next(d.segment_id for d in turn.dropped)
    assert turn.dropped == (
        Dropped(reasoning_id, "signature", "anthropic's signature means nothing to gemini"),
    )
    assert check_conversation([{"role": "user", "parts": [{"text": "hi"}]}, content], "gemini") == []


def test_an_anthropic_answer_goes_to_openai_chat_and_its_thinking_is_dropped_unless_a_key_carries_it() -> (
    None
):
    events = events_of(ANTHROPIC_THINKING)
    turn = assistant_turn(events, "openai_chat", source="anthropic")
    assert [d.what for d in turn.dropped] == ["signature", "reasoning"]
    assert turn.dropped[1].why == "OpenAI Chat takes reasoning back only under a reasoning_key"
    assert sdk_accepts(CHAT, turn.messages)
    kept = assistant_turn(events, "openai_chat", source="anthropic", reasoning_key="reasoning_content")
    assert [d.what for d in kept.dropped] == ["signature"]
    assert kept.messages[0]["reasoning_content"]


def test_a_gemini_answer_with_ids_and_signatures_goes_to_anthropic_and_to_responses() -> None:
    events = events_of(GEMINI_SIGNED_CALL)
    to_anthropic = assistant_turn(events, "anthropic", source="gemini")
    assert sdk_accepts(ANTHROPIC, to_anthropic.messages)
    blocks = to_anthropic.messages[0]["content"]
    assert [block["type"] for block in blocks] == ["tool_use"]
    assert [(d.what, d.why) for d in to_anthropic.dropped] == [
        ("signature", "gemini's signature means nothing to anthropic")
    ]
    outputs = [(call.id, "ok") for call in to_anthropic.invocations]
    conversation = [
        {"role": "user", "content": "go"},
        *to_anthropic.messages,
        *to_anthropic.tool_results(outputs),
    ]
    assert check_conversation(conversation, "anthropic") == []
    to_responses = assistant_turn(events, "openai_responses", source="gemini")
    assert sdk_accepts(RESPONSES, to_responses.messages)
    assert [item["type"] for item in to_responses.messages] == ["function_call"]
    assert [d.what for d in to_responses.dropped] == ["signature"]
    answered = [*to_responses.messages, *to_responses.tool_results(outputs)]
    assert check_conversation(answered, "openai_responses") == []


def test_gemini_thoughts_are_dropped_where_the_target_needs_them_signed_or_named() -> None:
    events = events_of(GEMINI_THOUGHTS)
    to_anthropic = assistant_turn(events, "anthropic", source="gemini")
    assert ("reasoning", "Anthropic refuses a thinking block without its signature") in [
        (d.what, d.why) for d in to_anthropic.dropped
    ]
    assert [block["type"] for block in to_anthropic.messages[0]["content"]] == ["tool_use"]
    to_responses = assistant_turn(events, "openai_responses", source="gemini")
    assert ("reasoning", "a Responses reasoning item needs the id OpenAI gave it") in [
        (d.what, d.why) for d in to_responses.dropped
    ]
    assert [item["type"] for item in to_responses.messages] == ["function_call"]


def test_calls_of_another_provider_go_to_gemini_without_their_ids() -> None:
    path = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"
    turn = assistant_turn(events_of(path), "gemini", source="openai_chat")
    calls = [part["functionCall"] for part in turn.messages[0]["parts"]]
    assert [sorted(call) for call in calls] == [["args", "name"], ["args", "name"]]
    results = turn.tool_results([(call.id, {"t": 1}) for call in turn.invocations])
    assert all("id" not in part["functionResponse"] for part in results[0]["parts"])
    assert json.dumps(results)  # plain JSON


def test_a_source_that_is_not_a_wire_format_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="source must be one of"):
        TurnBuilder("gemini", source="bedrock")

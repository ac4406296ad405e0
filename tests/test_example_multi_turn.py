"""The multi-turn example against its fake provider on 127.0.0.1: the second request, exactly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from anthropic.types import MessageParam
from pydantic import TypeAdapter

EXAMPLE = Path(__file__).parent.parent / "examples" / "multi_turn.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_multi_turn", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.anyio
async def test_the_second_request_carries_the_model_turn_and_the_tool_result() -> None:
    example = load()
    server, messages = await example.main()
    first, second = server.requests
    question = {"role": "user", "content": "What's the weather in San Francisco?"}
    assert first["messages"] == [question]
    call_id = "toolu_018acGYLtfR52q9yDbWaEdQZ"
    assert second == {
        "model": "claude-haiku-4-5",
        "max_tokens": 1024,
        "stream": True,
        "tools": example.TOOLS_SCHEMA,
        "messages": [
            question,
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": call_id,
                        "name": "get_weather",
                        "input": {"location": "San Francisco, CA", "units": "f"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "content": '{"location": "San Francisco, CA", "temperature": 68, "units": "f"}',
                    }
                ],
            },
        ],
    }
    for message in second["messages"]:
        TypeAdapter(MessageParam).validate_python(message)
    assert messages[-1]["content"][0]["text"].startswith("The weather in San Francisco, CA is currently:")
    assert len(messages) == 4

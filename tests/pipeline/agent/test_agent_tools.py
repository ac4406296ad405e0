"""The tool registry: schemas from signatures or pydantic models, options checked, sync and async calls."""

from __future__ import annotations

import threading
from typing import Literal

import pydantic
import pytest

from pipeline.agent import ToolRegistry
from pipeline.errors import ConfigurationError
from pipeline.models import ToolOutput


class Move(pydantic.BaseModel):
    source: str
    target: str
    overwrite: bool = False


def test_the_schema_comes_from_the_signature() -> None:
    tools = ToolRegistry()

    @tools.tool(read_only=True, timeout=2.5)
    async def get_weather(location: str, unit: Literal["c", "f"] = "c") -> str:
        """The current weather in a city."""
        return location

    tool = tools["get_weather"]
    assert (tool.read_only, tool.timeout, tool.takes_model, tool.is_async) == (True, 2.5, False, True)
    assert tool.definition() == {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "properties": {
                "location": {"title": "Location", "type": "string"},
                "unit": {"default": "c", "enum": ["c", "f"], "title": "Unit", "type": "string"},
            },
            "required": ["location"],
            "title": "get_weather_arguments",
            "type": "object",
        },
    }
    assert tool.validate({"location": "Paris"}).model_dump() == {"location": "Paris", "unit": "c"}
    with pytest.raises(pydantic.ValidationError):
        tool.validate({"location": "Paris", "unit": "k"})
    assert get_weather.__name__ == "get_weather"  # the decorator returns the function unchanged


@pytest.mark.anyio
async def test_a_pydantic_model_parameter_is_the_schema_and_receives_the_model() -> None:
    tools = ToolRegistry()
    received: list[Move] = []

    @tools.tool
    def move(arguments: Move) -> str:
        received.append(arguments)
        return "moved"

    tool = tools["move"]
    assert tool.arguments is Move
    assert tool.takes_model
    assert not tool.read_only
    assert not tool.is_async
    assert await tool.call(tool.validate({"source": "a", "target": "b"})) == "moved"
    assert received == [Move(source="a", target="b")]
    assert tools.schemas() == {"move": Move}


@pytest.mark.anyio
async def test_a_sync_tool_runs_in_a_worker_thread() -> None:
    tools = ToolRegistry()
    threads: list[int] = []

    @tools.tool(name="where")
    def where_am_i() -> int:
        threads.append(threading.get_ident())
        return 1

    tool = tools["where"]
    assert await tool.call(tool.validate({})) == 1
    assert threads != [threading.get_ident()]


def test_bad_registrations_are_configuration_errors() -> None:
    tools = ToolRegistry()

    @tools.tool
    def once() -> None: ...

    with pytest.raises(ConfigurationError, match="already registered"):
        tools.add(once)
    with pytest.raises(ConfigurationError, match="timeout must be a positive number"):
        tools.add(lambda: None, name="t", timeout=0)
    with pytest.raises(ConfigurationError, match="must be passable by keyword"):
        tools.add(lambda *paths: None, name="star")
    with pytest.raises(ConfigurationError, match="must be a function"):
        tools.add("not a function")  # type: ignore[arg-type]
    assert [tool.name for tool in tools] == ["once"]
    assert len(tools) == 1
    assert "once" in tools


def test_tool_output_serialises_as_tool_output() -> None:
    ok = ToolOutput(call_id="c1", name="add", output={"sum": 5})
    failed = ToolOutput(call_id="c2", name="add", status="timeout", output="tool 'add' timed out after 1 s")
    assert ok.to_dict() == {
        "type": "TOOL_OUTPUT",
        "call_id": "c1",
        "name": "add",
        "status": "ok",
        "output": {"sum": 5},
    }
    assert (ok.text, ok.is_error) == ('{"sum":5}', False)
    assert (failed.text, failed.is_error) == ("tool 'add' timed out after 1 s", True)

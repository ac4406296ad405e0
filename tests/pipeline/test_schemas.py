from __future__ import annotations

import pydantic
import pytest

from pipeline.errors import ConfigurationError
from pipeline.seeds.schemas import (
    AnthropicJsonSchemaFormatter,
    GeminiJsonSchemaFormatter,
    OpenAiJsonSchemaFormatter,
    ToolDefinition,
    anthropic_tool,
    gemini_tool,
    openai_responses_tool,
    openai_tool,
)


class Location(pydantic.BaseModel):
    city: str
    country: str | None = None


class GetWeather(pydantic.BaseModel):
    """Current weather for a place."""

    location: Location
    unit: str = "celsius"


WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def test_openai_and_anthropic_shapes() -> None:
    assert openai_tool(WEATHER) == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather",
            "parameters": WEATHER.parameters,
        },
    }
    assert openai_responses_tool(WEATHER) == {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather",
        "parameters": WEATHER.parameters,
    }
    assert anthropic_tool(WEATHER) == {
        "name": "get_weather",
        "description": "Current weather",
        "input_schema": WEATHER.parameters,
    }
    assert OpenAiJsonSchemaFormatter().provide(WEATHER) == openai_tool(WEATHER)
    assert AnthropicJsonSchemaFormatter().provide(WEATHER) == anthropic_tool(WEATHER)


def test_from_pydantic_model_takes_name_and_docstring() -> None:
    tool = ToolDefinition.from_model(GetWeather)
    assert tool.name == "get_weather"
    assert tool.description == "Current weather for a place."
    assert tool.parameters["required"] == ["location"]
    assert "$defs" in tool.parameters


def test_gemini_inlines_refs_and_drops_unsupported_keywords() -> None:
    declaration = GeminiJsonSchemaFormatter().provide(GetWeather)
    parameters = declaration["parameters"]
    assert "$defs" not in parameters
    location = parameters["properties"]["location"]
    assert location["type"] == "object"
    assert set(location["properties"]) == {"city", "country"}
    assert "title" not in location
    assert "default" not in parameters["properties"]["unit"]
    assert gemini_tool(WEATHER)["parameters"] == WEATHER.parameters


def test_recursive_models_are_refused_for_gemini() -> None:
    class Node(pydantic.BaseModel):
        children: list[Node] = []

    with pytest.raises(ConfigurationError, match="recursive"):
        gemini_tool(ToolDefinition.from_model(Node))


def test_bad_names_are_rejected() -> None:
    with pytest.raises(pydantic.ValidationError):
        ToolDefinition(name="has space")

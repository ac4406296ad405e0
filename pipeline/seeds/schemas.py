"""Tool schemas for the providers' ``tools`` parameters, from one tool definition or a pydantic model.

::

    class GetWeather(BaseModel):
        \"\"\"Current weather for a city.\"\"\"
        city: str

    tool = ToolDefinition.from_model(GetWeather, name="get_weather")
    openai_tool(tool)     # {"type": "function", "function": {"name": ..., "parameters": {...}}}
    anthropic_tool(tool)  # {"name": ..., "description": ..., "input_schema": {...}}
    gemini_tool(tool)     # {"name": ..., "parameters": {...}}  ($refs inlined, no unsupported keywords)

The seeds' formatter classes (``OpenAiJsonSchemaFormatter().provide(tool)`` and its Anthropic and Gemini
siblings) are kept as thin wrappers.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pydantic

from pipeline.errors import ConfigurationError

__all__ = [
    "AnthropicJsonSchemaFormatter",
    "GeminiJsonSchemaFormatter",
    "OpenAiJsonSchemaFormatter",
    "OpenAiResponsesJsonSchemaFormatter",
    "ToolDefinition",
    "anthropic_tool",
    "gemini_tool",
    "openai_responses_tool",
    "openai_tool",
]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_GEMINI_DROPPED = frozenset({"additionalProperties", "$schema", "title", "examples", "default", "const"})


class ToolDefinition(pydantic.BaseModel):
    """A tool as the model sees it: a name, what it does, and the JSON schema of its arguments."""

    model_config = pydantic.ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = pydantic.Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool = False
    """Ask OpenAI for strict (schema-constrained) arguments."""

    @pydantic.field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        if not _NAME.match(name):
            raise ValueError(f"tool name {name!r} must be 1-64 letters, digits, '_' or '-'")
        return name

    @classmethod
    def from_model(
        cls, model: type[pydantic.BaseModel], *, name: str | None = None, description: str | None = None
    ) -> ToolDefinition:
        """The definition of a tool whose arguments are a pydantic model.

        Args:
            model: the arguments' model.
            name: the tool's name; None: the model's class name in snake case.
            description: what the model reads; None: the model's docstring.
        """
        schema = model.model_json_schema()
        schema.pop("title", None)
        text = description if description is not None else schema.pop("description", "") or ""
        schema.pop("description", None)
        return cls(name=name or _snake(model.__name__), description=text, parameters=schema)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _definition(tool: ToolDefinition | type[pydantic.BaseModel]) -> ToolDefinition:
    if isinstance(tool, ToolDefinition):
        return tool
    if isinstance(tool, type) and issubclass(tool, pydantic.BaseModel):
        return ToolDefinition.from_model(tool)
    raise ConfigurationError(f"expected a ToolDefinition or a pydantic model class, got {tool!r}")


def openai_tool(tool: ToolDefinition | type[pydantic.BaseModel]) -> dict[str, Any]:
    """The Chat Completions ``tools`` entry."""
    definition = _definition(tool)
    function: dict[str, Any] = {"name": definition.name, "parameters": definition.parameters}
    if definition.description:
        function["description"] = definition.description
    if definition.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def openai_responses_tool(tool: ToolDefinition | type[pydantic.BaseModel]) -> dict[str, Any]:
    """The Responses API ``tools`` entry (flat: no nested ``function``)."""
    return {"type": "function", **openai_tool(tool)["function"]}


def anthropic_tool(tool: ToolDefinition | type[pydantic.BaseModel]) -> dict[str, Any]:
    """The Anthropic Messages ``tools`` entry."""
    definition = _definition(tool)
    result: dict[str, Any] = {"name": definition.name, "input_schema": definition.parameters}
    if definition.description:
        result["description"] = definition.description
    return result


def gemini_tool(tool: ToolDefinition | type[pydantic.BaseModel]) -> dict[str, Any]:
    """A Gemini ``functionDeclarations`` entry: ``$ref``s inlined, keywords Gemini rejects removed."""
    definition = _definition(tool)
    result: dict[str, Any] = {"name": definition.name, "parameters": _gemini_schema(definition.parameters)}
    if definition.description:
        result["description"] = definition.description
    return result


def _gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    definitions = schema.get("$defs", {})

    def resolve(node: Any, seen: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith("#/$defs/"):
            name = reference.removeprefix("#/$defs/")
            if name in seen:
                raise ConfigurationError(f"recursive schema {name!r} cannot be expressed for Gemini")
            merged = {**definitions.get(name, {}), **{k: v for k, v in node.items() if k != "$ref"}}
            return resolve(merged, seen | {name})
        result = {}
        for key, value in node.items():
            if key in _GEMINI_DROPPED or key == "$defs":
                continue
            if key == "properties" and isinstance(value, dict):
                result[key] = {name: resolve(child, seen) for name, child in value.items()}
            else:
                result[key] = resolve(value, seen)
        return result

    resolved: dict[str, Any] = resolve(copy.deepcopy(schema), frozenset())
    return resolved


class OpenAiJsonSchemaFormatter:
    """The seeds' formatter interface: ``provide(tool_definition) -> dict``."""

    def provide(self, tool_definition: ToolDefinition | type[pydantic.BaseModel]) -> dict[str, Any]:
        """The Chat Completions ``tools`` entry: `openai_tool`."""
        return openai_tool(tool_definition)


class OpenAiResponsesJsonSchemaFormatter:
    """The seeds' formatter interface, for OpenAI Responses."""

    def provide(self, tool_definition: ToolDefinition | type[pydantic.BaseModel]) -> dict[str, Any]:
        """The Responses API ``tools`` entry: `openai_responses_tool`."""
        return openai_responses_tool(tool_definition)


class AnthropicJsonSchemaFormatter:
    """The seeds' formatter interface, for Anthropic."""

    def provide(self, tool_definition: ToolDefinition | type[pydantic.BaseModel]) -> dict[str, Any]:
        """The Anthropic Messages ``tools`` entry: `anthropic_tool`."""
        return anthropic_tool(tool_definition)


class GeminiJsonSchemaFormatter:
    """The seeds' formatter interface, for Gemini."""

    def provide(self, tool_definition: ToolDefinition | type[pydantic.BaseModel]) -> dict[str, Any]:
        """A Gemini ``functionDeclarations`` entry: `gemini_tool`."""
        return gemini_tool(tool_definition)

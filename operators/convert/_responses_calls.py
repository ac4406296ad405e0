"""Which OpenAI Responses output items are tool calls, who runs them, and their arguments.

Kept apart from `operators.convert.openai_responses` (the event handling): a call item's kind, tool
name, first arguments and id depend only on the item and on the tools the response lists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

from operators.convert._base import is_mapping
from pipeline.models import ToolCallKind

CLIENT_BUILTIN_CALLS: Final[Mapping[str, str]] = {
    "local_shell_call": "local_shell",
    "shell_call": "shell",
    "computer_call": "computer",
    "apply_patch_call": "apply_patch",
}
"""Built-in tool items the client executes, and the tool name each becomes."""

SERVER_BUILTIN_CALLS: Final[Mapping[str, str]] = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_interpreter",
}
"""Built-in tool items the provider executes itself, and the tool name each becomes."""

RESULT_IN_ITEM: Final = frozenset({"mcp_call", *SERVER_BUILTIN_CALLS})
"""Provider-executed call items whose finished item carries the call's result."""

LOCAL_ENVIRONMENT: Final = "local"
"""The ``environment.type`` of a ``shell_call`` the client runs; any other names a hosted container."""

CallShape: TypeAlias = tuple[ToolCallKind, object, object, object]
"""(kind, tool name, arguments the item already carries, call id) of a call item, as the item gives them
(the caller checks their types)."""


def call_shape(
    item_type: str | None, raw: Mapping[str, Any], offered: frozenset[str] | None
) -> CallShape | None:
    """The call an output item of type ``item_type`` makes, or ``None`` if it makes none.

    ``offered`` holds the names of the tools the response lists (``None``: it lists none): a custom call
    to a tool not among them is a step the provider runs itself (xAI's ``x_search``).
    """
    if item_type is None:
        return None
    shaper = _SHAPERS.get(item_type)
    if shaper is not None:
        return shaper(raw, offered)
    if item_type in SERVER_BUILTIN_CALLS:
        return "server", SERVER_BUILTIN_CALLS[item_type], None, raw.get("id")
    if item_type in CLIENT_BUILTIN_CALLS:
        return "function", CLIENT_BUILTIN_CALLS[item_type], None, raw.get("call_id")
    return None


def _function_call(raw: Mapping[str, Any], offered: frozenset[str] | None) -> CallShape:
    return "function", raw.get("name"), raw.get("arguments"), raw.get("call_id")


def _custom_tool_call(raw: Mapping[str, Any], offered: frozenset[str] | None) -> CallShape:
    """A custom tool's call; one to a tool the response does not list is the provider's own step."""
    name = raw.get("name")
    kind: ToolCallKind = "custom" if offered is None or (type(name) is str and name in offered) else "server"
    return kind, name, raw.get("input"), raw.get("call_id")


def _mcp_call(raw: Mapping[str, Any], offered: frozenset[str] | None) -> CallShape:
    """An MCP call: the provider runs it, and it has no ``call_id`` but its item id."""
    return "server", raw.get("name"), raw.get("arguments"), raw.get("id")


def _shell_call(raw: Mapping[str, Any], offered: frozenset[str] | None) -> CallShape:
    """A shell call: the provider runs it in a hosted container, else the client runs it."""
    kind: ToolCallKind = "server" if is_hosted(raw) else "function"
    return kind, "shell", None, raw.get("call_id")


def _tool_search_call(raw: Mapping[str, Any], offered: frozenset[str] | None) -> CallShape | None:
    """A tool search is the client's call only when it runs there; the provider's own search is no call."""
    if raw.get("execution") != "client":
        return None
    return "function", "tool_search", None, raw.get("call_id")


_SHAPERS: Final[Mapping[str, Callable[[Mapping[str, Any], frozenset[str] | None], CallShape | None]]] = {
    "function_call": _function_call,
    "custom_tool_call": _custom_tool_call,
    "mcp_call": _mcp_call,
    "shell_call": _shell_call,
    "tool_search_call": _tool_search_call,
}
"""The call items whose shape needs more than the built-in tables: each one's reader."""


def is_hosted(raw: Mapping[str, Any]) -> bool:
    """Whether a ``shell_call`` item runs in the provider's container (its environment is not local)."""
    environment = raw.get("environment")
    return is_mapping(environment) and environment.get("type") not in (None, LOCAL_ENVIRONMENT)


def server_arguments(item_type: str, raw: Mapping[str, Any]) -> object:
    """A provider-executed built-in call's input: what it searched for or ran."""
    if item_type == "web_search_call":
        action = raw.get("action")
        if not is_mapping(action):
            return {}
        return {key: value for key, value in action.items() if key != "sources"}
    if item_type == "file_search_call":
        return {"queries": raw.get("queries") or []}
    arguments = {"code": raw.get("code") or ""}
    if isinstance(raw.get("container_id"), str):
        arguments["container_id"] = raw["container_id"]
    return arguments


def builtin_arguments(raw: Mapping[str, Any]) -> object:
    """A built-in call's arguments from its finished item: its ``action``, ``operation``, ``actions`` or
    ``arguments``."""
    for field in ("action", "operation"):
        if raw.get(field) is not None:
            return raw[field]
    if raw.get("actions") is not None:
        return {"actions": raw["actions"]}
    arguments = raw.get("arguments")
    return arguments if is_mapping(arguments) else {}

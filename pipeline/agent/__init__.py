"""The agent's side, above the stages: next-turn messages, the eager tool runner, the loop."""

from pipeline.agent.runner import (
    DEFAULT_MAX_BUFFER,
    AgentRun,
    OnFailure,
    RunnerEvent,
    ToolRun,
    Turn,
    run_loop,
    run_tools,
)
from pipeline.agent.tools import Tool, ToolRegistry
from pipeline.agent.turns import (
    WIRE_FORMATS,
    AssistantTurn,
    TurnBuilder,
    TurnError,
    WireFormat,
    assistant_message,
    assistant_turn,
)
from pipeline.models import ToolOutput, ToolOutputStatus

__all__ = [
    "DEFAULT_MAX_BUFFER",
    "WIRE_FORMATS",
    "AgentRun",
    "AssistantTurn",
    "OnFailure",
    "RunnerEvent",
    "Tool",
    "ToolOutput",
    "ToolOutputStatus",
    "ToolRegistry",
    "ToolRun",
    "Turn",
    "TurnBuilder",
    "TurnError",
    "WireFormat",
    "assistant_message",
    "assistant_turn",
    "run_loop",
    "run_tools",
]

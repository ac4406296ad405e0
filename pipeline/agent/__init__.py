"""The agent's side, above the stages: next-turn messages, the tool runner, the loop."""

from pipeline.agent.checks import (
    SKIP_THOUGHT_SIGNATURE,
    Repair,
    Violation,
    check_conversation,
    reasoning_content_rule,
    repair_conversation,
)
from pipeline.agent.runner import (
    DEFAULT_CANCEL_GRACE,
    DEFAULT_MAX_BUFFER,
    SAFE_FINISH_REASONS,
    AgentRun,
    OnFailure,
    RunnerEvent,
    ToolRun,
    Turn,
    run_loop,
    run_tools,
)
from pipeline.agent.tools import TOOL_STARTS, Tool, ToolRegistry, ToolStart
from pipeline.agent.turns import (
    WIRE_FORMATS,
    AssistantTurn,
    Dropped,
    TurnBuilder,
    TurnError,
    WireFormat,
    assistant_message,
    assistant_turn,
)
from pipeline.models import ToolOutput, ToolOutputStatus

__all__ = [
    "DEFAULT_CANCEL_GRACE",
    "DEFAULT_MAX_BUFFER",
    "SAFE_FINISH_REASONS",
    "SKIP_THOUGHT_SIGNATURE",
    "TOOL_STARTS",
    "WIRE_FORMATS",
    "AgentRun",
    "AssistantTurn",
    "Dropped",
    "OnFailure",
    "Repair",
    "RunnerEvent",
    "Tool",
    "ToolOutput",
    "ToolOutputStatus",
    "ToolRegistry",
    "ToolRun",
    "ToolStart",
    "Turn",
    "TurnBuilder",
    "TurnError",
    "Violation",
    "WireFormat",
    "assistant_message",
    "assistant_turn",
    "check_conversation",
    "reasoning_content_rule",
    "repair_conversation",
    "run_loop",
    "run_tools",
]

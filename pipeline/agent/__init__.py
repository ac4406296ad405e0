"""The agent's side, above the stages: next-turn messages, the tool runner, the loop."""

from pipeline.agent.approval import (
    DEFAULT_APPROVAL_TIMEOUT,
    Approvals,
    chat_approvals,
    denied_output,
    run_approved,
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
    TurnBuilder,
    TurnError,
    WireFormat,
    assistant_message,
    assistant_turn,
)
from pipeline.models import ToolApproval, ToolApprovalRequest, ToolOutput, ToolOutputStatus

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT",
    "DEFAULT_CANCEL_GRACE",
    "DEFAULT_MAX_BUFFER",
    "SAFE_FINISH_REASONS",
    "TOOL_STARTS",
    "WIRE_FORMATS",
    "AgentRun",
    "Approvals",
    "AssistantTurn",
    "OnFailure",
    "RunnerEvent",
    "Tool",
    "ToolApproval",
    "ToolApprovalRequest",
    "ToolOutput",
    "ToolOutputStatus",
    "ToolRegistry",
    "ToolRun",
    "ToolStart",
    "Turn",
    "TurnBuilder",
    "TurnError",
    "WireFormat",
    "assistant_message",
    "assistant_turn",
    "chat_approvals",
    "denied_output",
    "run_approved",
    "run_loop",
    "run_tools",
]

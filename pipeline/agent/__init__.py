"""The agent's side, above the stages: next-turn messages, the eager tool runner, the loop."""

# The eager tool runner and the loop (issue 13, item 2).
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
from pipeline.models import ToolOutput, ToolOutputStatus

__all__ = [
    "DEFAULT_MAX_BUFFER",
    "AgentRun",
    "OnFailure",
    "RunnerEvent",
    "Tool",
    "ToolOutput",
    "ToolOutputStatus",
    "ToolRegistry",
    "ToolRun",
    "Turn",
    "run_loop",
    "run_tools",
]

"""The agent's side, above the stages: what goes back to the model next turn."""

from pipeline.agent.turns import (
    WIRE_FORMATS,
    AssistantTurn,
    ToolOutput,
    TurnBuilder,
    TurnError,
    WireFormat,
    assistant_message,
    assistant_turn,
)

__all__ = [
    "WIRE_FORMATS",
    "AssistantTurn",
    "ToolOutput",
    "TurnBuilder",
    "TurnError",
    "WireFormat",
    "assistant_message",
    "assistant_turn",
]

"""What the OpenAI Responses converter remembers of each output item of a response.

Kept apart from `operators.convert.openai_responses` (the event handling), which reads and updates it.
"""

from __future__ import annotations

from typing import TypeAlias

from pipeline.models import ToolCallKind

__all__ = ["OutputItem", "PartKey"]

PartKey: TypeAlias = tuple[str, int]
"""A text part of an output item: (channel, part index); channels: text, refusal, summary, reasoning."""


class OutputItem:
    """What the converter remembers of one output item of the response."""

    __slots__ = (
        "annotations",
        "announced",
        "arguments_sent",
        "call_id",
        "call_index",
        "call_kind",
        "call_name",
        "code_streamed",
        "done",
        "encrypted_at_added",
        "finished",
        "item_id",
        "item_type",
        "last_reasoning_part",
        "last_text_index",
        "serial",
        "text_parts",
    )

    def __init__(self, serial: int, item_type: str | None, item_id: str | None) -> None:
        self.serial = serial
        self.item_type = item_type
        self.item_id = item_id
        """The id the item was first seen with (a proxy may rotate ids afterwards)."""
        self.announced = False
        """``output_item.added`` announced it (a second one is a duplicate)."""
        self.done = False
        """Its ``output_item.done`` arrived."""
        self.call_index: int | None = None
        self.call_id: str | None = None
        self.call_name: str | None = None
        self.code_streamed = False
        """Code interpreter code streamed as arguments (``{"code":"...`` sent, its end not yet)."""
        self.annotations: dict[int, int] = {}
        """Content part index -> annotations already given by ``annotation.added`` events."""
        self.last_reasoning_part: PartKey | None = None
        """The reasoning part that gave text last (it is in ``text_parts``)."""
        self.last_text_index = -1
        """The ``content_index`` of the text part whose delta came last (it is in ``text_parts``)."""
        self.call_kind: ToolCallKind = "function"
        self.arguments_sent = False
        self.finished = False
        self.encrypted_at_added: str | None = None
        self.text_parts: set[PartKey] = set()
        """The text parts that already gave text, so a later ``.done`` or item copy is not repeated."""

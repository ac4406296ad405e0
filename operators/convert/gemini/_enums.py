"""The numbers of the Gemini API's enums that the converters read, for clients that ask for enums as numbers
(``$alt=json;enum-encoding=int``, as Google's Go client does).

Written from googleapis' ``google/ai/generativelanguage/v1beta/generative_service.proto`` (``Candidate.
FinishReason``, ``GenerateContentResponse.PromptFeedback.BlockReason``) and ``content.proto``
(``ExecutableCode.Language``, ``CodeExecutionResult.Outcome``). Enums the converters skip (safety ratings,
the modality of token details) need no table: the decoder skips them whatever their encoding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeAlias

__all__ = ["BLOCK_REASONS", "FINISH_REASONS", "LANGUAGES", "OUTCOMES", "EnumValue"]

EnumValue: TypeAlias = str | int
"""An enum field as sent: its name (the JSON default), or its number."""

FINISH_REASONS: Final[Mapping[int, str]] = {
    0: "FINISH_REASON_UNSPECIFIED",
    1: "STOP",
    2: "MAX_TOKENS",
    3: "SAFETY",
    4: "RECITATION",
    5: "OTHER",
    6: "LANGUAGE",
    7: "BLOCKLIST",
    8: "PROHIBITED_CONTENT",
    9: "SPII",
    10: "MALFORMED_FUNCTION_CALL",
    11: "IMAGE_SAFETY",
    12: "UNEXPECTED_TOOL_CALL",
    13: "TOO_MANY_TOOL_CALLS",
    14: "IMAGE_PROHIBITED_CONTENT",
    15: "IMAGE_OTHER",
    16: "NO_IMAGE",
    17: "IMAGE_RECITATION",
}
BLOCK_REASONS: Final[Mapping[int, str]] = {
    0: "BLOCK_REASON_UNSPECIFIED",
    1: "SAFETY",
    2: "OTHER",
    3: "BLOCKLIST",
    4: "PROHIBITED_CONTENT",
    5: "IMAGE_SAFETY",
}
LANGUAGES: Final[Mapping[int, str]] = {0: "LANGUAGE_UNSPECIFIED", 1: "PYTHON"}
OUTCOMES: Final[Mapping[int, str]] = {
    0: "OUTCOME_UNSPECIFIED",
    1: "OUTCOME_OK",
    2: "OUTCOME_FAILED",
    3: "OUTCOME_DEADLINE_EXCEEDED",
}

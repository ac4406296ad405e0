"""Check a conversation against the target provider's rules before the request is sent.

Each provider refuses a request whose history breaks its rules, with a 400 that names the rule but rarely
the message: a tool call left without its result, an Anthropic thinking block without its signature, a
Gemini 3 function call without its ``thoughtSignature``, a Responses reasoning item that cannot be found
again. `check_conversation` walks the messages once and names each violation with its position;
`repair_conversation` returns a copy with what is safe to fix fixed (the fix is named in the
violation) and leaves the rest to you:

- safe, and fixed: an Anthropic thinking block without a signature (the API refuses it; it is dropped), an
  empty text block (dropped), ``tool_result`` blocks after other content of the same message (moved
  first, in order), ``reasoning_content`` sent to a model that refuses it (removed), a Responses
  reasoning item without an id (dropped), a Gemini 3 function call of the running turn without a
  signature (given Google's documented ``skip_thought_signature_validator`` sentinel);
- not safe, reported only: a call without its result or a result without its call (only you know the
  output), thinking that should open the assistant message of a tool-use loop, ``reasoning_content`` a
  model requires but the history lost, reasoning items that ``store=False`` cannot find again.

The rules a provider applies depend on how the request is made; the keyword arguments say which apply:
``thinking`` (Anthropic extended thinking on), ``store`` (Responses ``store``), ``reasoning_content``
(``"required"`` for Kimi-K2-Thinking and DeepSeek V3.2 thinking with tools, ``"forbidden"`` for
``deepseek-reasoner``; `reasoning_content_rule` tells it from a model name) and
``thought_signatures`` (Gemini 3 and later).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import msgspec

from pipeline.errors import ConfigurationError

__all__ = [
    "SKIP_THOUGHT_SIGNATURE",
    "Repair",
    "Violation",
    "check_conversation",
    "reasoning_content_rule",
    "repair_conversation",
]

Message: TypeAlias = dict[str, Any]
ReasoningContentRule: TypeAlias = Literal["required", "forbidden"] | None

SKIP_THOUGHT_SIGNATURE = "skip_thought_signature_validator"
"""Google's documented stand-in for a Gemini 3 function call's ``thoughtSignature`` when the history has
none (a call from another model, or a history that lost it)."""

_TARGETS = ("openai_chat", "openai_responses", "anthropic", "gemini", "bedrock_converse")


class Violation(msgspec.Struct, frozen=True, kw_only=True):
    """One rule of the target provider that the conversation breaks.

    ``position`` is where, as a path into the messages (``messages[3].content[1]``; Gemini: ``contents``),
    ``rule`` a stable name, ``message`` what is wrong. ``fixed`` says `repair_conversation` fixed it
    (and how, in ``message``)."""

    position: str
    rule: str
    message: str
    fixed: bool = False


class Repair(msgspec.Struct, frozen=True):
    """What `repair_conversation` made: the fixed copy and every violation (fixed or not)."""

    messages: list[Message]
    violations: list[Violation]

    @property
    def remaining(self) -> list[Violation]:
        """The violations left: the request would still be refused."""
        return [violation for violation in self.violations if not violation.fixed]


@dataclass(slots=True)
class _Rules:
    thinking: bool = False
    store: bool = True
    reasoning_content: ReasoningContentRule = None
    thought_signatures: bool = False


@dataclass(slots=True)
class _Walk:
    """One pass over a conversation: the violations found, and whether to fix what is safe to fix."""

    messages: list[Message]
    rules: _Rules
    fix: bool
    root: str
    violations: list[Violation] = field(default_factory=list)

    def report(self, position: str, rule: str, message: str, *, fixed: bool = False) -> None:
        self.violations.append(Violation(position=position, rule=rule, message=message, fixed=fixed))

    def fixable(self, position: str, rule: str, message: str, fixed_as: str) -> None:
        """Report a violation a repair fixes; ``fixed_as`` says how, when this walk fixes."""
        self.report(position, rule, message + (f"; {fixed_as}" if self.fix else ""), fixed=self.fix)

    def answered(self, pending: dict[Any, str], call_id: Any, position: str, orphan: str) -> None:
        """Close the open call ``call_id``; a result that no open call made is reported as ``orphan``."""
        if pending.pop(call_id, None) is None:
            self.report(position, "orphan_result", orphan)

    def at(self, number: int, *rest: str | int) -> str:
        return f"{self.root}[{number}]" + "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in rest
        )


def reasoning_content_rule(model: str) -> ReasoningContentRule:
    """What an OpenAI-compatible model wants done with ``reasoning_content`` in the history, by its name:
    ``"forbidden"`` for DeepSeek's ``deepseek-reasoner`` (R1 refuses it), ``"required"`` for Kimi's
    thinking models and DeepSeek V3.2 in thinking mode (a tool-use loop must carry it back), else None."""
    name = model.lower()
    if "deepseek-reasoner" in name or re.search(r"deepseek-r1\b", name):
        return "forbidden"
    if ("kimi" in name and "thinking" in name) or re.search(r"deepseek-v3\.2.*think", name):
        return "required"
    return None


def check_conversation(
    messages: Iterable[Any],
    target: str,
    *,
    thinking: bool = False,
    store: bool = True,
    reasoning_content: ReasoningContentRule = None,
    thought_signatures: bool = False,
) -> list[Violation]:
    """Every rule of ``target`` that ``messages`` break, in order of position.

    The messages are not changed.

    Args:
        messages: the conversation, as the target's request body lists it.
        target: ``openai_chat``, ``openai_responses``, ``anthropic``, ``gemini`` or
            ``bedrock_converse``.
        thinking: Anthropic extended thinking is on.
        store: the Responses request's ``store``.
        reasoning_content: ``"required"``, ``"forbidden"`` or None (see `reasoning_content_rule`).
        thought_signatures: the model is Gemini 3 or later.

    Raises:
        ConfigurationError: an unknown target, or a message that is not an object.
    """
    rules = _Rules(thinking, store, reasoning_content, thought_signatures)
    return _run(messages, target, rules, fix=False).violations


def repair_conversation(
    messages: Iterable[Any],
    target: str,
    *,
    thinking: bool = False,
    store: bool = True,
    reasoning_content: ReasoningContentRule = None,
    thought_signatures: bool = False,
) -> Repair:
    """A copy of ``messages`` with what is safe to fix fixed, and every violation found.

    The module docs say what is fixed; ``Repair.remaining`` lists what still breaks the rules.

    Args:
        messages: the conversation, as the target's request body lists it.
        target: ``openai_chat``, ``openai_responses``, ``anthropic`` or ``gemini``.
        thinking: Anthropic extended thinking is on.
        store: the Responses request's ``store``.
        reasoning_content: ``"required"``, ``"forbidden"`` or None (see `reasoning_content_rule`).
        thought_signatures: the model is Gemini 3 or later.

    Raises:
        ConfigurationError: an unknown target, or a message that is not an object.
    """
    rules = _Rules(thinking, store, reasoning_content, thought_signatures)
    walk = _run(messages, target, rules, fix=True)
    return Repair(walk.messages, walk.violations)


def _run(messages: Iterable[Any], target: str, rules: _Rules, *, fix: bool) -> _Walk:
    checker = _CHECKERS.get(target)
    if checker is None:
        raise ConfigurationError(f"target must be one of {', '.join(_TARGETS)}; got {target!r}")
    copied: list[Message] = []
    for number, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ConfigurationError(f"message {number} is a {type(message).__name__}, not an object")
        copied.append(copy.deepcopy(dict(message)))
    walk = _Walk(copied, rules, fix, "contents" if target == "gemini" else "messages")
    checker(walk)
    return walk


# --- OpenAI Chat Completions ------------------------------------------------------------------------------


def _openai_chat(walk: _Walk) -> None:
    pending: dict[Any, str] = {}
    for number, message in enumerate(walk.messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            orphan = f"a tool result for {call_id!r}, which no open call made"
            walk.answered(pending, call_id, walk.at(number), orphan)
            continue
        _unanswered(walk, pending)
        if role == "assistant":
            calls = message.get("tool_calls") or []
            pending = {
                call.get("id"): walk.at(number, "tool_calls", index) for index, call in enumerate(calls)
            }
            _chat_reasoning(walk, number, message, bool(calls))
    _unanswered(walk, pending)


def _unanswered(walk: _Walk, pending: dict[Any, str]) -> None:
    for call_id, position in pending.items():
        walk.report(
            position, "unanswered_call", f"the call {call_id!r} has no result before the next message"
        )
    pending.clear()


def _chat_reasoning(walk: _Walk, number: int, message: Message, with_calls: bool) -> None:
    rule = walk.rules.reasoning_content
    if rule == "forbidden":
        for key in ("reasoning_content", "reasoning"):
            if key in message:
                if walk.fix:
                    del message[key]
                message_text = f"the model refuses {key} in its history"
                walk.fixable(walk.at(number, key), "reasoning_content_forbidden", message_text, "removed")
    elif rule == "required" and with_calls and not message.get("reasoning_content"):
        walk.report(
            walk.at(number),
            "reasoning_content_missing",
            "an assistant message with tool calls must carry its reasoning_content back in this model's "
            "tool loop",
        )


# --- Anthropic Messages -----------------------------------------------------------------------------------


_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
"""What Anthropic accepts as a ``tool_use`` id (other providers' ids, such as Kimi's
``functions.get_weather:0``, are not)."""


def _anthropic(walk: _Walk) -> None:
    _anthropic_ids(walk)
    pending: dict[Any, str] = {}
    last_calls = -1
    for number, message in enumerate(walk.messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            walk.report(
                walk.at(number, "role"),
                "role",
                f"role {role!r}: Anthropic takes user and assistant (system goes in `system`)",
            )
            continue
        blocks = message.get("content")
        has_blocks = isinstance(blocks, list)
        if role == "user" and has_blocks:
            _tool_results_first(walk, number, message)
            _answer(walk, number, message["content"], pending, "tool_result", "tool_use_id")
        _unanswered(walk, pending)
        if role == "assistant" and has_blocks:
            pending = _anthropic_calls(walk, number, message)
            if pending:
                last_calls = number
    _unanswered(walk, pending)
    if walk.rules.thinking and last_calls >= 0:
        _thinking_first(walk, last_calls)


def _anthropic_calls(walk: _Walk, number: int, message: Message) -> dict[Any, str]:
    """The ``tool_use`` calls of an assistant message (its blocks the API refuses dropped when fixing),
    by id, with their positions."""
    message["content"] = _assistant_blocks(walk, number, message["content"])
    return {
        block.get("id"): walk.at(number, "content", index)
        for index, block in enumerate(message["content"])
        if block.get("type") == "tool_use"
    }


def _anthropic_ids(walk: _Walk) -> None:
    """Report call ids Anthropic refuses; fixing renames each the same way in its call and its result."""
    renamed: dict[str, str] = {}
    for number, index, block, key in _id_blocks(walk.messages):
        old = block.get(key)
        if not isinstance(old, str) or _ANTHROPIC_ID.fullmatch(old):
            continue
        if walk.fix:
            new = renamed.setdefault(old, re.sub(r"[^a-zA-Z0-9_-]", "_", old) + f"_{len(renamed)}")
            block[key] = new
        if block.get("type") == "tool_use":
            fix = f"; renamed {renamed[old]!r} in the call and its result" if walk.fix else ""
            walk.report(
                walk.at(number, "content", index),
                "tool_use_id",
                f"the call id {old!r} is not [a-zA-Z0-9_-]+" + fix,
                fixed=walk.fix,
            )


def _id_blocks(messages: list[Message]) -> Iterable[tuple[int, int, Message, str]]:
    """Each ``tool_use`` and ``tool_result`` block with the key of its call id."""
    for number, message in enumerate(messages):
        blocks = message.get("content")
        for index, block in enumerate(blocks if isinstance(blocks, list) else ()):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind in ("tool_use", "tool_result"):
                yield number, index, block, "id" if kind == "tool_use" else "tool_use_id"


def _assistant_blocks(walk: _Walk, number: int, blocks: list[Any]) -> list[Any]:
    """The blocks of an assistant message; those the API refuses are reported, and dropped when fixing."""
    kept: list[Any] = []
    for index, block in enumerate(blocks):
        refused = _refused_block(block)
        if refused is not None:
            walk.fixable(walk.at(number, "content", index), *refused, "dropped")
        if refused is None or not walk.fix:
            kept.append(block)
    return kept


def _kind(block: Any) -> Any:
    """A content block's ``type``; None for a block that is not an object."""
    return block.get("type") if isinstance(block, Mapping) else None


def _refused_block(block: Any) -> tuple[str, str] | None:
    """The rule and message of an assistant block the API refuses: unsigned thinking, empty text."""
    kind = _kind(block)
    if kind == "thinking" and not block.get("signature"):
        return "unsigned_thinking", "a thinking block without a signature (the API refuses it)"
    if kind == "text" and block.get("text") == "":
        return "empty_text", "an empty text block"
    return None


def _tool_results_first(walk: _Walk, number: int, message: Message) -> None:
    """Report a ``tool_result`` block after other content; fixing moves the results first (in order)."""
    blocks = message["content"]
    results = [_kind(block) == "tool_result" for block in blocks]
    if False not in results or True not in results[results.index(False) :]:
        return
    if walk.fix:
        message["content"] = sorted(blocks, key=lambda block: _kind(block) != "tool_result")
    walk.fixable(
        walk.at(number, "content", results.index(False)),
        "results_not_first",
        "tool_result blocks must come before any other content",
        "moved first",
    )


def _thinking_first(walk: _Walk, number: int) -> None:
    blocks = walk.messages[number]["content"]
    if (_kind(blocks[0]) if blocks else None) not in ("thinking", "redacted_thinking"):
        walk.report(
            walk.at(number, "content", 0),
            "thinking_not_first",
            "with thinking on, the assistant message of a tool-use loop must open with its thinking block",
        )


def _answer(walk: _Walk, number: int, items: list[Any], pending: dict[Any, str], kind: str, key: str) -> None:
    for index, item in enumerate(items):
        if _kind(item) == kind:
            call_id = item.get(key)
            orphan = f"a {kind} for {call_id!r}, which the message before did not call"
            walk.answered(pending, call_id, walk.at(number, "content", index), orphan)


# --- OpenAI Responses -------------------------------------------------------------------------------------

_CALLS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
_OUTPUTS = {output: call for call, output in _CALLS.items()}


def _openai_responses(walk: _Walk) -> None:
    pending: dict[Any, str] = {}
    kept: list[Message] = []
    for number, item in enumerate(walk.messages):
        kind = item.get("type")
        if kind in _CALLS:
            pending[item.get("call_id")] = walk.at(number)
        elif kind in _OUTPUTS:
            orphan = f"a {kind} for {item.get('call_id')!r}, which no call made before"
            walk.answered(pending, item.get("call_id"), walk.at(number), orphan)
        elif kind == "reasoning" and not _reasoning_item(walk, number, item):
            continue
        elif kind == "item_reference" and not walk.rules.store:
            walk.report(
                walk.at(number),
                "item_reference_without_store",
                "an item_reference needs store=True: with store=False the API keeps nothing to refer to",
            )
        kept.append(item)
    for call_id, position in pending.items():
        walk.report(position, "unanswered_call", f"the call {call_id!r} has no output item")
    walk.messages[:] = kept


def _reasoning_item(walk: _Walk, number: int, item: Message) -> bool:
    """Whether the reasoning item stays (False: dropped as fixed)."""
    if not item.get("id"):
        walk.fixable(walk.at(number), "reasoning_without_id", "a reasoning item without an id", "dropped")
        return not walk.fix
    if not walk.rules.store and not item.get("encrypted_content"):
        walk.report(
            walk.at(number),
            "reasoning_without_encrypted_content",
            "with store=False a reasoning item must carry its encrypted_content "
            "(ask for include=['reasoning.encrypted_content'])",
        )
    following = walk.messages[number + 1 : number + 2]
    if not following or following[0].get("type") == "reasoning" or following[0].get("role") == "user":
        walk.report(
            walk.at(number),
            "reasoning_without_following_item",
            "a reasoning item must be followed by the output item it preceded",
        )
    return True


# --- Gemini -----------------------------------------------------------------------------------------------


def _gemini(walk: _Walk) -> None:
    pending: list[tuple[str, str]] = []
    turn_start = _running_turn_start(walk.messages)
    for number, content in enumerate(walk.messages):
        role = content.get("role")
        parts = content.get("parts") or []
        if role not in ("user", "model"):
            walk.report(walk.at(number, "role"), "role", f"role {role!r}: Gemini takes user and model")
            continue
        if role == "user":
            _gemini_answers(walk, number, parts, pending)
            continue
        _gemini_unanswered(walk, pending)
        pending = _gemini_calls(walk, number, parts, running=number >= turn_start)
    _gemini_unanswered(walk, pending)


def _gemini_calls(walk: _Walk, number: int, parts: list[Any], *, running: bool) -> list[tuple[str, str]]:
    """The ``functionCall`` parts of a model content, as (name, position); in the running turn the
    first one must carry its thought signature."""
    calls = [(index, part) for index, part in enumerate(parts) if _holds(part, "functionCall")]
    if calls and running and walk.rules.thought_signatures:
        _gemini_signature(walk, number, calls[0])
    return [(str(part["functionCall"].get("name")), walk.at(number, "parts", index)) for index, part in calls]


def _running_turn_start(contents: list[Message]) -> int:
    """The index of the user content that started the running turn: the last one that is not only
    function responses."""
    for number in range(len(contents) - 1, -1, -1):
        content = contents[number]
        parts = content.get("parts") or []
        if content.get("role") == "user" and any(not _holds(part, "functionResponse") for part in parts):
            return number
    return 0


def _gemini_answers(walk: _Walk, number: int, parts: list[Any], pending: list[tuple[str, str]]) -> None:
    for index, part in enumerate(parts):
        if not _holds(part, "functionResponse"):
            continue
        name = str(part["functionResponse"].get("name"))
        match = next((slot for slot, (called, _) in enumerate(pending) if called == name), None)
        if match is None:
            walk.report(
                walk.at(number, "parts", index),
                "orphan_result",
                f"a functionResponse for {name!r}, which the content before did not call",
            )
        else:
            del pending[match]
    _gemini_unanswered(walk, pending)


def _holds(part: Any, key: str) -> bool:
    """Whether a Gemini part is an object with ``key`` (``functionCall``, ``functionResponse``)."""
    return isinstance(part, Mapping) and key in part


def _gemini_unanswered(walk: _Walk, pending: list[tuple[str, str]]) -> None:
    for name, position in pending:
        walk.report(
            position,
            "unanswered_call",
            f"the functionCall {name!r} has no functionResponse in the next content",
        )
    pending.clear()


def _gemini_signature(walk: _Walk, number: int, first_call: tuple[int, Mapping[str, Any]]) -> None:
    index, part = first_call
    if part.get("thoughtSignature"):
        return
    if walk.fix:
        walk.messages[number]["parts"][index] = {**part, "thoughtSignature": SKIP_THOUGHT_SIGNATURE}
    walk.fixable(
        walk.at(number, "parts", index),
        "missing_thought_signature",
        "the first functionCall of each step of the running turn needs its thoughtSignature",
        f"given {SKIP_THOUGHT_SIGNATURE!r}",
    )


# --- Bedrock Converse -------------------------------------------------------------------------------------


def _bedrock_converse(walk: _Walk) -> None:
    """Every client ``toolUse`` answered by a ``toolResult`` in the next user message, and only those."""
    pending: dict[Any, str] = {}
    for number, message in enumerate(walk.messages):
        content = message.get("content")
        blocks = [block if isinstance(block, Mapping) else {} for block in content or ()]
        if message.get("role") == "user":
            _converse_results(walk, number, blocks, pending)
        _unanswered(walk, pending)
        if message.get("role") == "assistant":
            pending = _converse_calls(walk, number, blocks)
    _unanswered(walk, pending)


def _converse_calls(walk: _Walk, number: int, blocks: list[Mapping[str, Any]]) -> dict[Any, str]:
    """The client ``toolUse`` blocks of an assistant message, by id, with their positions."""
    return {
        call.get("toolUseId"): walk.at(number, "content", index)
        for index, call in enumerate(block.get("toolUse") for block in blocks)
        if isinstance(call, Mapping) and call.get("type") != "server_tool_use"
    }


def _converse_results(
    walk: _Walk, number: int, blocks: list[Mapping[str, Any]], pending: dict[Any, str]
) -> None:
    for index, block in enumerate(blocks):
        result = block.get("toolResult")
        if isinstance(result, Mapping):
            orphan = f"a toolResult for {result.get('toolUseId')!r}, which the message before did not call"
            walk.answered(pending, result.get("toolUseId"), walk.at(number, "content", index), orphan)


_CHECKERS: dict[str, Callable[[_Walk], None]] = {
    "openai_chat": _openai_chat,
    "openai_responses": _openai_responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "bedrock_converse": _bedrock_converse,
}

"""The independent reference ("oracle") for the recorded provider streams in ``tests/fixtures``.

It reads a whole recording at once and computes what the full pipeline must produce from it: the text,
the reasoning, the tool calls, how the response ended and what it cost. It is deliberately simple and
non-incremental (accumulate everything, parse once) and shares no code with ``operators``: it was
written from the recordings and from the converter contract in CONTRIBUTING.md, so that a bug in a
streaming converter cannot hide behind the same bug here.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

__all__ = [
    "FIXTURES",
    "FORMATS",
    "Expected",
    "ExpectedCall",
    "call_id_for",
    "expected",
    "fixture_paths",
    "judge_arguments",
    "read_payloads",
]

FIXTURES = Path(__file__).parent / "fixtures"
FORMATS = (
    "anthropic",
    "gemini",
    "openai_chat",
    "openai_compatible",
    "openai_responses",
    "cohere",
    "bedrock_converse",
    "ollama",
)
"""The folders of recorded provider streams; ``raw_model_output`` holds model text, not streams."""

Payload: TypeAlias = tuple[str | None, dict[str, Any]]
"""One provider event: the SSE ``event:`` name (None when absent or in JSONL) and its JSON payload."""

JSONObject: TypeAlias = dict[str, Any]


def call_id_for(index: int) -> str:
    """The id the pipeline under test generates for a call the recording gives no id: ``call_{index}``."""
    return f"call_{index}"


@dataclass(frozen=True)
class ExpectedCall:
    """One tool call as the invocation folder must report it.

    ``arguments`` is None when the arguments text cannot be parsed; then ``error_kind`` says why
    (``invalid_json`` or ``truncated``), ``raw`` is the text as received and ``partial_arguments`` holds
    the top-level members whose values were complete.
    """

    id: str
    name: str
    arguments: JSONObject | None
    error_kind: str | None = None
    provider_executed: bool = False
    raw: str = ""
    partial_arguments: JSONObject = field(default_factory=dict)


@dataclass
class Expected:
    """What a recorded stream holds, in the pipeline's normalised terms (see CONTRIBUTING.md)."""

    text: str
    reasoning: str
    invocations: list[ExpectedCall]
    finish_reason: str | None
    usage: dict[str, int] | None
    error: str | None = None
    """The provider's message of an in-band error event; text and reasoning are what came before it."""
    refusal: str = ""
    """Refusal text (OpenAI ``delta.refusal``), kept apart from ``text`` as ChunkResponse keeps it."""


# --------------------------------------------------------------------------------------------------
# Reading recordings


def fixture_paths() -> list[Path]:
    """Every recorded provider stream the oracle covers, sorted (the Anthropic-on-Bedrock binary frames are
    left out: their ``.decoded.jsonl`` sibling is the same stream as plain Anthropic events; the
    ConverseStream ones are read)."""
    paths = [
        path
        for folder in FORMATS
        for path in (FIXTURES / folder).iterdir()
        if path.suffix in {".sse", ".jsonl"} or (path.suffix == ".bin" and folder == "bedrock_converse")
    ]
    return sorted(paths)


def read_payloads(path: Path) -> list[Payload]:
    """The provider events of a recording: SSE (``.sse``), one JSON payload a line (``.jsonl``) or AWS
    event-stream frames (``.bin``, named by their event type)."""
    if path.suffix == ".bin":
        from tests.reference_converse import read_frames

        return read_frames(path.read_bytes())
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [(None, json.loads(line)) for line in text.splitlines() if line.strip()]
    if path.suffix == ".sse":
        return _parse_sse(text)
    raise ValueError(f"{path.name}: not a recorded stream the oracle reads (.sse or .jsonl)")


def _parse_sse(text: str) -> list[Payload]:
    """Split an SSE body into events the plain way: blank-line separated blocks of field lines."""
    payloads: list[Payload] = []
    normalised = text.replace("\r\n", "\n").replace("\r", "\n")
    for block in normalised.split("\n\n"):
        event: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
        if not data:
            continue
        body = "\n".join(data)
        if body.strip() == "[DONE]":
            continue
        payloads.append((event, json.loads(body)))
    return payloads


def expected(path: Path) -> Expected:
    """What the full pipeline must produce from the recording at ``path``."""
    folder = path.parent.name
    reader = _READERS.get(folder)
    if reader is None:
        raise ValueError(f"{path.name}: the oracle covers {', '.join(FORMATS)}, not {folder!r}")
    return reader(read_payloads(path))


# --------------------------------------------------------------------------------------------------
# Arguments: accumulate the whole text, parse it once


class _Cut(Exception):
    """The text ends inside a JSON value that could still be completed."""


class _Bad(Exception):
    """The text cannot be the beginning of any JSON value."""


_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_CHARS = frozenset("+-0123456789.eE")
_WHITESPACE = " \t\n\r"
_ESCAPES = frozenset('"\\/bfnrtu')
_HEX = frozenset("0123456789abcdefABCDEF")


def _skip_whitespace(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WHITESPACE:
        at += 1
    return at


def _scan_value(text: str, at: int) -> int:
    """Check the JSON value starting at ``at`` (no leading whitespace); return the index after it."""
    if at >= len(text):
        raise _Cut
    char = text[at]
    if char == "{":
        return _scan_object(text, at, on_member=None)
    if char == "[":
        return _scan_array(text, at)
    if char == '"':
        return _scan_string(text, at)
    if char in _NUMBER_CHARS:
        return _scan_number(text, at)
    for literal in ("true", "false", "null"):
        if text.startswith(literal, at):
            return at + len(literal)
        if literal.startswith(text[at:]):
            raise _Cut
    raise _Bad


def _scan_string(text: str, at: int) -> int:
    index = at + 1
    while index < len(text):
        char = text[index]
        if char == '"':
            return index + 1
        if char == "\\":
            if index + 1 >= len(text):
                raise _Cut
            escape = text[index + 1]
            if escape not in _ESCAPES:
                raise _Bad
            if escape == "u":
                digits = text[index + 2 : index + 6]
                if any(digit not in _HEX for digit in digits):
                    raise _Bad
                if len(digits) < 4:
                    raise _Cut
                index += 6
            else:
                index += 2
        elif char < " ":
            raise _Bad
        else:
            index += 1
    raise _Cut


def _scan_number(text: str, at: int) -> int:
    end = at
    while end < len(text) and text[end] in _NUMBER_CHARS:
        end += 1
    run = text[at:end]
    if end == len(text):
        # A number at the very end may go on; it is a fine prefix if some digit can complete it.
        if _NUMBER.fullmatch(run) or _NUMBER.fullmatch(run + "0"):
            raise _Cut
        raise _Bad
    if not _NUMBER.fullmatch(run):
        raise _Bad
    return end


def _scan_array(text: str, at: int) -> int:
    index = _skip_whitespace(text, at + 1)
    if index < len(text) and text[index] == "]":
        return index + 1
    while True:
        index = _skip_whitespace(text, _scan_value(text, _skip_whitespace(text, index)))
        if index >= len(text):
            raise _Cut
        if text[index] == "]":
            return index + 1
        if text[index] != ",":
            raise _Bad
        index += 1


def _scan_object(
    text: str, at: int, on_member: Callable[[tuple[int, int], tuple[int, int]], None] | None
) -> int:
    """Check an object; ``on_member`` hears the (start, end) of each complete key and value."""
    index = _skip_whitespace(text, at + 1)
    if index < len(text) and text[index] == "}":
        return index + 1
    while True:
        index = _skip_whitespace(text, index)
        if index >= len(text):
            raise _Cut
        if text[index] != '"':
            raise _Bad
        key_end = _scan_string(text, index)
        colon = _skip_whitespace(text, key_end)
        if colon >= len(text):
            raise _Cut
        if text[colon] != ":":
            raise _Bad
        value_start = _skip_whitespace(text, colon + 1)
        value_end = _scan_value(text, value_start)
        if on_member is not None:
            on_member((index, key_end), (value_start, value_end))
        index = _skip_whitespace(text, value_end)
        if index >= len(text):
            raise _Cut
        if text[index] == "}":
            return index + 1
        if text[index] != ",":
            raise _Bad
        index += 1


def judge_arguments(text: str) -> tuple[JSONObject | None, str | None, JSONObject]:
    """Parse a call's whole arguments text once: ``(arguments, error_kind, partial_arguments)``.

    Empty or blank text is ``{}``. Text that is not JSON is ``truncated`` when it is a valid JSON prefix
    that was cut off, else ``invalid_json``; ``partial_arguments`` then holds the top-level members whose
    values were complete before the text went wrong or ended.
    """
    if not text.strip():
        return {}, None, {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        pass
    else:
        if not isinstance(value, dict):
            raise ValueError(f"the oracle does not model arguments that are not an object: {text!r}")
        return value, None, {}
    partial: JSONObject = {}

    def keep(key: tuple[int, int], value: tuple[int, int]) -> None:
        partial[json.loads(text[key[0] : key[1]])] = json.loads(text[value[0] : value[1]])

    start = _skip_whitespace(text, 0)
    try:
        root_is_object = text[start] == "{"
        end = _scan_object(text, start, keep) if root_is_object else _scan_value(text, start)
        # json.loads refused it yet the value is whole: something follows it.
        assert _skip_whitespace(text, end) < len(text), text
        raise _Bad
    except _Cut:
        return None, "truncated", partial
    except _Bad:
        return None, "invalid_json", partial


class _Call:
    """A tool call being gathered from a recording: its identity and all of its arguments text."""

    def __init__(
        self,
        position: int,
        call_id: str | None,
        name: str | None,
        *,
        provider_executed: bool = False,
        free_text: bool = False,
    ) -> None:
        self.position = position
        self.call_id = call_id or None
        self.name = name or None
        self.provider_executed = provider_executed
        self.free_text = free_text
        """A custom tool: the text is the ``input`` value, not JSON."""
        self.parts: list[str] = []
        self.whole: JSONObject | None = None
        """Arguments given as an object rather than text (Gemini ``args``, Responses ``action``)."""

    def add(self, text: str | None) -> None:
        if text:
            self.parts.append(text)

    def identify(self, call_id: str | None, name: str | None) -> None:
        """The first non-empty id and name win; later deltas may repeat them or send ``""``."""
        self.call_id = self.call_id or call_id or None
        self.name = self.name or name or None

    def result(self) -> ExpectedCall:
        call_id = self.call_id or call_id_for(self.position)
        name = self.name or ""
        text = "".join(self.parts)
        if self.free_text:
            arguments: JSONObject | None = {"input": text}
            return ExpectedCall(call_id, name, arguments, provider_executed=self.provider_executed)
        if self.whole is not None and not text:
            return ExpectedCall(call_id, name, self.whole, provider_executed=self.provider_executed)
        arguments, error_kind, partial = judge_arguments(text)
        return ExpectedCall(
            call_id,
            name,
            arguments,
            error_kind,
            self.provider_executed,
            raw=text if error_kind else "",
            partial_arguments=partial,
        )


def _usage(
    prompt: int | None,
    completion: int | None,
    total: int | None = None,
    *,
    cached: int | None = None,
    cache_creation: int | None = None,
    reasoning: int | None = None,
) -> dict[str, int]:
    """Usage in OpenAI's terms; optional counts only where the provider reported them."""
    usage = {
        "prompt_tokens": prompt or 0,
        "completion_tokens": completion or 0,
        "total_tokens": total if total is not None else (prompt or 0) + (completion or 0),
    }
    for key, value in (
        ("cached_tokens", cached),
        ("cache_creation_tokens", cache_creation),
        ("reasoning_tokens", reasoning),
    ):
        if value is not None:
            usage[key] = value
    return usage


def _get(mapping: Any, *keys: str) -> Any:
    """``mapping[k1][k2]...`` or None where a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


# --------------------------------------------------------------------------------------------------
# Anthropic Messages (also the decoded Bedrock frames)

_ANTHROPIC_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_ANTHROPIC_CALL_BLOCKS = {"tool_use": False, "server_tool_use": True, "mcp_tool_use": True}
"""Content blocks that are calls, and whether the provider executes them itself."""


def _anthropic(payloads: list[Payload]) -> Expected:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[_Call] = []
    block_calls: dict[int, _Call] = {}
    block_inputs: dict[int, JSONObject] = {}
    usage_fields: dict[str, Any] = {}
    stop_reason: str | None = None
    error: str | None = None
    for _, event in payloads:
        kind = event.get("type")
        if kind == "message_start":
            usage_fields.update(_get(event, "message", "usage") or {})
        elif kind == "content_block_start":
            index = event["index"]
            block = event["content_block"]
            block_type = block.get("type")
            if block_type == "text":
                text.append(block.get("text") or "")
            elif block_type == "thinking":
                reasoning.append(block.get("thinking") or "")
            elif block_type in _ANTHROPIC_CALL_BLOCKS:
                call = _Call(
                    len(calls),
                    block.get("id"),
                    block.get("name"),
                    provider_executed=_ANTHROPIC_CALL_BLOCKS[block_type],
                )
                calls.append(call)
                block_calls[index] = call
                block_inputs[index] = block.get("input") or {}
        elif kind == "content_block_delta":
            delta = event["delta"]
            delta_type = delta.get("type")
            if delta_type == "text_delta":
                text.append(delta.get("text") or "")
            elif delta_type == "thinking_delta":
                reasoning.append(delta.get("thinking") or "")
            elif delta_type == "input_json_delta":
                block_calls[event["index"]].parts.append(delta.get("partial_json") or "")
        elif kind == "message_delta":
            stop_reason = _get(event, "delta", "stop_reason") or stop_reason
            # Counts are cumulative. A zero never replaces a count: re-serialised streams (dive) write
            # the absent input_tokens of message_delta as 0.
            later = event.get("usage") or {}
            usage_fields.update(
                {key: value for key, value in later.items() if value != 0 or key not in usage_fields}
            )
        elif kind == "error":
            error = _get(event, "error", "message") or json.dumps(event.get("error"))
            break
    for index, call in block_calls.items():
        if not call.parts:
            # No input_json_delta at all: the input came whole in content_block_start.
            call.whole = block_inputs[index]
    usage = None
    if usage_fields:
        cache_read = usage_fields.get("cache_read_input_tokens")
        cache_creation = usage_fields.get("cache_creation_input_tokens")
        prompt = (usage_fields.get("input_tokens") or 0) + (cache_read or 0) + (cache_creation or 0)
        usage = _usage(
            prompt,
            usage_fields.get("output_tokens"),
            cached=cache_read,
            cache_creation=cache_creation,
            reasoning=_get(usage_fields, "output_tokens_details", "thinking_tokens"),
        )
    finish = None if stop_reason is None else _ANTHROPIC_STOP.get(stop_reason, stop_reason.lower())
    return Expected(
        "".join(text), "".join(reasoning), [call.result() for call in calls], finish, usage, error
    )


# --------------------------------------------------------------------------------------------------
# OpenAI Chat Completions and compatible servers


def _chat_reasoning(delta: Mapping[str, Any]) -> str:
    """``reasoning_content``, else ``reasoning``, else the text of ``reasoning_details`` (Snowflake)."""
    for key in ("reasoning_content", "reasoning"):
        value = delta.get(key)
        if isinstance(value, str):
            return value
    details = delta.get("reasoning_details") or ()
    return "".join(d.get("text") or "" for d in details if d.get("type") == "reasoning.text")


def _chat_content(content: Any, text: list[str], reasoning: list[str]) -> None:
    """A string, or a list of typed parts (Mistral: ``text`` and ``thinking`` parts)."""
    if isinstance(content, str):
        text.append(content)
        return
    for part in content or ():
        if part.get("type") == "text":
            text.append(part.get("text") or "")
        elif part.get("type") == "thinking":
            for inner in part.get("thinking") or ():
                if inner.get("type") == "text":
                    reasoning.append(inner.get("text") or "")


def _chat_usage(raw: Mapping[str, Any]) -> dict[str, int]:
    prompt = raw.get("prompt_tokens") or 0
    completion = raw.get("completion_tokens") or 0
    total = raw.get("total_tokens")
    reasoning = _get(raw, "completion_tokens_details", "reasoning_tokens")
    if reasoning and total is not None and prompt + completion + reasoning == total:
        completion += reasoning  # xAI counts reasoning apart; OpenAI's completion_tokens include it
    return _usage(
        prompt,
        completion,
        total,
        cached=_get(raw, "prompt_tokens_details", "cached_tokens"),
        cache_creation=_get(raw, "prompt_tokens_details", "cache_write_tokens"),
        reasoning=reasoning,
    )


def _chat(payloads: list[Payload]) -> Expected:
    text: list[str] = []
    reasoning: list[str] = []
    refusal: list[str] = []
    calls: list[_Call] = []
    by_index: dict[int, _Call] = {}
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    error: str | None = None
    for event_name, chunk in payloads:
        if event_name == "error" or ("error" in chunk and "choices" not in chunk):
            error = _get(chunk, "error", "message") or json.dumps(chunk.get("error"))
            break
        raw_usage = chunk.get("usage")
        if raw_usage:
            usage = _chat_usage(raw_usage)
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # n > 1: the pipeline follows the first choice
            delta = choice.get("delta") or {}
            _chat_content(delta.get("content"), text, reasoning)
            reasoning.append(_chat_reasoning(delta))
            refusal.append(delta.get("refusal") or "")
            for piece in delta.get("tool_calls") or ():
                function = piece.get("function") or {}
                index = piece.get("index")
                call = by_index.get(index) if index is not None else None
                if index is None and calls and not (piece.get("id") and piece["id"] != calls[-1].call_id):
                    call = calls[-1]  # no index, same (or no) id: the last call goes on
                if call is None:
                    call = _Call(len(calls), piece.get("id"), function.get("name"))
                    calls.append(call)
                    if index is not None:
                        by_index[index] = call
                call.identify(piece.get("id"), function.get("name"))
                call.add(function.get("arguments"))
            if choice.get("finish_reason"):
                finish_reason = choice["finish_reason"]
    if finish_reason == "function_call":
        finish_reason = "tool_calls"
    return Expected(
        "".join(text),
        "".join(reasoning),
        [call.result() for call in calls],
        finish_reason,
        usage,
        error,
        "".join(refusal),
    )


# --------------------------------------------------------------------------------------------------
# OpenAI Responses

_RESPONSES_CLIENT_ACTIONS = {
    "local_shell_call": "action",
    "shell_call": "action",
    "computer_call": "action",
    "apply_patch_call": "operation",
}
"""Built-in calls the client executes: their arguments are this field of the finished item."""


def _responses_server_input(item: Mapping[str, Any]) -> dict[str, Any]:
    """What a provider-executed built-in call searched for or ran (its folded arguments)."""
    item_type = item.get("type")
    if item_type == "web_search_call":
        return {key: value for key, value in (item.get("action") or {}).items() if key != "sources"}
    if item_type == "file_search_call":
        return {"queries": item.get("queries") or []}
    return {"code": item.get("code") or "", "container_id": item.get("container_id")}


_RESPONSES_SERVER_CALLS = ("web_search_call", "file_search_call", "code_interpreter_call")


def _responses(payloads: list[Payload]) -> Expected:
    text: list[str] = []
    reasoning: list[str] = []
    refusal: list[str] = []
    calls: list[_Call] = []
    by_output: dict[int, _Call] = {}
    status: str | None = None
    incomplete_reason: str | None = None
    usage: dict[str, int] | None = None
    error: str | None = None
    for _, event in payloads:
        kind = event.get("type", "")
        if kind in ("response.output_item.added", "response.output_item.done"):
            _responses_item(event, calls, by_output)
        elif kind in ("response.output_text.delta",):
            text.append(event.get("delta") or "")
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            reasoning.append(event.get("delta") or "")
        elif kind == "response.refusal.delta":
            refusal.append(event.get("delta") or "")
        elif kind in (
            "response.function_call_arguments.delta",
            "response.custom_tool_call_input.delta",
            "response.mcp_call_arguments.delta",
        ):
            by_output[event["output_index"]].add(event.get("delta"))
        elif kind in ("response.function_call_arguments.done", "response.mcp_call_arguments.done"):
            _fill_unstreamed(by_output[event["output_index"]], event.get("arguments"))
        elif kind == "response.custom_tool_call_input.done":
            _fill_unstreamed(by_output[event["output_index"]], event.get("input"))
        elif kind in ("response.completed", "response.incomplete"):
            response = event.get("response") or {}
            status = response.get("status")
            incomplete_reason = _get(response, "incomplete_details", "reason")
            raw = response.get("usage")
            if raw:
                usage = _usage(
                    raw.get("input_tokens"),
                    raw.get("output_tokens"),
                    raw.get("total_tokens"),
                    cached=_get(raw, "input_tokens_details", "cached_tokens"),
                    cache_creation=_get(raw, "input_tokens_details", "cache_write_tokens"),
                    reasoning=_get(raw, "output_tokens_details", "reasoning_tokens"),
                )
        elif kind == "error":
            error = event.get("message") or json.dumps(event)
            break
    finish: str | None = None
    if status == "completed":
        client_calls = any(not call.provider_executed for call in calls)
        finish = "tool_calls" if client_calls else "stop"
    elif status == "incomplete":
        finish = {"max_output_tokens": "length", "content_filter": "content_filter"}.get(
            incomplete_reason or "", incomplete_reason
        )
    elif status is not None:
        finish = status.lower()
    return Expected(
        "".join(text),
        "".join(reasoning),
        [call.result() for call in calls],
        finish,
        usage,
        error,
        "".join(refusal),
    )


def _responses_item(event: Mapping[str, Any], calls: list[_Call], by_output: dict[int, _Call]) -> None:
    """An output item was added or finished: start a call, or fill in what only the finished item has."""
    output_index = event["output_index"]
    item = event["item"]
    item_type = item.get("type", "")
    done = event.get("type") == "response.output_item.done"
    call = by_output.get(output_index)
    if call is None:
        if item_type == "function_call":
            call = _Call(len(calls), item.get("call_id"), item.get("name"))
        elif item_type == "custom_tool_call":
            call = _Call(len(calls), item.get("call_id"), item.get("name"), free_text=True)
        elif item_type == "mcp_call":
            call_id = item.get("call_id") or item.get("id")
            call = _Call(len(calls), call_id, item.get("name"), provider_executed=True)
        elif item_type == "shell_call" and (item.get("environment") or {}).get("type", "local") != "local":
            call = _Call(len(calls), item.get("call_id"), "shell", provider_executed=True)  # hosted
        elif item_type in _RESPONSES_CLIENT_ACTIONS:
            call = _Call(len(calls), item.get("call_id"), item_type.removesuffix("_call"))
        elif item_type in _RESPONSES_SERVER_CALLS:
            name = item_type.removesuffix("_call")
            call = _Call(len(calls), item.get("id"), name, provider_executed=True)
        else:
            return
        calls.append(call)
        by_output[output_index] = call
    if item_type in _RESPONSES_CLIENT_ACTIONS:
        call.whole = item.get(_RESPONSES_CLIENT_ACTIONS[item_type]) or {}
    elif item_type in _RESPONSES_SERVER_CALLS:
        call.whole = _responses_server_input(item)
    elif done:
        _fill_unstreamed(call, item.get("input") if call.free_text else item.get("arguments"))


def _fill_unstreamed(call: _Call, whole_text: str | None) -> None:
    """A ``.done`` event repeats the whole text; it counts only when no delta streamed it (LM Studio)."""
    if not call.parts:
        call.add(whole_text)


# --------------------------------------------------------------------------------------------------
# Gemini generateContent (whole functionCall parts, or Gemini 3 partialArgs) and the Interactions API

_GEMINI_FILTERED = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
)
_JSON_PATH_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\['([^']*)'\]")


def _json_path(path: str) -> list[str | int]:
    """``$.recipe.steps[1].name`` -> ``["recipe", "steps", 1, "name"]`` (the subset Gemini sends)."""
    if not path.startswith("$"):
        raise ValueError(f"not a JSON path: {path!r}")
    steps: list[str | int] = []
    at = 1
    while at < len(path):
        match = _JSON_PATH_STEP.match(path, at)
        if match is None:
            raise ValueError(f"JSON path {path!r}: cannot read from character {at}")
        name, number, quoted = match.groups()
        steps.append(int(number) if number is not None else (name if name is not None else quoted))
        at = match.end()
    return steps


def _place(root: JSONObject, path: list[str | int], value: Any, *, append: bool) -> None:
    """Set (or, for a streamed string, extend) the value at ``path``, creating containers on the way."""
    if not path:
        raise ValueError("a partial argument must name a member of the arguments object")
    container: Any = root
    for step, following in itertools.pairwise(path):
        fresh: Any = [] if isinstance(following, int) else {}
        if isinstance(step, int):
            while len(container) <= step:
                container.append(None)
            if container[step] is None:
                container[step] = fresh
        elif step not in container:
            container[step] = fresh
        container = container[step]
    last = path[-1]
    if isinstance(last, int):
        while len(container) <= last:
            container.append(None)
        current = container[last]
    else:
        current = container.get(last)
    if append and isinstance(current, str):
        value = current + value
    container[last] = value


def _apply_partial_args(arguments: JSONObject, partial_args: Iterable[Mapping[str, Any]]) -> None:
    for partial in partial_args:
        path = _json_path(partial["jsonPath"])
        if "stringValue" in partial:
            _place(arguments, path, partial["stringValue"], append=True)
        elif "numberValue" in partial:
            _place(arguments, path, partial["numberValue"], append=False)
        elif "boolValue" in partial:
            _place(arguments, path, partial["boolValue"], append=False)
        elif "nullValue" in partial:
            _place(arguments, path, None, append=False)
        else:
            raise ValueError(f"partial argument without a value: {partial!r}")


def _gemini_usage(metadata: Mapping[str, Any]) -> dict[str, int]:
    thoughts = metadata.get("thoughtsTokenCount")
    candidates = metadata.get("candidatesTokenCount") or 0
    return _usage(
        metadata.get("promptTokenCount"),
        candidates + (thoughts or 0),
        metadata.get("totalTokenCount"),
        cached=metadata.get("cachedContentTokenCount"),
        reasoning=thoughts,
    )


def _gemini(payloads: list[Payload]) -> Expected:
    if payloads and "event_type" in payloads[0][1]:
        return _gemini_interactions(payloads)
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[_Call] = []
    streaming: _Call | None = None
    """The call whose arguments still arrive as partialArgs (``willContinue``)."""
    streamed_arguments: JSONObject = {}
    finish: str | None = None
    usage: dict[str, int] | None = None
    for _, chunk in payloads:
        metadata = chunk.get("usageMetadata")
        if metadata and "promptTokenCount" in metadata:
            usage = _gemini_usage(metadata)
        candidates = chunk.get("candidates") or [{}]
        candidate = candidates[0]
        for part in _get(candidate, "content", "parts") or ():
            function_call = part.get("functionCall")
            if function_call is None:
                if isinstance(part.get("text"), str):
                    (reasoning if part.get("thought") else text).append(part["text"])
                continue
            if streaming is None:
                streaming = _Call(len(calls), function_call.get("id"), function_call.get("name"))
                calls.append(streaming)
                streamed_arguments = streaming.whole = dict(function_call.get("args") or {})
            _apply_partial_args(streamed_arguments, function_call.get("partialArgs") or ())
            if not function_call.get("willContinue"):
                streaming = None
        if candidate.get("finishReason"):
            finish = candidate["finishReason"]
    finish_reason: str | None = None
    if finish == "STOP":
        finish_reason = "tool_calls" if calls else "stop"
    elif finish == "MAX_TOKENS":
        finish_reason = "length"
    elif finish in _GEMINI_FILTERED:
        finish_reason = "content_filter"
    elif finish is not None:
        finish_reason = finish.lower()
    return Expected(
        "".join(text), "".join(reasoning), [call.result() for call in calls], finish_reason, usage
    )


def _gemini_interactions(payloads: list[Payload]) -> Expected:
    """The Gemini Interactions API: ``step.start`` / ``step.delta`` / ``step.stop`` per output step.

    Only what the recording shows is modelled: a thought step (signature only) and a function call step
    whose arguments stream as text.
    """
    calls: list[_Call] = []
    by_step: dict[int, _Call] = {}
    status: str | None = None
    usage: dict[str, int] | None = None
    for _, event in payloads:
        kind = event.get("event_type")
        if kind == "step.start":
            step = event["step"]
            if step.get("type") == "function_call":
                call = _Call(len(calls), step.get("id"), step.get("name"))
                call.whole = step.get("arguments") or {}
                calls.append(call)
                by_step[event["index"]] = call
        elif kind == "step.delta":
            delta = event["delta"]
            if delta.get("type") == "arguments_delta":
                by_step[event["index"]].add(delta.get("arguments"))
        elif kind == "interaction.completed":
            interaction = event["interaction"]
            status = interaction.get("status")
            raw = interaction.get("usage")
            if raw:
                thoughts = raw.get("total_thought_tokens")
                usage = _usage(
                    raw.get("total_input_tokens"),
                    (raw.get("total_output_tokens") or 0) + (thoughts or 0),
                    raw.get("total_tokens"),
                    cached=raw.get("total_cached_tokens"),
                    reasoning=thoughts,
                )
    finish: str | None = None
    if status in ("completed", "requires_action"):
        finish = "tool_calls" if calls else "stop"
    elif status is not None:
        finish = status.lower()
    return Expected("", "", [call.result() for call in calls], finish, usage)


# --------------------------------------------------------------------------------------------------
# Cohere v2 chat

_COHERE_FINISH = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    "MAX_TOKENS": "length",
    "TOOL_CALL": "tool_calls",
}


def _cohere(payloads: list[Payload]) -> Expected:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[_Call] = []
    by_index: dict[int, _Call] = {}
    finish: str | None = None
    usage: dict[str, int] | None = None
    for _, event in payloads:
        kind = event.get("type")
        message = _get(event, "delta", "message") or {}
        if kind == "content-delta":
            text.append(_get(message, "content", "text") or "")
        elif kind == "tool-plan-delta":
            reasoning.append(message.get("tool_plan") or "")
        elif kind == "tool-call-start":
            piece = message.get("tool_calls") or {}
            function = piece.get("function") or {}
            call = _Call(len(calls), piece.get("id"), function.get("name"))
            call.add(function.get("arguments"))
            calls.append(call)
            by_index[event["index"]] = call
        elif kind == "tool-call-delta":
            by_index[event["index"]].add(_get(message, "tool_calls", "function", "arguments"))
        elif kind == "message-end":
            delta = event.get("delta") or {}
            reason = delta.get("finish_reason")
            if reason:
                finish = _COHERE_FINISH.get(reason, reason.lower())
            tokens = _get(delta, "usage", "tokens")
            if tokens:
                usage = _usage(
                    tokens.get("input_tokens"),
                    tokens.get("output_tokens"),
                    cached=_get(delta, "usage", "cached_tokens"),
                )
    return Expected("".join(text), "".join(reasoning), [call.result() for call in calls], finish, usage)


def _converse(payloads: list[Payload]) -> Expected:
    """Bedrock ConverseStream: its own module, which reads the binary frames too."""
    from tests.reference_converse import converse

    return converse(payloads)


# --------------------------------------------------------------------------------------------------
# Ollama /api/chat and /api/generate: one JSON object a line, calls whole


def _ollama(payloads: list[Payload]) -> Expected:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ExpectedCall] = []
    finish: str | None = None
    usage: dict[str, int] | None = None
    for _, line in payloads:
        if "error" in line:
            return Expected("".join(text), "".join(reasoning), calls, None, None, error=str(line["error"]))
        # Chat nests its text in "message"; generate puts it at the top, its text named "response".
        part = line.get("message") or {"content": line.get("response"), **line}
        text.append(part.get("content") or "")
        reasoning.append(part.get("thinking") or "")
        for call in part.get("tool_calls") or []:
            function = call["function"]
            call_id = call.get("id") or call_id_for(len(calls))
            calls.append(ExpectedCall(call_id, function["name"], function.get("arguments") or {}))
        if line.get("done"):
            reason = line.get("done_reason") or "stop"
            finish = {"load": "stop", "unload": "stop"}.get(reason, reason)
            if finish == "stop" and calls:
                finish = "tool_calls"
            if "prompt_eval_count" in line or "eval_count" in line:
                usage = _usage(line.get("prompt_eval_count"), line.get("eval_count"))
    return Expected("".join(text), "".join(reasoning), calls, finish, usage)


_READERS: dict[str, Callable[[list[Payload]], Expected]] = {
    "anthropic": _anthropic,
    "gemini": _gemini,
    "openai_chat": _chat,
    "openai_compatible": _chat,
    "openai_responses": _responses,
    "cohere": _cohere,
    "bedrock_converse": _converse,
    "ollama": _ollama,
}

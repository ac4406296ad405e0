"""``POST /v1/messages``: Anthropic Messages in front of a Chat Completions upstream.

The request becomes a streamed Chat Completions request: ``system`` (a string or text blocks) a system
message; each message's blocks: ``text``, ``image`` (base64 as a data URL, or a URL), ``tool_use``
(an assistant ``tool_calls`` entry, ``input`` as JSON text), ``tool_result`` (a ``tool`` message, placed
before the user's other blocks; ``is_error`` prefixes ``Error: ``), ``thinking`` and
``redacted_thinking`` dropped (an open model's chat template drops past reasoning, and its thinking has
no signature to keep); ``tools`` (``input_schema`` as ``parameters``); ``tool_choice`` ``auto``, ``any``
(``required``), ``tool`` (a named function), ``none``, with ``disable_parallel_tool_use`` as
``parallel_tool_calls: false``; ``max_tokens``, ``temperature``, ``top_p``, ``top_k``,
``stop_sequences`` (``stop``). ``thinking`` is not forwarded: the upstream decides whether the model
thinks; what it thinks comes back as thinking blocks. Server tools (a ``type`` such as
``web_search_20250305``) are refused with a 400.

The answer is `MessagesEncoder`'s events as SSE, or the Message when
``stream`` is not true; errors are Anthropic error bodies. The request's tool rules (``tools``,
``tool_choice``, ``disable_parallel_tool_use``, ``--unknown-tools``) apply as on the Chat route; a broken
one ends the answer as `MessagesWire` says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from operators.encode.anthropic import MessagesEncoder, anthropic_error
from pipeline._jsonenc import encode_json
from pipeline.models import ChunkResponse
from pipeline.proxy._front import (
    FrontDoor,
    RequestError,
    StreamCore,
    chat_pipeline,
    read_json,
    upstream_request,
)
from pipeline.proxy._requests import check_messages
from pipeline.proxy._shared import ProxyConfig
from pipeline.proxy.policy import TOOL_RULE_CODES

__all__ = ["MessagesWire", "chat_request", "messages_endpoint"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class MessagesWire:
    """`MessagesEncoder` framed as SSE, for `StreamCore`.

    A failure ends a stream with an ``error`` event whose message is led by the proxy's code, which
    ``error.details.error_code`` also carries (the anthropic SDK's ``APIStatusError.error_code``); a whole
    answer that failed is a 502 with that error, and, when the answer broke the request's tool rules, the
    Message built so far under ``error.details.message``.
    """

    __slots__ = ("encoder", "failure")

    def __init__(self, model: str) -> None:
        self.encoder = MessagesEncoder(model)
        self.failure: dict[str, Any] | None = None
        """The error body the answer ended with, if it did."""

    @property
    def ended(self) -> bool:
        return self.encoder.ended

    def feed(self, chunk: ChunkResponse) -> bytes:
        return _frames(self.encoder.feed(chunk))

    def finish(self) -> bytes:
        events = self.encoder.finish()
        if events and events[-1][0] == "error":  # the stream ended without a finish reason
            self.failure = _coded(events[-1][1], "upstream_truncated")
        return _frames(events)

    def fail(self, message: str, code: str) -> bytes:
        if self.encoder.ended:
            return b""
        events = self.encoder.fail(message)
        self.failure = _coded(events[-1][1], code)
        return _frames(events)

    def whole(self) -> tuple[int, dict[str, Any]]:
        if self.failure is None:
            return 200, self.encoder.message
        error = self.failure["error"]
        details = error.get("details")
        if isinstance(details, dict) and details.get("error_code") in TOOL_RULE_CODES:
            details = {**details, "message": self.encoder.message}  # what the model answered is not lost
            return 502, {**self.failure, "error": {**error, "details": details}}
        return 502, self.failure

    def error(self, status: int, message: str, code: str) -> dict[str, Any]:
        return _coded(anthropic_error(message, _ERROR_TYPES.get(status, "api_error")), code)


def _coded(body: dict[str, Any], code: str) -> dict[str, Any]:
    """An Anthropic error body with the proxy's ``code`` leading its message and in ``details``."""
    error = body["error"]
    error["message"] = f"{code}: {error['message']}"
    error["details"] = {"error_code": code}
    return body


def _frames(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        b"event: " + name.encode() + b"\ndata: " + encode_json(data) + b"\n\n" for name, data in events
    )


async def messages_endpoint(proxy: ProxyConfig, request: Request) -> Response:
    """``POST /v1/messages`` (see the module doc)."""
    try:
        payload = await read_json(proxy, request)
        check_messages(payload)
        chat = chat_request(payload)
    except RequestError as exc:
        return exc.response("anthropic")
    chunks = chat_pipeline(proxy, chat)
    core = StreamCore(chunks, MessagesWire(payload["model"]))
    return FrontDoor(
        proxy,
        upstream_request(proxy, request, chat),
        core,
        streaming=payload.get("stream") is True,
        route="messages",
        model=payload["model"],  # a str: check_messages refuses a request without one
    )


def chat_request(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The streamed Chat Completions request for a Messages request (see the module doc).

    Raises:
        RequestError: a field the proxy cannot translate, named.
    """
    chat: dict[str, Any] = {
        key: payload[key]
        for key in ("model", "max_tokens", "temperature", "top_p", "top_k")
        if payload.get(key) is not None
    }
    if payload.get("stop_sequences"):
        chat["stop"] = payload["stop_sequences"]
    chat["messages"] = _chat_messages(payload)
    tools = [_tool(tool, f"tools[{position}]") for position, tool in enumerate(payload.get("tools") or [])]
    if tools:
        chat["tools"] = tools
    choice = payload.get("tool_choice")
    if isinstance(choice, Mapping):
        chat["tool_choice"] = _tool_choice(choice)
        if choice.get("disable_parallel_tool_use") is True:
            chat["parallel_tool_calls"] = False
    chat["stream"] = True
    # The usage on every chunk (vLLM, SGLang): message_start then carries the input tokens.
    chat["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    return chat


def _chat_messages(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chat messages of a Messages request's ``system`` and ``messages``."""
    messages: list[dict[str, Any]] = []
    system = payload.get("system")
    if system:
        messages.append({"role": "system", "content": _text(system, "system")})
    raw_messages = payload.get("messages")
    if not isinstance(raw_messages, list):
        raise RequestError("messages must be a list")
    for position, message in enumerate(raw_messages):
        _add_message(messages, message, f"messages[{position}]")
    return messages


_CHOICE_WORDS = {"auto": "auto", "any": "required", "none": "none"}
"""Anthropic's ``tool_choice`` types that are a word in Chat Completions."""


def _tool_choice(choice: Mapping[str, Any]) -> object:
    """The chat ``tool_choice`` of an Anthropic one: a word, or a named function."""
    kind = choice.get("type")
    if isinstance(kind, str) and kind in _CHOICE_WORDS:
        return _CHOICE_WORDS[kind]
    if kind == "tool" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise RequestError(f"tool_choice {encode_json(choice).decode()} is not supported")


def _tool(tool: object, where: str) -> dict[str, Any]:
    if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
        raise RequestError(f"{where} must be an object with a name")
    if tool.get("type") not in (None, "custom"):
        raise RequestError(
            f"{where}: server tool {tool.get('type')!r} cannot be served by a Chat Completions upstream"
        )
    function: dict[str, Any] = {
        "name": tool["name"],
        "parameters": tool.get("input_schema") or {"type": "object"},
    }
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _text(content: object, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for number, block in enumerate(content):
            if not isinstance(block, Mapping) or block.get("type") != "text":
                raise RequestError(f"{where}[{number}] must be a text block")
            texts.append(str(block.get("text", "")))
        return "\n".join(texts)
    raise RequestError(f"{where} must be a string or a list of text blocks")


_IMAGE_SOURCES: Final[Mapping[object, tuple[str, ...]]] = {"base64": ("media_type", "data"), "url": ("url",)}
"""The fields each kind of image source needs (as strings): the data URL or the URL sent upstream."""


def _image(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if not isinstance(source, Mapping) or (names := _IMAGE_SOURCES.get(source.get("type"))) is None:
        raise RequestError(f"{where}: image source {source!r} is not supported", param=where)
    values = [source.get(name) for name in names]
    if not all(isinstance(value, str) and value for value in values):
        needs = " and ".join(names)
        raise RequestError(f"{where}.source: a {source['type']} image needs its {needs}", param=where)
    url = f"data:{values[0]};base64,{values[1]}" if len(values) == 2 else str(values[0])
    return {"type": "image_url", "image_url": {"url": url}}


def _add_message(messages: list[dict[str, Any]], message: object, where: str) -> None:
    if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
        raise RequestError(f"{where} must be an object with role user or assistant")
    role = message["role"]
    content = message.get("content")
    if isinstance(content, str):
        messages.append({"role": role, "content": content})
        return
    if not isinstance(content, list):
        raise RequestError(f"{where}.content must be a string or a list of blocks")
    _add_blocks(messages, role, content, where)


def _add_blocks(messages: list[dict[str, Any]], role: str, content: list[Any], where: str) -> None:
    """A message's blocks: each tool result as a ``tool`` message, then one message of the text, images
    and calls."""
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for number, block in enumerate(content):
        at = f"{where}.content[{number}]"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind in ("thinking", "redacted_thinking"):
            continue
        if kind == "tool_result" and role == "user":
            messages.append(_tool_message(block, at))
        elif kind == "tool_use" and role == "assistant":
            calls.append(_tool_call(block))
        elif kind in ("text", "image"):
            parts.append(_content_part(block, at))
        else:
            raise RequestError(f"{at}: block type {kind!r} is not supported in a {role} message")
    if parts or calls:
        messages.append(_chat_message(role, parts, calls))


def _content_part(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A chat content part of a ``text`` or ``image`` block."""
    if block.get("type") == "image":
        return _image(block, where)
    return {"type": "text", "text": str(block.get("text", ""))}


def _tool_call(block: Mapping[str, Any]) -> dict[str, Any]:
    """The chat ``tool_calls`` entry of a ``tool_use`` block."""
    arguments = encode_json(block.get("input") or {}).decode()
    return {
        "id": block.get("id"),
        "type": "function",
        "function": {"name": block.get("name"), "arguments": arguments},
    }


def _tool_message(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The chat ``tool`` message of a ``tool_result`` block."""
    result = block.get("content")
    text = result if isinstance(result, str) else _text(result or [], f"{where}.content")
    if block.get("is_error"):
        text = "Error: " + text
    return {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text}


def _chat_message(role: str, parts: list[dict[str, Any]], calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat message of ``parts`` (plain text when all are text) and ``calls``."""
    out: dict[str, Any] = {"role": role}
    if all(part["type"] == "text" for part in parts):
        out["content"] = "".join(part["text"] for part in parts) if parts else None
    else:
        out["content"] = parts
    if calls:
        out["tool_calls"] = calls
    return out

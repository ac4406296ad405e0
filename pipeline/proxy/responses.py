"""``POST /v1/responses``: the OpenAI Responses API in front of a Chat Completions upstream.

The request becomes a streamed Chat Completions request: ``instructions`` a system message first;
``input`` (a string, or items: messages with text and image parts, ``function_call`` items, which join
the assistant message before them, and ``function_call_output`` items, which become ``tool`` messages;
``reasoning`` items are dropped, as the open models' chat templates drop past reasoning); ``tools`` of
type ``function`` in the Chat shape; ``tool_choice``; ``max_output_tokens`` as ``max_tokens``;
``reasoning.effort`` as ``reasoning_effort``; ``text.format`` as ``response_format``; ``temperature``,
``top_p``, ``parallel_tool_calls``, ``user`` as they are. The proxy keeps no state: ``previous_response_id``
and non-function tools (``web_search``, ``file_search``, ...) are refused with a 400.

The answer is `ResponsesEncoder`'s events as SSE
(``event: <type>`` and ``data: {...}``), or the Response object when ``stream`` is not true. The
request's tool rules (``tools``, ``tool_choice``, ``parallel_tool_calls``, ``--unknown-tools``) apply
as on the Chat route; a broken one ends the answer as `ResponsesWire` says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from operators.encode.responses import ResponsesEncoder
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
from pipeline.proxy._requests import check_responses
from pipeline.proxy._shared import ProxyConfig
from pipeline.proxy.policy import TOOL_RULE_CODES

__all__ = ["ResponsesWire", "chat_request", "responses_endpoint"]


class ResponsesWire:
    """`ResponsesEncoder` framed as SSE, for `StreamCore`.

    A failure ends a stream with ``response.failed`` (error code ``server_error``, the message led by the
    proxy's code); a whole answer that failed is a 502 whose error carries the proxy's code, and, when the
    answer broke the request's tool rules, the Response built so far under ``response``.
    """

    __slots__ = ("encoder", "failure")

    def __init__(self, request: Mapping[str, Any]) -> None:
        self.encoder = ResponsesEncoder(request)
        self.failure: tuple[str, str] | None = None
        """Message and code of the failure that ended the answer, if one did."""

    @property
    def ended(self) -> bool:
        return self.encoder.ended

    def feed(self, chunk: ChunkResponse) -> bytes:
        return _frames(self.encoder.feed(chunk))

    def finish(self) -> bytes:
        return _frames(self.encoder.finish())

    def fail(self, message: str, code: str) -> bytes:
        if not self.encoder.ended:
            self.failure = (message, code)
        return _frames(self.encoder.fail(message, code=code))

    def whole(self) -> tuple[int, dict[str, Any]]:
        response = self.encoder.response
        if response["status"] != "failed":
            return 200, response
        if self.failure is None:  # the stream ended without a finish reason
            message = response["error"]["message"].removeprefix("upstream_truncated: ")
            return 502, self.error(502, message, "upstream_truncated")
        message, code = self.failure
        error = self.error(502, message, code)
        if code in TOOL_RULE_CODES:
            error["error"]["type"] = "invalid_response_error"
            error["error"]["response"] = response  # what the model answered is not lost
        return 502, error

    def error(self, status: int, message: str, code: str) -> dict[str, Any]:
        kind = "invalid_request_error" if 400 <= status < 500 else "upstream_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _frames(events: list[dict[str, Any]]) -> bytes:
    return b"".join(
        b"event: " + event["type"].encode() + b"\ndata: " + encode_json(event) + b"\n\n" for event in events
    )


async def responses_endpoint(proxy: ProxyConfig, request: Request) -> Response:
    """``POST /v1/responses`` (see the module doc)."""
    try:
        payload = await read_json(proxy, request)
        check_responses(payload)
        chat = chat_request(payload)
    except RequestError as exc:
        return exc.response()
    chunks = chat_pipeline(proxy, chat)
    core = StreamCore(chunks, ResponsesWire(payload))
    return FrontDoor(
        proxy,
        upstream_request(proxy, request, chat),
        core,
        streaming=payload.get("stream") is True,
        route="responses",
        model=payload["model"],  # a str: check_responses refuses a request without one
    )


_PASSED = ("model", "temperature", "top_p", "parallel_tool_calls", "user", "seed", "stop")


def chat_request(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The streamed Chat Completions request for a Responses request (see the module doc).

    Raises:
        RequestError: a field the proxy cannot translate, named.
    """
    if payload.get("previous_response_id"):
        raise RequestError(
            "the proxy keeps no responses: previous_response_id is not supported, send the whole input",
            "unsupported_parameter",
        )
    chat: dict[str, Any] = {key: payload[key] for key in _PASSED if payload.get(key) is not None}
    chat["messages"] = _messages(payload)
    chat.update((key, value) for key, read in _TRANSLATED if (value := read(payload)) is not None)
    chat["stream"] = True
    chat["stream_options"] = {"include_usage": True}
    return chat


def _tools(payload: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The chat tools of a Responses request; None when it has none."""
    return [_tool(tool, position) for position, tool in enumerate(payload.get("tools") or [])] or None


def _reasoning_effort(payload: Mapping[str, Any]) -> Any:
    reasoning = payload.get("reasoning")
    return (reasoning.get("effort") or None) if isinstance(reasoning, Mapping) else None


_TRANSLATED: Final[tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...]] = (
    ("tools", _tools),
    ("tool_choice", lambda payload: _tool_choice(payload.get("tool_choice"))),
    ("max_tokens", lambda payload: payload.get("max_output_tokens")),
    ("reasoning_effort", _reasoning_effort),
    ("response_format", lambda payload: _response_format(payload.get("text"))),
)
"""Each chat field a Responses request translates to, and how it is read (None: the field is left out)."""


def _messages(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chat messages of a Responses request's ``instructions`` and ``input``."""
    messages: list[dict[str, Any]] = []
    instructions = payload.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    items = payload.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    elif isinstance(items, list):
        for position, item in enumerate(items):
            _add_item(messages, item, position)
    elif items is not None:
        raise RequestError("input must be a string or a list of items")
    return messages


def _tool_choice(choice: object) -> object:
    """The chat ``tool_choice`` of a Responses one (a named function, or a word passed as is)."""
    if not isinstance(choice, Mapping):
        return choice
    if choice.get("type") != "function" or not isinstance(choice.get("name"), str):
        raise RequestError(f"tool_choice {encode_json(choice).decode()} is not supported", "unsupported_tool")
    return {"type": "function", "function": {"name": choice["name"]}}


def _response_format(text: object) -> dict[str, Any] | None:
    """The chat ``response_format`` of a Responses ``text.format`` (JSON schema or JSON object), if any."""
    text_format = text.get("format") if isinstance(text, Mapping) else None
    if not isinstance(text_format, Mapping):
        return None
    if text_format.get("type") == "json_schema":
        keys = ("name", "schema", "strict", "description")
        return {
            "type": "json_schema",
            "json_schema": {key: text_format[key] for key in keys if key in text_format},
        }
    if text_format.get("type") == "json_object":
        return {"type": "json_object"}
    return None


def _tool(tool: object, position: int) -> dict[str, Any]:
    if (
        not isinstance(tool, Mapping)
        or tool.get("type") != "function"
        or not isinstance(tool.get("name"), str)
    ):
        kind = tool.get("type") if isinstance(tool, Mapping) else type(tool).__name__
        raise RequestError(
            f"tools[{position}]: a Chat Completions upstream serves function tools only, not {kind!r}",
            "unsupported_tool",
        )
    function: dict[str, Any] = {"name": tool["name"]}
    for key in ("description", "parameters", "strict"):
        if tool.get(key) is not None:
            function[key] = tool[key]
    return {"type": "function", "function": function}


def _text_of(content: object, where: str) -> str | list[dict[str, Any]]:
    """Message content as Chat content: a string, or parts (text and images)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(f"{where}.content must be a string or a list of parts")
    parts = [_chat_part(part, f"{where}.content[{number}]") for number, part in enumerate(content)]
    if all(part["type"] == "text" for part in parts):
        return "".join(part["text"] for part in parts)
    return parts


def _chat_part(part: Any, where: str) -> dict[str, Any]:
    """The Chat content part of a text or image part."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        return {"type": "image_url", "image_url": {"url": part["image_url"]}}
    raise RequestError(f"{where}: part type {kind!r} is not supported")


def _add_item(messages: list[dict[str, Any]], item: object, position: int) -> None:
    where = f"input[{position}]"
    if not isinstance(item, Mapping):
        raise RequestError(f"{where} must be an object")
    kind = item.get("type", "message")
    if kind == "reasoning":
        return  # a Chat Completions upstream takes no reasoning back
    add = _ITEMS.get(kind) if isinstance(kind, str) else None
    if add is None:
        raise RequestError(f"{where}: item type {kind!r} is not supported")
    add(messages, item, where)


def _add_message(messages: list[dict[str, Any]], item: Mapping[str, Any], where: str) -> None:
    """A message item: a Chat message, a developer message as a system one."""
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise RequestError(f"{where}.role {role!r} is not supported")
    content = _text_of(item.get("content"), where)
    messages.append({"role": "system" if role == "developer" else role, "content": content})


def _add_function_call(messages: list[dict[str, Any]], item: Mapping[str, Any], where: str) -> None:
    """A ``function_call`` item: a call of the assistant message before it, or of a new one."""
    del where
    call = {
        "id": item.get("call_id"),
        "type": "function",
        "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"},
    }
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant" and isinstance(last.get("content"), str | None):
        last.setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _add_function_output(messages: list[dict[str, Any]], item: Mapping[str, Any], where: str) -> None:
    """A ``function_call_output`` item: a ``tool`` message."""
    output = item.get("output")
    content = output if isinstance(output, str) else _text_of(output, where)
    messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": content})


_ITEMS: dict[str, Callable[[list[dict[str, Any]], Mapping[str, Any], str], None]] = {
    "message": _add_message,
    "function_call": _add_function_call,
    "function_call_output": _add_function_output,
}

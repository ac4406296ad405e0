"""The proxy's request edge: a client's body read as a JSON object, and its fields' types checked.

Every route answers a bad request with a 400 in its own API's error shape, never a 500:
`RequestError` carries the status, the message, the field (``param``) and the code, and renders
itself as an OpenAI error (``/v1/chat/completions``, ``/v1/responses``) or an Anthropic one
(``/v1/messages``). `decode_object` reads the body (bytes that are not UTF-8, JSON nested deeper
than the decoder's recursion limit, anything but an object: 400). `check_responses` and
`check_messages` check the fields the translation reads against msgspec models (strictly: ``5.5``
is not an integer, ``"true"`` not a boolean) and refuse a request without ``model`` as the real APIs do.
Fields the proxy does not read pass unchecked, as the upstream reads them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

import msgspec

from pipeline._jsonenc import encode_json, json_problem

if TYPE_CHECKING:
    from starlette.responses import Response

__all__ = ["RequestError", "check_messages", "check_responses", "decode_object"]

Dialect = Literal["openai", "responses", "anthropic"]
"""Whose words a missing field is reported in: the Chat API's, the Responses API's, Anthropic's."""

_ANTHROPIC_TYPES: Final = {413: "request_too_large"}
"""Anthropic's error ``type`` by status; any other status is an ``invalid_request_error``."""


class RequestError(Exception):
    """A client request the proxy refuses: ``status`` (400, 413), what is wrong, the field, a code."""

    def __init__(
        self, message: str, code: str = "invalid_request", *, param: str | None = None, status: int = 400
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.param = param
        self.status = status

    def openai_body(self) -> dict[str, Any]:
        """``{"error": {"message", "type", "param", "code"}}``."""
        return {
            "error": {
                "message": self.message,
                "type": "invalid_request_error",
                "param": self.param,
                "code": self.code,
            }
        }

    def anthropic_body(self) -> dict[str, Any]:
        """``{"type": "error", "error": {"type", "message"}}``."""
        kind = _ANTHROPIC_TYPES.get(self.status, "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": self.message}}

    def response(self, dialect: Dialect = "openai") -> Response:
        """The error answer (a Starlette ``Response``) in ``dialect``'s shape."""
        from starlette.responses import Response

        body = self.anthropic_body() if dialect == "anthropic" else self.openai_body()
        return Response(encode_json(body), status_code=self.status, media_type="application/json")


def too_large(limit: int) -> RequestError:
    """The 413 of a body over ``max_request_bytes``."""
    return RequestError(
        f"the request body is larger than max_request_bytes={limit}", "request_too_large", status=413
    )


def decode_object(body: bytes) -> dict[str, Any]:
    """``body`` as a JSON object.

    Raises:
        RequestError: not UTF-8, not JSON, nested too deeply, or not an object (400).
    """
    try:
        payload = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise RequestError(f"the request body is {json_problem(exc, body, None)}", "invalid_json") from None
    except UnicodeDecodeError as exc:
        raise RequestError(f"the request body is not valid UTF-8 ({exc.reason})", "invalid_json") from None
    except RecursionError:
        raise RequestError("the request body is JSON nested too deeply", "invalid_json") from None
    if not isinstance(payload, dict):
        raise RequestError("the request body must be a JSON object", "invalid_json")
    return payload


# --- the models -------------------------------------------------------------------------------------------

_Json = dict[str, Any]


class _ResponsesTool(msgspec.Struct):
    type: str
    name: str | None = None
    description: str | None = None
    parameters: _Json | None = None
    strict: bool | None = None


class _Reasoning(msgspec.Struct):
    effort: str | None = None


class _TextFormat(msgspec.Struct):
    type: str
    name: str | None = None
    schema: _Json | None = None
    strict: bool | None = None
    description: str | None = None


class _TextOptions(msgspec.Struct):
    format: _TextFormat | None = None


class _ResponsesRequest(msgspec.Struct):
    model: str
    input: str | list[_Json] | None = None
    instructions: str | None = None
    tools: list[_ResponsesTool] | None = None
    tool_choice: str | _Json | None = None
    stream: bool | None = None
    previous_response_id: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    reasoning: _Reasoning | None = None
    text: _TextOptions | None = None


class _ResponsesPart(msgspec.Struct):
    type: str
    text: str | None = None
    image_url: str | None = None


class _MessageItem(msgspec.Struct):
    role: str
    content: str | list[_ResponsesPart]


class _FunctionCallItem(msgspec.Struct):
    call_id: str
    name: str
    arguments: str | None = None


class _FunctionCallOutputItem(msgspec.Struct):
    call_id: str
    output: str | list[_ResponsesPart]


_RESPONSES_ITEMS: Final[Mapping[str, type[msgspec.Struct]]] = {
    "message": _MessageItem,
    "function_call": _FunctionCallItem,
    "function_call_output": _FunctionCallOutputItem,
}


class _AnthropicTool(msgspec.Struct):
    name: str
    type: str | None = None
    description: str | None = None
    input_schema: _Json | None = None


class _AnthropicToolChoice(msgspec.Struct):
    type: str
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class _AnthropicMessage(msgspec.Struct):
    role: str
    content: str | list[_Json]


class _TextBlock(msgspec.Struct):
    type: str
    text: str


class _MessagesRequest(msgspec.Struct):
    model: str
    messages: Annotated[list[_AnthropicMessage], msgspec.Meta(min_length=1)]
    max_tokens: int | None = None
    system: str | list[_TextBlock] | None = None
    tools: list[_AnthropicTool] | None = None
    tool_choice: _AnthropicToolChoice | None = None
    stream: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop_sequences: list[str] | None = None


class _ImageSource(msgspec.Struct):
    type: str
    media_type: str | None = None
    data: str | None = None
    url: str | None = None


class _ImageBlock(msgspec.Struct):
    source: _ImageSource


class _ToolUseBlock(msgspec.Struct):
    id: str
    name: str
    input: _Json | None = None


class _ToolResultBlock(msgspec.Struct):
    tool_use_id: str
    content: str | list[_TextBlock] | None = None
    is_error: bool | None = None


_ANTHROPIC_BLOCKS: Final[Mapping[str, type[msgspec.Struct]]] = {
    "text": _TextBlock,
    "image": _ImageBlock,
    "tool_use": _ToolUseBlock,
    "tool_result": _ToolResultBlock,
}


# --- the checks -------------------------------------------------------------------------------------------


def check_responses(payload: Mapping[str, Any]) -> None:
    """Check the fields of a ``/v1/responses`` request the proxy reads.

    Raises:
        RequestError: a missing ``model`` or a field of the wrong type, named in ``param``.
    """
    _convert(payload, _ResponsesRequest, "", "responses")
    items = payload.get("input")
    if isinstance(items, list):
        for position, item in enumerate(items):
            kind = item.get("type", "message")
            _check_kind(kind, f"input[{position}]", "responses")
            model = _RESPONSES_ITEMS.get(kind)
            if model is not None:
                _convert(item, model, f"input[{position}]", "responses")


def check_messages(payload: Mapping[str, Any]) -> None:
    """Check the fields of a ``/v1/messages`` request the proxy reads.

    Raises:
        RequestError: a missing ``model`` or ``messages``, or a field of the wrong type, named.
    """
    _convert(payload, _MessagesRequest, "", "anthropic")
    for position, message in enumerate(payload["messages"]):
        content = message["content"]
        if isinstance(content, list):
            for number, block in enumerate(content):
                where = f"messages[{position}].content[{number}]"
                kind = block.get("type")
                _check_kind(kind, where, "anthropic")
                model = _ANTHROPIC_BLOCKS.get(kind)
                if model is not None:
                    _convert(block, model, where, "anthropic")


def _check_kind(kind: object, where: str, dialect: Dialect) -> None:
    if not isinstance(kind, str):
        param = f"{where}.type"
        if kind is None:
            raise _missing(param, dialect)
        message = f"{param}: Expected `str`, got `{type(kind).__name__}`"
        raise RequestError(message, "invalid_type", param=param)


_PATH: Final = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_MISSING: Final = re.compile(r"^Object missing required field `(?P<field>[^`]+)`")


def _convert(value: Any, model: type[msgspec.Struct], where: str, dialect: Dialect) -> None:
    try:
        msgspec.convert(value, model, strict=True)
    except msgspec.ValidationError as exc:
        raise _type_error(str(exc), where, dialect) from None


def _type_error(text: str, where: str, dialect: Dialect) -> RequestError:
    """msgspec's validation message as the route's 400: the path as ``param`` (``tools[0].name``)."""
    found = _PATH.search(text)
    path = where + (found["path"] if found else "")
    reason = text[: found.start()] if found else text
    missing = _MISSING.match(reason)
    if missing:
        return _missing(f"{path}.{missing['field']}".lstrip("."), dialect)
    param = path.lstrip(".")
    return RequestError(f"{param}: {reason}", "invalid_type", param=param)


def _missing(param: str, dialect: Dialect) -> RequestError:
    """A missing field, in the words the real API uses."""
    if dialect == "anthropic":
        return RequestError(f"{param}: Field required", "missing_required_parameter", param=param)
    return RequestError(f"Missing required parameter: '{param}'.", "missing_required_parameter", param=param)

"""Request semantics the proxy applies to the calls it rewrites, as a model server applies them.

`ToolPolicy` is read from a Chat Completions request (``tools``, ``tool_choice``,
``parallel_tool_calls``); `ToolPolicyFilter` is its sans-IO stage (chunks in, chunks out, placed
after the delimiter rewriter) and `ToolPolicy.apply_to_completion` its form for a whole answer.
The front doors ``/v1/responses`` and ``/v1/messages`` read it from the Chat request they translate
theirs into and run the same stage, so the rules mean the same on all three routes; each reports a
broken rule in its own error shape (`pipeline.proxy.responses`, `pipeline.proxy.messages`).

The policy choices, documented in docs/proxy.md:

- A call whose name is not among the request's ``tools`` (or, with a named ``tool_choice``, is not that
  function) stays text by default (``unknown_tools="text"``): the delimiter rewriter, told the offered
  names (`ToolPolicy.offered_names`), gives back the text the model wrote for it, markers and all,
  where it was (`operators.delimiters._guard`; where that text cannot be told apart it is dropped).
  ``"drop"`` drops it, as SGLang's tool parsers drop a call to an undefined function; ``"refuse"`` ends
  the answer with an error (``unknown_tool``); ``"allow"`` lets it pass.
- ``parallel_tool_calls: false`` keeps the first call; later ones are dropped.
- Dropped calls are renumbered away (the client sees indices 0, 1, ...), and a ``finish_reason`` of
  ``tool_calls`` becomes ``stop`` again when no call is left.
- ``tool_choice: "required"`` (or a named function) that the model did not honour (no call kept; for a
  named function, no call to it kept, even when ``"allow"`` kept a call to another one) ends
  the answer with an error, code ``tool_choice_not_satisfied``, after everything the model wrote: a
  stream's last event is that error instead of ``[DONE]``; a whole answer is a 502 whose error object
  carries the rewritten completion under ``completion``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

import msgspec

from pipeline.errors import ConfigurationError, StreamfoldError
from pipeline.models import ChunkResponse, ToolCallDelta

__all__ = [
    "TOOL_RULE_CODES",
    "UNKNOWN_TOOLS",
    "ToolChoiceError",
    "ToolPolicy",
    "ToolPolicyFilter",
    "UnknownTools",
]

UnknownTools: TypeAlias = Literal["text", "drop", "refuse", "allow"]
UNKNOWN_TOOLS: Final[tuple[UnknownTools, ...]] = ("text", "drop", "refuse", "allow")
"""What to do with a call to a tool the request does not offer (the first is the default)."""


TOOL_RULE_CODES: Final = frozenset({"unknown_tool", "tool_choice_not_satisfied"})
"""The error codes of `ToolChoiceError`: an answer that breaks the request's tool rules."""


class ToolChoiceError(StreamfoldError):
    """The model's calls break the request's tool rules: ``code`` says which (``unknown_tool``,
    ``tool_choice_not_satisfied``)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class ToolPolicy(msgspec.Struct, frozen=True):
    """The tool rules of one request.

    ``names``: the names a call may have (``None``: any); ``required``: a call must be made (a name:
    that function must be called); ``parallel``: more than one call is allowed; ``unknown_tools``: what
    happens to a call whose name is not in ``names``.
    """

    names: frozenset[str] | None = None
    required: bool | str = False
    parallel: bool = True
    unknown_tools: UnknownTools = "text"

    @classmethod
    def from_request(cls, payload: Mapping[str, Any], unknown_tools: UnknownTools = "text") -> ToolPolicy:
        """The rules of a Chat Completions request body (malformed fields are read as absent)."""
        if unknown_tools not in UNKNOWN_TOOLS:
            raise ConfigurationError(
                f"unknown unknown_tools {unknown_tools!r}; expected one of: {', '.join(UNKNOWN_TOOLS)}"
            )
        names = _offered_names(payload.get("tools"))
        choice = payload.get("tool_choice")
        required: bool | str = choice == "required"
        name = _function_name(choice)
        if name is not None:
            required = name
            names = {name}
        return cls(
            names=frozenset(names),
            required=required,
            parallel=payload.get("parallel_tool_calls") is not False,
            unknown_tools=unknown_tools,
        )

    @property
    def offered_names(self) -> frozenset[str] | None:
        """The names the delimiter rewriter is told, so that calls to other tools stay text (``None``:
        it is not told, with any other ``unknown_tools``)."""
        return self.names if self.unknown_tools == "text" else None

    @property
    def is_trivial(self) -> bool:
        """Whether the rules change nothing (so no stage is needed)."""
        return (self.names is None or self.unknown_tools == "allow") and not self.required and self.parallel

    def apply_to_completion(self, completion: dict[str, Any]) -> dict[str, Any]:
        """A whole (rewritten) ``chat.completion`` with the rules applied to each choice's calls.

        Raises:
            ToolChoiceError: a call to an unknown tool with ``unknown_tools="refuse"``, or a required
                call not made.
        """
        choices = completion.get("choices")
        if not isinstance(choices, list):
            return completion
        result = dict(completion)
        result["choices"] = [self._apply_to_choice(choice) for choice in choices]
        return result

    def _apply_to_choice(self, choice: object) -> object:
        if not isinstance(choice, Mapping) or not isinstance(message := choice.get("message"), Mapping):
            return choice
        calls = message.get("tool_calls")
        if not isinstance(calls, list):
            self.check_made(0)
            return choice
        kept = self._kept_calls(calls)
        if len(kept) == len(calls):
            return choice
        if kept:
            return {**choice, "message": {**message, "tool_calls": kept}}
        # No call left: the message loses its tool_calls and the choice no longer ends with them.
        new_message = dict(message)
        del new_message["tool_calls"]
        new_choice = {**choice, "message": new_message}
        if new_choice.get("finish_reason") == "tool_calls":
            new_choice["finish_reason"] = "stop"
        return new_choice

    def _kept_calls(self, calls: list[Any]) -> list[Any]:
        """The calls of a whole message the rules keep; raises when a required call is not among them."""
        kept: list[Any] = []
        named_made = False
        for call in calls:
            name = _function_name(call)
            if self.admits(name, len(kept)):
                kept.append(call)
                named_made = named_made or name == self.required
        self.check_made(len(kept), named_made)
        return kept

    def admits(self, name: str | None, kept: int) -> bool:
        """Whether a call named ``name`` is kept when ``kept`` calls were kept before it.

        Raises:
            ToolChoiceError: an unknown name with ``unknown_tools="refuse"``.
        """
        names = self.names
        if names is not None and name not in names and self.unknown_tools != "allow":
            if self.unknown_tools == "refuse":
                offered = ", ".join(sorted(names)) or "none"
                raise ToolChoiceError(
                    f"the model called the tool {name!r}, which the request does not offer "
                    f"(tools: {offered})",
                    "unknown_tool",
                )
            return False
        return self.parallel or kept == 0

    def check_made(self, kept: int, named_made: bool = False) -> None:
        """Raises `ToolChoiceError` when a required call was not made (``kept`` calls kept;
        ``named_made``: one of them called the function a named ``tool_choice`` requires, which a call
        to another function kept by ``unknown_tools="allow"`` does not satisfy)."""
        required = self.required
        if not required or (kept and (not isinstance(required, str) or named_made)):
            return
        wanted = f"the function {required!r}" if isinstance(required, str) else "a tool"
        raise ToolChoiceError(
            f"tool_choice requires {wanted} to be called, but the model answered without a call",
            "tool_choice_not_satisfied",
        )


def _function_name(entry: object) -> str | None:
    """The ``function.name`` of a tool, tool choice or call, if it has one."""
    return _name(entry.get("function")) if isinstance(entry, Mapping) else None


def _name(spec: object) -> str | None:
    """The ``name`` string of a mapping, if it has one."""
    name = spec.get("name") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) else None


def _offered_names(tools: object) -> set[str]:
    """The names of a request's tools: ``{"type": "function", "function": {...}}`` or ``"custom"``."""
    names: set[str] = set()
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, Mapping):
            names.update(n for kind in ("function", "custom") if (n := _name(tool.get(kind))) is not None)
    return names


_DROPPED: Final = -1


class ToolPolicyFilter:
    """Sans-IO stage: chunks in, chunks with the calls that break ``policy`` removed (see the module doc).

    It holds nothing: each chunk is answered at once. `dropped` counts the calls removed.
    """

    __slots__ = ("_policy", "_positions", "dropped", "kept", "named_made")

    def __init__(self, policy: ToolPolicy) -> None:
        self._policy = policy
        self._positions: dict[int, int] = {}
        """A call's incoming index -> its outgoing index, or ``_DROPPED``."""
        self.kept = 0
        self.dropped = 0
        self.named_made = False
        """A kept call named the function a named ``tool_choice`` requires."""

    def feed(self, item: ChunkResponse) -> list[ChunkResponse]:
        calls = item.tool_calls
        finish = item.finish_reason
        if self._passes_unchanged(calls, finish):
            return [item]
        changes: dict[str, Any] = {}
        if calls:
            kept = self._kept_calls(item, calls)
            if kept != calls:  # a call dropped or moved (a kept call in place is the same object)
                changes["tool_calls"] = kept or None
        if finish == "tool_calls" and not self.kept:
            changes["finish_reason"] = "stop"
        if not changes:
            return [item]
        item = msgspec.structs.replace(item, **changes)
        if not item.tool_calls and not _carries(item):
            return []
        return [item]

    def _passes_unchanged(self, calls: list[ToolCallDelta] | None, finish: str | None) -> bool:
        """Whether a chunk passes as it is: it has no calls and does not end with ``tool_calls``, or it
        is the next piece of a kept call that kept its position (the common case)."""
        if not calls:
            return finish != "tool_calls"
        return len(calls) == 1 and finish is None and self._positions.get(calls[0].index) == calls[0].index

    def _kept_calls(self, item: ChunkResponse, calls: list[ToolCallDelta]) -> list[ToolCallDelta]:
        """The calls of ``item`` the policy admits, at their outgoing positions.

        Raises:
            ToolChoiceError: a call the policy refuses outright; what the chunk carried before it is
                kept in the error's ``partial_outputs``.
        """
        kept: list[ToolCallDelta] = []
        try:
            for call in calls:
                admitted = self._call(call)
                if admitted is not None:
                    kept.append(admitted)
        except ToolChoiceError as exc:
            partial = ChunkResponse(content=item.content, reasoning=item.reasoning, tool_calls=kept or None)
            exc.partial_outputs = [partial] if kept or item.content or item.reasoning else []
            raise
        return kept

    def finish(self) -> list[ChunkResponse]:
        self._policy.check_made(self.kept, self.named_made)
        return []

    def _call(self, call: ToolCallDelta) -> ToolCallDelta | None:
        position = self._positions.get(call.index)
        if position is None:
            if self._policy.admits(call.name, self.kept):
                position = self.kept
                self.kept += 1
                if call.name == self._policy.required:  # (a name, never a bool)
                    self.named_made = True
            else:
                position = _DROPPED
                self.dropped += 1
            self._positions[call.index] = position
        if position == _DROPPED:
            return None
        return call if position == call.index else msgspec.structs.replace(call, index=position)


def _carries(item: ChunkResponse) -> bool:
    """Whether a chunk whose calls were all dropped still says something."""
    return bool(
        item.content
        or item.reasoning
        or item.finish_reason
        or item.usage
        or item.is_complete
        or item.refusal
        or item.metadata
    )

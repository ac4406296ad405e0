"""A tool registry: functions the agent may call, with pydantic-typed arguments.

::

    tools = ToolRegistry()

    @tools.tool(read_only=True, timeout=10)
    async def get_weather(location: str, unit: Literal["c", "f"] = "c") -> str:
        \"\"\"The current weather in a city.\"\"\"
        ...

The arguments' schema comes from the function's signature (each parameter a field, its annotation the
type, its default the default), or from a pydantic model when the function takes exactly one parameter
annotated with one (the model instance is passed). ``read_only=True`` declares a tool without side
effects: the runner may run it in parallel with anything else. Other tools run one at a time, in call
order.

``start`` says when the runner may start a call (the tool gate): ``"eager"``, as soon as the call is
folded, while the model is still streaming; ``"after_finish"``, only once the response has ended with a
finish of ``stop`` or ``tool_calls``: a response that then ends ``length``, ``content_filter`` or any
other way (or fails) never runs it, and the call's output is ``not_run``; ``"approval"``, only once a
person approved it (a `ToolApprovalRequest` goes out when the call is folded)
and after a safe finish: denied, or undecided when its time is up, the output is ``denied``
(`pipeline.agent.approval`). The default follows ``read_only``: read-only tools are eager,
side-effecting ones wait for a safe finish. A side-effecting tool given ``start="eager"`` takes that
risk knowingly.

``idempotent=True`` says that running a call twice does no more than running it once: a durable run
(`pipeline.agent.durable`) runs such a call again when the worker running it died mid-call, and
reports any other call so cut as not run again.

A sync function runs in a worker thread (`anyio.to_thread.run_sync`), so it blocks neither
the stream nor the other tools; a thread cannot be interrupted, so on a timeout or a cancellation the
runner stops waiting for it and the thread finishes on its own.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeVar, get_type_hints, overload

import anyio
import pydantic

from pipeline.errors import ConfigurationError

__all__ = ["TOOL_STARTS", "Tool", "ToolRegistry", "ToolStart"]

F = TypeVar("F", bound=Callable[..., Any])

ToolStart: TypeAlias = Literal["eager", "after_finish", "approval"]
"""When the runner may start a call: as soon as it is folded; after a ``stop`` / ``tool_calls`` finish;
or after a person's approval and a safe finish."""
TOOL_STARTS: tuple[ToolStart, ...] = ("eager", "after_finish", "approval")


@dataclass(frozen=True, slots=True)
class Tool:
    """One registered tool. Use `ToolRegistry.tool` to make one."""

    name: str
    """The name the model calls it by."""
    function: Callable[..., Any]
    """What runs the call."""
    arguments: type[pydantic.BaseModel]
    """The pydantic model the call's arguments are validated against."""
    description: str = ""
    """What the model reads about it."""
    read_only: bool = False
    """No side effects: may run in parallel with any other call."""
    timeout: float | None = None
    """Seconds the call may take before its output is a ``timeout`` error; ``None``: no limit."""
    start: ToolStart = "after_finish"
    """``eager``: start as soon as the call is folded; ``after_finish``: only after a ``stop`` or
    ``tool_calls`` finish (else the output is ``not_run``); ``approval``: only once approved, and after
    a safe finish (denied or expired: the output is ``denied``)."""
    idempotent: bool = False
    """Running it twice with the same arguments does no more than running it once: a durable run
    (`pipeline.agent.durable`) runs such a call again when its worker died mid-call."""
    takes_model: bool = False
    """The function takes the validated model itself (its one parameter), not keyword arguments."""
    is_async: bool = field(default=False)
    """The function is a coroutine function: awaited, not run in a worker thread."""

    def validate(self, arguments: Mapping[str, Any]) -> pydantic.BaseModel:
        """The arguments as the tool's model; raises `pydantic.ValidationError`."""
        return self.arguments.model_validate(arguments)

    async def call(self, model: pydantic.BaseModel) -> Any:
        """Run the tool on validated arguments (no timeout here: the runner applies it)."""
        if self.takes_model:
            args: tuple[Any, ...] = (model,)
            kwargs: dict[str, Any] = {}
        else:
            args, kwargs = (), {name: getattr(model, name) for name in type(model).model_fields}
        if self.is_async:
            return await self.function(*args, **kwargs)
        return await anyio.to_thread.run_sync(
            functools.partial(self.function, *args, **kwargs), abandon_on_cancel=True
        )

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (for the request's tool definitions)."""
        return self.arguments.model_json_schema()

    def definition(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}``: the neutral shape the providers' tool formats share."""
        return {"name": self.name, "description": self.description, "parameters": self.json_schema()}


class ToolRegistry:
    """Tools by name. A tool's arguments model also serves ``process(tools=registry.schemas())``, so that
    invalid arguments are caught when the call is folded."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    @overload
    def tool(self, function: F) -> F: ...

    @overload
    def tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        timeout: float | None = None,
        start: ToolStart | None = None,
        idempotent: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        function: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        timeout: float | None = None,
        start: ToolStart | None = None,
        idempotent: bool = False,
    ) -> Any:
        """Register a function as a tool (a decorator, with or without options); returns it unchanged.

        Args:
            function: the tool, when used without options.
            name: as `add` takes it.
            description: as `add` takes it.
            read_only: as `add` takes it.
            timeout: as `add` takes it.
            start: as `add` takes it.
            idempotent: as `add` takes it.

        Raises:
            ConfigurationError: as `add` raises it.
        """

        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            self.add(
                function,
                name=name,
                description=description,
                read_only=read_only,
                timeout=timeout,
                start=start,
                idempotent=idempotent,
            )
            return function

        return register(function) if function is not None else register

    def add(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        timeout: float | None = None,
        start: ToolStart | None = None,
        idempotent: bool = False,
    ) -> Tool:
        """Register ``function`` as a tool.

        Args:
            function: the tool; its signature gives the arguments' schema.
            name: the tool's name (default: the function's).
            description: what the model reads (default: the function's docstring).
            read_only: no side effects: it runs in parallel with anything.
            timeout: seconds before the output is ``timeout``.
            start: ``"eager"``, ``"after_finish"`` or ``"approval"`` (see the module docs); None: eager
                when ``read_only``, else after a safe finish.
            idempotent: a durable run may run the call again after its worker died mid-call (else that
                call's output says so).

        Returns:
            The registered `Tool`.

        Raises:
            ConfigurationError: a duplicate name, a bad ``timeout`` or ``start``, or a signature pydantic
                cannot make a schema of (``*args``, positional-only parameters).
        """
        tool_name = self._new_name(function, name)
        _check_timeout(tool_name, timeout)
        start = _start_of(tool_name, start, read_only)
        model, takes_model = _arguments_model(tool_name, function)
        tool = Tool(
            name=tool_name,
            function=function,
            arguments=model,
            description=description if description is not None else inspect.getdoc(function) or "",
            read_only=read_only,
            timeout=timeout,
            start=start,
            idempotent=bool(idempotent),
            takes_model=takes_model,
            is_async=inspect.iscoroutinefunction(function),
        )
        self._tools[tool_name] = tool
        return tool

    def _new_name(self, function: Callable[..., Any], name: str | None) -> str:
        """The name of a tool to register: ``name``, else the function's; refused when taken."""
        if not callable(function):
            raise ConfigurationError(f"a tool must be a function, got {function!r}")
        tool_name = name or getattr(function, "__name__", "")
        if not tool_name:
            raise ConfigurationError(f"the tool {function!r} has no name: pass name=")
        if tool_name in self._tools:
            raise ConfigurationError(f"a tool named {tool_name!r} is already registered")
        return tool_name

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self) -> dict[str, type[pydantic.BaseModel]]:
        """Tool name -> arguments model, for ``process(tools=...)`` / ``fold_invocations(tools=...)``."""
        return {name: tool.arguments for name, tool in self._tools.items()}

    def definitions(self) -> list[dict[str, Any]]:
        """Each tool's `Tool.definition`, in registration order."""
        return [tool.definition() for tool in self._tools.values()]


def _check_timeout(tool_name: str, timeout: float | None) -> None:
    """Raises `ConfigurationError` unless ``timeout`` is None or a positive number."""
    if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
        raise ConfigurationError(f"tool {tool_name!r}: timeout must be a positive number, got {timeout!r}")


def _start_of(tool_name: str, start: ToolStart | None, read_only: bool) -> ToolStart:
    """When the calls start: ``start``, else eager for a read-only tool, after the finish for others."""
    if start is None:
        return "eager" if read_only else "after_finish"
    if start not in TOOL_STARTS:
        raise ConfigurationError(
            f"tool {tool_name!r}: start must be one of {', '.join(TOOL_STARTS)}; got {start!r}"
        )
    return start


def _arguments_model(name: str, function: Callable[..., Any]) -> tuple[type[pydantic.BaseModel], bool]:
    """The arguments model of ``function``, and whether it takes that model as its one parameter."""
    try:
        signature = inspect.signature(function)
        hints = get_type_hints(function)
    except (TypeError, ValueError, NameError) as exc:
        raise ConfigurationError(f"tool {name!r}: cannot read the signature: {exc}") from None
    parameters = list(signature.parameters.values())
    if len(parameters) == 1:
        annotation = hints.get(parameters[0].name)
        if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
            return annotation, True
    fields: dict[str, Any] = {}
    for parameter in parameters:
        if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            raise ConfigurationError(
                f"tool {name!r}: parameter {parameter.name!r} must be passable by keyword "
                "(no *args, **kwargs or positional-only parameters)"
            )
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    try:
        model = pydantic.create_model(f"{name}_arguments", **fields)
    except (pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise ConfigurationError(f"tool {name!r}: cannot make an arguments schema: {exc}") from None
    return model, False

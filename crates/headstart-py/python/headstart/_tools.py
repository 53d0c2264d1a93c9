"""``@headstart.tool``: a Python function as a tool the model can call.

The name, description and JSON schema come from the function: its name, its docstring, and its signature's type
hints (through pydantic when it is installed, which also validates and converts the arguments before the body runs;
through ``inspect``/``typing`` otherwise). A parameter named ``ctx`` (or annotated ``headstart.ToolContext``) gets
the call's context and is not part of the schema.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import json
import math
import types
import typing
from typing import Any, Callable, Optional, Union

from ._context import ToolContext

__all__ = ["Tool", "tool"]

_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


class Tool:
    """A tool made from a Python function by ``@headstart.tool``; calling it calls the function."""

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        early: bool = False,
        idempotent: bool = False,
        sequential: bool = False,
        conflict_key: Optional[str] = None,
        timeout: Optional[float] = None,
        parameters: Optional[dict[str, Any]] = None,
        provider_async: bool = False,
    ) -> None:
        self.function = function
        self.name: str = name or function.__name__
        self.description: str = description if description is not None else (inspect.getdoc(function) or "")
        # A provider-async tool starts at its seal as an early one does.
        self.early = early or provider_async
        self.provider_async = provider_async
        self.idempotent = idempotent
        self.sequential = sequential
        self.timeout = timeout
        self.is_async = inspect.iscoroutinefunction(function)
        signature = inspect.signature(function)
        hints = _type_hints(function)
        self._context_parameter: Optional[str] = None
        self._parameters: list[inspect.Parameter] = []
        # With a hand-written schema, a `**kwargs` function takes the arguments as they are (the engine validates
        # them against the schema before the body runs).
        self._takes_any = False
        for parameter in signature.parameters.values():
            if parameter.name == "ctx" or hints.get(parameter.name) is ToolContext:
                self._context_parameter = parameter.name
            elif parameter.kind is inspect.Parameter.VAR_KEYWORD and parameters is not None:
                self._takes_any = True
            elif parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise TypeError(f"tool {self.name}: *args and **kwargs need a hand-written schema (parameters=...)")
            else:
                self._parameters.append(parameter)
        self._model = None if parameters is not None else _pydantic_model(self.name, self._parameters, hints)
        if parameters is not None:
            schema = dict(parameters)
        elif self._model is not None:
            schema = self._model.model_json_schema()
            schema.pop("title", None)
        else:
            schema = _plain_schema(self._parameters, hints)
        self.parameters: dict[str, Any] = schema
        # The name of an argument (one the schema lists) or a fixed key: the engine tells which.
        self.conflict_key = conflict_key

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def spec(self) -> dict[str, Any]:
        """What the engine schedules the tool's calls by, as the host layer reads every language's tools
        (``HostToolSpec``): the timeout in seconds, the conflict key as given."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "early": self.early,
            "provider_async": self.provider_async,
            "idempotent": self.idempotent,
            "sequential": self.sequential,
            # JSON holds no infinity nor NaN: such a timeout goes as its text, which the engine refuses by name.
            "timeout": self.timeout if self.timeout is None or math.isfinite(self.timeout) else str(self.timeout),
            "conflict_key": self.conflict_key,
        }

    def __repr__(self) -> str:
        return f"<headstart.Tool {self.name!r}>"

    def arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments the function is called with: ``arguments`` validated (and converted, with pydantic)
        against the signature. Raises ``ValueError`` when they do not fit."""
        if self._takes_any:
            return dict(arguments)
        if self._model is not None:
            import pydantic

            try:
                validated = self._model.model_validate(arguments)
            except pydantic.ValidationError as error:
                raise ValueError(f"invalid arguments: {error}") from None
            return {parameter.name: getattr(validated, parameter.name) for parameter in self._parameters}
        names = {parameter.name for parameter in self._parameters}
        unknown = sorted(set(arguments) - names)
        if unknown:
            raise ValueError(f"invalid arguments: unknown {', '.join(unknown)}")
        missing = [
            parameter.name
            for parameter in self._parameters
            if parameter.default is inspect.Parameter.empty and parameter.name not in arguments
        ]
        if missing:
            raise ValueError(f"invalid arguments: missing {', '.join(missing)}")
        return dict(arguments)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """Runs the function on validated ``arguments``: awaited when it is ``async``, in a worker thread if not."""
        kwargs = self.arguments(arguments)
        if self._context_parameter is not None:
            kwargs[self._context_parameter] = ctx
        if self.is_async:
            return await self.function(**kwargs)
        return await asyncio.to_thread(self.function, **kwargs)


def tool(
    function: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    early: bool = False,
    idempotent: bool = False,
    sequential: bool = False,
    conflict_key: Optional[str] = None,
    timeout: Optional[float] = None,
    parameters: Optional[dict[str, Any]] = None,
    provider_async: bool = False,
) -> Any:
    """Makes a ``Tool`` of a function; usable as ``@tool`` and as ``@tool(early=True, ...)``.

    ``early``: the call may start as soon as it is sealed, while the model still streams. ``idempotent``: recovery
    may run it again after a crash. ``sequential``: its calls run one at a time, after earlier batches settled.
    ``conflict_key``: the name of an argument (calls with equal values run in order) or a fixed string (all calls
    run in order). ``timeout``: seconds before the body is cancelled and the call fails. ``parameters``: a
    hand-written JSON schema instead of the one the signature gives (a ``**kwargs`` function then gets the
    arguments as they are). ``provider_async``: declared to the model as async (OpenAI Responses' async tool calling,
    sent when the request opts in: ``HttpModel(..., provider_async=True)``, or ``request.body(model,
    provider_async=True)`` for your own SDK call): the model goes on after calling it and gets the result in the
    next request; early too.
    """

    def make(function: Callable[..., Any]) -> Tool:
        return Tool(
            function,
            name=name,
            description=description,
            early=early,
            idempotent=idempotent,
            sequential=sequential,
            conflict_key=conflict_key,
            timeout=timeout,
            parameters=parameters,
            provider_async=provider_async,
        )

    return make(function) if function is not None else make


def _type_hints(function: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(function)
    except Exception:
        return dict(getattr(function, "__annotations__", {}))


def _pydantic_model(name: str, parameters: list[inspect.Parameter], hints: dict[str, Any]) -> Any:
    try:
        import pydantic
    except ImportError:
        return None
    fields: dict[str, Any] = {}
    for parameter in parameters:
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    return pydantic.create_model(f"{name}_arguments", __config__=config, **fields)


def _plain_schema(parameters: list[inspect.Parameter], hints: dict[str, Any]) -> dict[str, Any]:
    properties = {parameter.name: _type_schema(hints.get(parameter.name, Any)) for parameter in parameters}
    for parameter in parameters:
        if parameter.default is not inspect.Parameter.empty:
            try:
                json.dumps(parameter.default)
                properties[parameter.name]["default"] = parameter.default
            except (TypeError, ValueError):
                pass
    required = [parameter.name for parameter in parameters if parameter.default is inspect.Parameter.empty]
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def _type_schema(annotation: Any) -> dict[str, Any]:
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    if annotation is type(None):
        return {"type": "null"}
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin in (list, tuple, set, frozenset):
        return {"type": "array", "items": _type_schema(arguments[0])} if arguments else {"type": "array"}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    if annotation is list:
        return {"type": "array"}
    if origin is typing.Literal:
        return {"enum": list(arguments)}
    if origin is Union or (hasattr(types, "UnionType") and origin is getattr(types, "UnionType")):
        return {"anyOf": [_type_schema(argument) for argument in arguments]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum": [member.value for member in annotation]}
    return {}

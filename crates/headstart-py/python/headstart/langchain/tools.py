"""LangChain's tools, wrapped, and the face the chat runs them through.

A wrapped tool is the same tool (its class, schema, name, injected arguments, error handling), with ``ainvoke`` and
``invoke`` going through the chat: when the graph's ``ToolNode`` runs a call (a ``ToolCall`` with the model's id),
an early call hands over its early run's message (waiting for it, or raising its exception); any other call runs
once the engine has admitted it (its owner is durable). A call an earlier process made (a graph resumed from its
checkpoint after a crash) gets the result the store holds for it, recovered when it had none."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId
from pydantic import BaseModel, ValidationError

from .._hosted.answer import Answer, raised, stored_text
from .._hosted.call import Call
from .._hosted.chat import Chat
from .._hosted.loop_thread import LoopThread
from .._hosted.response import Outcome, Response
from .messages import text_of


def tool_call_of(input: Any) -> Optional[dict[str, Any]]:
    """``input`` when it is a ``ToolCall`` (as a ``ToolNode`` gives it), else ``None``."""
    if isinstance(input, dict) and input.get("type") == "tool_call" and "args" in input and input.get("id"):
        return input
    return None


def injected_arguments(tool: BaseTool) -> list[str]:
    """The arguments of ``tool`` a ``ToolNode`` fills in itself (state, store, runtime, config), which a call
    started before the node runs cannot have. The call id is not one of them: an early run is given it."""
    try:
        schema = tool.get_input_schema()
        model = tool.tool_call_schema
    except Exception:  # noqa: BLE001 - a schema LangChain cannot read: nothing is known injected
        return []
    if not issubclass(schema, BaseModel):
        return []
    fields = schema.model_fields
    called = set(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else set()
    return sorted(
        name
        for name in set(fields) - called
        if not any(item is InjectedToolCallId or isinstance(item, InjectedToolCallId) for item in fields[name].metadata)
    )


def checks_its_arguments(tool: BaseTool) -> bool:
    """Whether the tool's arguments can be checked before it runs, as it checks them (a pydantic schema)."""
    model = tool.tool_call_schema
    return isinstance(model, type) and issubclass(model, BaseModel)


class LangChainFace:
    """How the chat runs LangChain's tools: ``originals`` by name."""

    def __init__(self, originals: dict[str, BaseTool]) -> None:
        self._originals = originals

    async def _run(self, call_id: str, name: str, arguments: dict[str, Any]) -> Outcome:
        tool = self._originals.get(name)
        if tool is None:
            return Outcome(error=ValueError(f"{name} is not a valid tool"))
        try:
            value = await tool.ainvoke({"name": name, "args": arguments, "id": call_id, "type": "tool_call"})
        except Exception as error:  # noqa: BLE001 - handed to the ToolNode as the tool raised it
            return Outcome(error=error)
        return Outcome(value=value)

    async def run_early(self, call: Call, response: Response) -> Outcome:
        """An early call's run, unless its arguments fail the tool's own schema (the ToolNode's error is then the
        graph's, as without headstart)."""
        tool = self._originals.get(call.name or "")
        if tool is None or call.arguments is None or not checks_its_arguments(tool):
            return Outcome(invalid=True)
        model = tool.tool_call_schema
        try:
            if isinstance(model, type) and issubclass(model, BaseModel):
                model.model_validate(call.arguments)
        except ValidationError:
            return Outcome(invalid=True)
        return await self._run(call.id, call.name or "", call.arguments)

    async def run_recovered(self, call_id: str, name: str, arguments: dict[str, Any]) -> Outcome:
        """An idempotent call a crash interrupted, run again by recovery."""
        return await self._run(call_id, name, arguments)

    def answer_of(self, outcome: Outcome) -> Answer:
        """A tool's message (or exception) as the transcript keeps it: its text, and whether it is an error."""
        if outcome.error is not None:
            return raised(outcome.error)
        value = outcome.value
        if isinstance(value, ToolMessage):
            return Answer(content=text_of(value.content), is_error=value.status == "error")
        return Answer(content=str(value))


def stored_message(tool: BaseTool, call: dict[str, Any], stored: dict[str, Any]) -> ToolMessage:
    """The message of a call's stored result, for the ``ToolNode`` that runs the call again."""
    return ToolMessage(
        content=stored_text(stored),
        name=tool.name,
        tool_call_id=call["id"],
        status="error" if stored.get("is_error") else "success",
    )


def wrap_tool(tool: BaseTool, chat: Chat, thread: LoopThread) -> BaseTool:
    """``tool``, its calls run through ``chat``: a copy of the same class, with only ``ainvoke`` and ``invoke``
    changed. ``thread`` runs the chat for a synchronous ``invoke``."""
    base = type(tool)

    async def run(self: BaseTool, input: Any, config: Any, kwargs: dict[str, Any], sync: bool) -> Any:
        async def plain() -> Any:
            # The original tool runs it (its own ainvoke may call its invoke: never this one's). A synchronous
            # invoke runs it synchronously (in a worker thread), as it would without headstart.
            if sync:
                return await asyncio.to_thread(tool.invoke, input, config, **kwargs)
            return await tool.ainvoke(input, config, **kwargs)

        call = tool_call_of(input)
        if call is None:
            return await plain()
        return await chat.framework_runs(call["id"], self.name, plain, lambda stored: stored_message(self, call, stored))

    class Headstarted(base):  # type: ignore[valid-type, misc]
        async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
            return await run(self, input, config, kwargs, False)

        def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
            async def invoked() -> Any:
                return await run(self, input, config, kwargs, True)

            return thread.run(invoked)

    Headstarted.__name__ = base.__name__
    Headstarted.__qualname__ = base.__qualname__
    wrapped = tool.model_copy()
    wrapped.__class__ = Headstarted
    return wrapped

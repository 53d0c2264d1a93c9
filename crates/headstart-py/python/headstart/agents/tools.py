"""The Agents SDK's function tools, wrapped, and the face the chat runs them through.

A wrapped tool is the same ``FunctionTool`` (name, schema, approval, guardrails, error function, timeout) with its
``on_invoke_tool`` going through the chat: when the runner runs a call (its ``ToolContext`` has the call id), an
early call hands over its early run's output (waiting for it, or raising its exception); any other call runs once the
engine has admitted it. A call an earlier process made gets the result the store holds for it."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from agents.tool import FunctionTool
from agents.tool_context import ToolContext

from .._hosted.answer import Answer, raised, stored_text
from .._hosted.call import Call
from .._hosted.chat import Chat
from .._hosted.response import Outcome, Response


class AgentsFace:
    """How the chat runs the Agents SDK's tools: ``originals`` by name."""

    def __init__(self, originals: dict[str, FunctionTool]) -> None:
        self._originals = originals

    async def _run(self, call_id: str, name: str, arguments: str) -> Outcome:
        tool = self._originals.get(name)
        if tool is None:
            return Outcome(error=ValueError(f"Tool {name} not found"))
        context: ToolContext[Any] = ToolContext(context=None, tool_name=name, tool_call_id=call_id, tool_arguments=arguments)
        try:
            # The tool's own invoker: it parses and checks the arguments, and turns a failure into its error
            # function's message, as when the runner calls it.
            return Outcome(value=await tool.on_invoke_tool(context, arguments))
        except Exception as error:  # noqa: BLE001 - handed to the runner as the tool raised it
            return Outcome(error=error)

    async def run_early(self, call: Call, response: Response) -> Outcome:
        """An early call's run, with the arguments' text as the model streamed it."""
        return await self._run(call.id, call.name or "", call.text)

    async def run_recovered(self, call_id: str, name: str, arguments: dict[str, Any]) -> Outcome:
        """An idempotent call a crash interrupted, run again by recovery."""
        return await self._run(call_id, name, json.dumps(arguments))

    def answer_of(self, outcome: Outcome) -> Answer:
        """A tool's output (or exception) as the transcript keeps it."""
        if outcome.error is not None:
            return raised(outcome.error)
        value = outcome.value
        return Answer(content=value if isinstance(value, str) else json.dumps(value, default=str))


def stored_output(stored: dict[str, Any]) -> str:
    """The output of a call's stored result, for the runner that runs the call again."""
    return stored_text(stored)


def wrap_function_tool(tool: FunctionTool, chat: Chat) -> FunctionTool:
    """``tool``, its calls run through ``chat``."""
    original = tool.on_invoke_tool

    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> Any:
        return await chat.framework_runs(getattr(context, "tool_call_id", None), tool.name, lambda: original(context, arguments), stored_output)

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)

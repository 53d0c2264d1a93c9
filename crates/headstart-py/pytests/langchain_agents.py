"""What the LangChain tests share: the tools a scripted agent calls (each run recorded), an agent made with
``create_agent`` on ``ChatOpenAI`` against the replay server, plain or with headstart, and its messages in a form two
runs can be compared by."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException, tool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from chat_replies import Runs, started
from headstart.langchain import with_headstart

EARLY = ["read_file", "lookup"]
"""The scripted tools that start early."""


def scripted_tools(runs: Runs) -> list[BaseTool]:
    """``read_file`` (async), ``lookup`` (sync; its ``ToolException`` becomes its message), ``write_file``
    (sync, never early)."""

    @tool
    async def read_file(path: str) -> str:
        """Reads a file."""
        await asyncio.to_thread(started, runs, "read_file", {"path": path})
        return f"contents of {path}"

    @tool
    def lookup(key: str, n: int) -> str:
        """Looks a key up."""
        started(runs, "lookup", {"key": key, "n": n})
        if n == 13:
            raise ToolException(f"no luck for {key}")
        return f"{key} #{n}"

    lookup.handle_tool_error = True

    @tool
    def write_file(path: str, text: str) -> str:
        """Writes a file."""
        started(runs, "write_file", {"path": path, "text": text})
        return f"wrote {len(text)} characters to {path}"

    return [read_file, lookup, write_file]


def chat_model(server: Any) -> ChatOpenAI:
    """``ChatOpenAI`` against ``server`` (streaming: the stand-in speaks only SSE)."""
    return ChatOpenAI(model="gpt-4o-mini", base_url=server.url + "/v1", api_key=SecretStr("scripted"), max_retries=0, streaming=True)


def agent(server: Any, runs: Runs, *, headstart: bool, store: Optional[str] = None, session_id: Optional[str] = None) -> tuple[Any, Any]:
    """``create_agent`` over the scripted tools, plain or with headstart (``EARLY`` early); returns the agent and
    the model it was given."""
    model: Any = chat_model(server)
    tools = scripted_tools(runs)
    if headstart:
        model, tools = with_headstart(model, tools, store=store, early=EARLY, session_id=session_id, durability="normal")
    return create_agent(model, tools), model


def shown(messages: list[BaseMessage]) -> list[Any]:
    """What the app sees of a run's messages: each one's kind, text, calls and results, without the ids a run
    makes up."""
    view: list[Any] = []
    for message in messages:
        if isinstance(message, AIMessage):
            calls = [(call["id"], call["name"], call["args"]) for call in message.tool_calls]
            invalid = [(call["id"], call["name"], call["args"]) for call in message.invalid_tool_calls]
            view.append(("ai", message.content, calls, invalid))
        elif isinstance(message, ToolMessage):
            view.append(("tool", message.tool_call_id, message.name, message.content, message.status))
        else:
            view.append((message.type, message.content))
    return view

"""``headstart.langchain``: early execution inside LangChain's and LangGraph's own loop (``create_agent``, a
graph's ``ToolNode``), with a durable transcript.

``with_headstart(model, tools, store=..., early=[...])`` gives the model and the tools back, wrapped: the model is
itself a chat model (``bind_tools``, ``with_structured_output``, callbacks and token streaming keep working) whose
stream feeds the engine as it passes; the tools are the same tools, whose calls go through the engine. The graph
keeps running its loop. The rules, and the deliberate differences from the plain framework, are in the package's
README."""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from .._hosted.requires import require

require("langchain_core", "headstart.langchain", 'LangChain: pip install "headstart[langchain]" (or langchain)')

from langchain_core.language_models import BaseChatModel  # noqa: E402 - after the check that names the install
from langchain_core.tools import BaseTool  # noqa: E402

from .._hosted.chat import open_chat  # noqa: E402
from .._hosted.loop_thread import LoopThread  # noqa: E402
from .._hosted.options import tool_names  # noqa: E402
from .model import HeadstartChatModel  # noqa: E402
from .tools import LangChainFace, checks_its_arguments, injected_arguments, wrap_tool  # noqa: E402

__all__ = ["HeadstartChatModel", "with_headstart"]


def _streams(model: BaseChatModel) -> bool:
    """Whether ``model`` streams (its class has a stream of its own: the base class's falls back to one call)."""
    kind = type(model)
    return kind._astream is not BaseChatModel._astream or kind._stream is not BaseChatModel._stream


def _approvals(middleware: Iterable[Any]) -> set[str]:
    """The tools a human-in-the-loop middleware of ``middleware`` pauses for."""
    names: set[str] = set()
    for item in middleware:
        interrupt_on = getattr(item, "interrupt_on", None)
        if isinstance(interrupt_on, dict):
            names.update(name for name, config in interrupt_on.items() if config)
    return names


def with_headstart(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    *,
    store: Optional[str] = None,
    early: Iterable[str] = (),
    idempotent: Iterable[str] = (),
    session_id: Optional[str] = None,
    durability: Optional[str] = None,
    middleware: Iterable[Any] = (),
) -> tuple[HeadstartChatModel, list[BaseTool]]:
    """Wraps a LangChain chat model and its tools for headstart; returns ``(model, tools)`` for ``create_agent``
    or a graph with a ``ToolNode``.

    ``store``: a SQLite path or a ``postgresql://`` URL (in memory without one). ``early``: the tools whose calls
    start the moment their arguments are whole (read-only or idempotent ones). ``idempotent``: those a recovery may
    run again after a crash. ``session_id``: the store's session (your LangGraph thread id, say; a new one when
    absent, as ``model.session_id``); a session the store holds goes on, and after a crash its interrupted calls
    are recovered. ``middleware``: the agent's middleware, so that a tool a human-in-the-loop middleware pauses
    for is refused as early. ``durability`` (SQLite): ``full`` (the default with a store) or ``normal``.

    Raises ``TypeError`` or ``ValueError`` naming the problem: a model that does not stream tool calls, a tool that
    is not a LangChain tool, an ``early`` name that is not a tool, needs approval or takes arguments only the
    ``ToolNode`` fills in, a store that cannot be opened."""
    if not isinstance(model, BaseChatModel):
        raise TypeError(f"with_headstart's model must be a LangChain chat model (BaseChatModel), not {type(model).__name__}")
    if isinstance(model, HeadstartChatModel):
        raise TypeError("the model is already wrapped by with_headstart")
    if not _streams(model):
        raise TypeError(
            f"{type(model).__name__} does not stream (it has no _stream or _astream): headstart reads the tool calls "
            "as they stream, so it needs a model that streams them (ChatOpenAI, ChatAnthropic, ...)"
        )
    by_name: dict[str, BaseTool] = {}
    for tool in tools:
        if not isinstance(tool, BaseTool):
            raise TypeError(f"with_headstart's tools must be LangChain tools (BaseTool, @tool), not {type(tool).__name__}")
        by_name[tool.name] = tool
    early_names = tool_names(early, by_name, "early")
    needs_approval = early_names & _approvals(middleware)
    if needs_approval:
        raise ValueError(
            f"early names {', '.join(sorted(needs_approval))}, which a human-in-the-loop middleware pauses for: a "
            "person decides whether it runs, so it is never early"
        )
    for name in sorted(early_names):
        injected = injected_arguments(by_name[name])
        if injected:
            raise ValueError(
                f"tool {name} takes {', '.join(injected)}, which the ToolNode fills in when it runs the call: a call "
                "started before it runs cannot have them, so it cannot be early"
            )
        if not checks_its_arguments(by_name[name]):
            raise ValueError(
                f"tool {name} has a JSON-schema dict for its arguments: headstart checks an early call's arguments "
                "with the tool's pydantic schema before it starts, so it cannot be early"
            )
    idempotent_names = tool_names(idempotent, by_name, "idempotent")
    chat = open_chat(
        LangChainFace(by_name),
        {name: tool.description for name, tool in by_name.items()},
        early=early_names,
        idempotent=idempotent_names,
        store=store,
        durability=durability,
        session_id=session_id,
        recover=True,
    )
    thread = LoopThread("headstart-langchain")
    wrapped = HeadstartChatModel(inner=model, profile=model.profile)
    wrapped._chat = chat
    wrapped._sync = thread
    return wrapped, [wrap_tool(tool, chat, thread) for tool in by_name.values()]

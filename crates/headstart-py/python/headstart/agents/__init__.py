"""``headstart.agents``: early execution inside the OpenAI Agents SDK's own runner (``Runner.run``,
``run_streamed``, ``run_sync``), with a durable transcript.

``with_headstart(agent, store=..., early=[...])`` gives the agent back, cloned: its model and its function tools
(and those of the agents it hands off to) go through one headstart chat. The runner keeps running its loop. The rules
and the deliberate differences from the plain SDK are in the README."""

from __future__ import annotations

from typing import Any, Iterable, Optional, cast

from .._hosted.requires import require

require("agents", "headstart.agents", 'the OpenAI Agents SDK: pip install "headstart[agents]" (or openai-agents)')

from agents import Agent, TResponseInputItem  # noqa: E402 - after the check that names the install
from agents.models.interface import Model  # noqa: E402
from agents.models.multi_provider import MultiProvider  # noqa: E402
from agents.tool import FunctionTool  # noqa: E402

from .._hosted.chat import open_chat  # noqa: E402
from .._hosted.options import tool_names  # noqa: E402
from .items import input_items_of  # noqa: E402
from .model import HeadstartModel  # noqa: E402
from .tools import AgentsFace, wrap_function_tool  # noqa: E402

__all__ = ["HeadstartModel", "headstart_session_id", "resume", "with_headstart"]


def _agents(root: Agent[Any]) -> list[Agent[Any]]:
    """``root`` and every agent it can hand off to, once each."""
    found: list[Agent[Any]] = []
    waiting = [root]
    while waiting:
        agent = waiting.pop()
        if any(agent is seen for seen in found):
            continue
        found.append(agent)
        for handoff in agent.handoffs:
            if not isinstance(handoff, Agent):
                raise TypeError(
                    f"agent {agent.name} hands off through a Handoff object ({getattr(handoff, 'tool_name', handoff)!r}): "
                    "headstart cannot see the agent behind it; list the Agent itself in handoffs"
                )
            waiting.append(handoff)
    return found


def _function_tools(agents: list[Agent[Any]]) -> dict[str, FunctionTool]:
    tools: dict[str, FunctionTool] = {}
    for agent in agents:
        for tool in agent.tools:
            if not isinstance(tool, FunctionTool):
                continue
            if tool.name in tools and tools[tool.name] is not tool:
                raise ValueError(f"two different tools are named {tool.name}: headstart's transcript names a call's tool by its name")
            tools[tool.name] = tool
    return tools


def _refuse_early(name: str, tool: FunctionTool, agents: list[Agent[Any]]) -> Optional[str]:
    """Why tool ``name`` cannot be early, or ``None``."""
    if tool.needs_approval is not False:
        return "it needs approval: a person decides whether it runs"
    if tool.tool_input_guardrails:
        return "it has input guardrails, which decide whether it runs"
    for agent in agents:
        if any(tool is held for held in agent.tools) and any(guardrail.run_in_parallel for guardrail in agent.input_guardrails):
            return (
                f"agent {agent.name} has input guardrails that run in parallel with the model, and the runner runs no "
                "tool before they pass (give them run_in_parallel=False)"
            )
    return None


def _model_of(agent: Agent[Any]) -> Model:
    if isinstance(agent.model, Model):
        return agent.model
    # A name (or none) resolves as the runner's default provider resolves it.
    return MultiProvider().get_model(agent.model)


def with_headstart(
    agent: Agent[Any],
    *,
    store: Optional[str] = None,
    early: Iterable[str] = (),
    idempotent: Iterable[str] = (),
    session_id: Optional[str] = None,
    durability: Optional[str] = None,
) -> Agent[Any]:
    """The agent, cloned with its model and function tools (and those of the agents it hands off to) on headstart.

    ``store``: a SQLite path or a ``postgresql://`` URL (in memory without one). ``early``: the function tools whose
    calls start the moment their arguments are whole. ``idempotent``: those a recovery may run again after a crash.
    ``session_id``: the store's session (a new one when absent, as ``headstart_session_id(agent)``).
    ``durability`` (SQLite): ``full`` (the default with a store) or ``normal``.

    Raises ``TypeError`` or ``ValueError`` naming the problem: not an ``Agent``, an ``early`` name that is not a
    function tool, needs approval or has guardrails deciding whether it runs, a store that cannot be opened."""
    if not isinstance(agent, Agent):
        raise TypeError(f"with_headstart's agent must be an agents.Agent, not {type(agent).__name__}")
    agents = _agents(agent)
    if any(isinstance(each.model, HeadstartModel) for each in agents):
        raise TypeError("the agent is already wrapped by with_headstart")
    tools = _function_tools(agents)
    early_names, idempotent_names = tool_names(early, tools, "early"), tool_names(idempotent, tools, "idempotent")
    for name in sorted(early_names):
        why = _refuse_early(name, tools[name], agents)
        if why is not None:
            raise ValueError(f"tool {name} cannot be early: {why}")
    descriptions = {name: tool.description for name, tool in tools.items()}
    chat = open_chat(
        AgentsFace(tools),
        descriptions,
        early=early_names,
        idempotent=idempotent_names,
        store=store,
        durability=durability,
        session_id=session_id,
        recover=True,
    )
    wrapped = {name: wrap_function_tool(tool, chat) for name, tool in tools.items()}
    clones: dict[int, Agent[Any]] = {}

    def clone(each: Agent[Any]) -> Agent[Any]:
        if id(each) not in clones:
            copy = each.clone(model=HeadstartModel(_model_of(each), chat))
            clones[id(each)] = copy
            copy.tools = [wrapped[tool.name] if isinstance(tool, FunctionTool) else tool for tool in each.tools]
            copy.handoffs = [clone(target) for target in each.handoffs if isinstance(target, Agent)]
        return clones[id(each)]

    return clone(agent)


def headstart_session_id(agent: Agent[Any]) -> str:
    """The store's session of an agent ``with_headstart`` gave."""
    if not isinstance(agent.model, HeadstartModel):
        raise TypeError(f"agent {agent.name} was not made by with_headstart")
    return agent.model.session_id




async def resume(
    store: str,
    session_id: str,
    *,
    tools: Iterable[Any],
    policy: str = "fail",
    idempotent: Iterable[str] = (),
    durability: Optional[str] = None,
) -> list[TResponseInputItem]:
    """After a crash: every call of session ``session_id`` without a result gets exactly one, and the session comes
    back as the input items to go on with (``Runner.run(agent, items)``; with an Agents SDK ``Session``, put them
    in it in place of what it holds: it keeps only the turns that ended).

    ``policy``: ``"fail"`` gives each interrupted call an interrupted result; ``"rerun_idempotent"`` runs the calls
    of the ``idempotent`` tools (names among ``tools``, the agent's function tools) again, once. Holds the session's
    lock while it recovers (``headstart.SessionBusy`` while another process has it)."""
    if policy not in ("fail", "rerun_idempotent"):
        raise ValueError(f"policy must be 'fail' or 'rerun_idempotent', not {policy!r}")
    function_tools = {tool.name: tool for tool in tools if isinstance(tool, FunctionTool)}
    rerun = tool_names(idempotent, function_tools, "idempotent")
    descriptions = {name: tool.description for name, tool in function_tools.items()}
    chat = open_chat(AgentsFace(function_tools), descriptions, idempotent=rerun, store=store, durability=durability, session_id=session_id)
    await chat.engine.recover(session_id, policy)
    # The items are the input item shapes, written as dicts.
    return cast("list[TResponseInputItem]", input_items_of(await chat.transcript()))

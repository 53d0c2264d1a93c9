"""``Agent``: the engine's multi-request loop, asking a Python model callable for each response."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Optional, Union

from . import _native
from ._engine import Engine, Run

__all__ = ["Agent", "AgentRun", "ModelRequest"]


class ModelRequest:
    """What the agent asks the model: the request's number, the canonical context, and ``body(model=...)``, the
    request in the agent's wire format (``client.chat.completions.create(**request.body(model=...), stream=True)``)."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def number(self) -> int:
        """The 0-based number of the request in the session."""
        number: int = self._native.number
        return number

    @property
    def context(self) -> list[dict[str, Any]]:
        """The canonical context (the stored messages the model sees), as JSON data."""
        context: list[dict[str, Any]] = self._native.context
        return context

    def body(
        self,
        model: str,
        *,
        system: Optional[str] = None,
        max_tokens: Optional[int] = None,
        provider_async: bool = False,
    ) -> dict[str, Any]:
        """The request body without ``stream``: the model, the context as the format's messages, the tools.
        ``provider_async``: declare the ``provider_async`` tools async (OpenAI Responses only)."""
        body: dict[str, Any] = self._native.body(model, system, max_tokens, provider_async)
        return body


class Agent:
    """An agent: an engine and a model, either ``headstart.HttpModel`` or a callable, ``async def model(request:
    ModelRequest)`` returning its SDK's stream in ``format``. ``agent.run(session, prompt)`` runs requests until the model answers without calls, every
    batch asks to terminate, a response fails, or ``max_turns`` requests were made. ``seal`` is the Chat Completions
    sealing rule of a callable model's streams (``Engine.wrap``'s; an ``HttpModel`` has its own)."""

    def __init__(
        self,
        engine: Engine,
        model: Union[Callable[[ModelRequest], Awaitable[Any]], "_native.HttpModel"],
        *,
        format: str = "openai-chat",
        max_turns: int = 10,
        seal: str = "complete",
    ) -> None:
        self.engine = engine
        self.model = model
        self.format = format
        self._native = _native.Agent(engine._native, model, format, max_turns, seal)

    def run(self, session: str, prompt: str) -> "AgentRun":
        """Appends ``prompt`` to ``session`` and runs the loop: ``async with agent.run(...) as run: async for ev in
        run``. The last event is ``agent_end``."""
        return AgentRun(self, session, prompt)


class AgentRun(Run):
    """One run of an agent's loop."""

    def __init__(self, agent: Agent, session: str, prompt: str) -> None:
        super().__init__()
        self._agent = agent
        self._session = session
        self._prompt = prompt

    def _figures_source(self) -> Optional[tuple[Any, str]]:
        return self._agent.engine._native, self._session

    async def _open(self) -> Any:
        return await self._agent._native.run(self._session, self._prompt)

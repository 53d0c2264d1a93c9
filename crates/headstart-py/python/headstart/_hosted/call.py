"""``Call``: one tool call of a response, as a framework's face runs it.

Both sides read and write it: the engine's (it asks for the call once its owner is durable, or settles it itself)
and the framework's (an early run, or the framework's own run of the call, claimed by the wrapped tool). It lives on
the chat's event loop; its one verb is ``end``."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from .answer import Answer


class Call:
    """A call of a response, from its seal to its one result."""

    def __init__(self, id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.id = id
        """The call's id, as the model gave it."""
        self.name: Optional[str] = None
        """The tool it calls."""
        self.text = ""
        """Its arguments as the model streamed them."""
        self.arguments: Optional[dict[str, Any]] = None
        """Its arguments as a JSON object (``None`` when they are not one)."""
        self.early = False
        """It runs when the engine asks for it, while the model streams, not when the framework runs it."""
        self.run: Optional["asyncio.Future[Any]"] = None
        """An early call's run, started when the engine asked for it: resolves to the face's outcome."""
        self.claimed = False
        """The framework's run of the call has taken it."""
        self.stored: Optional[dict[str, Any]] = None
        """The result the engine stored without asking for the call (a limit refused it), when it did."""
        self.heard = False
        """The engine has asked for the call, or settled it without asking."""
        self._asked: "asyncio.Future[bool]" = loop.create_future()
        self._answer: "asyncio.Future[Answer]" = loop.create_future()

    def ask(self) -> "asyncio.Future[Answer]":
        """The engine asks for the call (its owner is durable): the future of its answer for the store."""
        self.heard = True
        if not self._asked.done():
            self._asked.set_result(True)
        return self._answer

    async def asked(self) -> bool:
        """Whether the engine asked for the call (``False``: it settled the call without asking)."""
        return await asyncio.shield(self._asked)

    def settled_by_engine(self, message: Optional[dict[str, Any]] = None) -> None:
        """The engine stored ``message`` as the call's result without asking for it, or its run ended."""
        if message is not None:
            self.stored = message
        self.heard = True
        if not self._asked.done():
            self._asked.set_result(False)

    async def early_run(self) -> "Optional[asyncio.Future[Any]]":
        """An early call's run, once the engine has asked for it; ``None`` for a call that is not early, or that the
        engine settled without asking."""
        if not self.early:
            return None
        return self.run if await self.asked() else None

    @property
    def ended(self) -> bool:
        """The call has its answer."""
        return self._answer.done()

    def end(self, answer: Answer) -> None:
        """The call's end: the engine gets ``answer`` (now, or when it asks). A second end is ignored."""
        if not self._answer.done():
            self._answer.set_result(answer)

    async def settled(self) -> Answer:
        """The call's answer, once it has one."""
        return await asyncio.shield(self._answer)

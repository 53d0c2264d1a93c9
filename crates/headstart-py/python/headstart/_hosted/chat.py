"""``Chat``: one chat of a framework on the engine: its store session, its engine (whose asks for calls go to the
chat's responses), each model call as one response of the session, and the prompt's new user messages recorded
before it. A face (LangChain's, the Agents SDK's) supplies what is the framework's: how a tool runs early, and what
its outcome is in the transcript."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Protocol

from .._context import ToolContext
from .._engine import Engine
from .._native import StoreError
from .._tools import Tool
from .answer import Answer, error, stored_text
from .call import Call
from .response import EarlyRuns, Outcome, Response
from .store import ephemeral_store


class Face(EarlyRuns, Protocol):
    """What a framework's face gives the chat: how it runs early calls and keeps their outcomes, and how it runs a
    call again for recovery."""

    async def run_recovered(self, call_id: str, name: str, arguments: dict[str, Any]) -> Outcome:
        """Runs a call again for recovery (an idempotent call a crash interrupted), outside any model call."""
        ...


@dataclass(frozen=True)
class ToolPolicy:
    """How the engine schedules one of the framework's tools."""

    name: str
    description: str = ""
    early: bool = False
    idempotent: bool = False


def unanswered(log: list[dict[str, Any]]) -> list[str]:
    """The calls of a stored log without a result (a call is its response's request number and its id)."""
    calls: dict[tuple[Any, str], str] = {}
    for entry in log:
        message = entry.get("message", {})
        if message.get("role") == "assistant":
            for block in message.get("content") or []:
                if block.get("type") == "tool_call":
                    calls[(entry.get("request"), block["id"])] = block["id"]
        elif message.get("role") == "tool_result":
            calls.pop((entry.get("request"), message.get("tool_call_id")), None)
    return list(calls.values())


class Chat:
    """A chat: one store session, answered by the framework's own loop, one model call after another, on one event
    loop (the first that opens a response)."""

    def __init__(
        self,
        face: Face,
        tools: list[ToolPolicy],
        *,
        store: Optional[str] = None,
        durability: Optional[str] = None,
        session_id: Optional[str] = None,
        recover: bool = False,
    ) -> None:
        self.face = face
        self._recover = recover
        self._policies = {policy.name: policy for policy in tools}
        self._engine = Engine(
            store if store is not None else ephemeral_store(),
            [_dispatching_tool(self, policy) for policy in tools],
            durability=durability or ("full" if store is not None else "normal"),
        )
        self.id: str = session_id or self._engine._native.new_session_id()
        """The store's session of the chat."""
        self._given_id = session_id is not None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._log: Optional[list[dict[str, Any]]] = None
        self._checked = False
        self._checking: Optional["asyncio.Task[None]"] = None
        self._exists = False
        self._recorded_users = 0
        self._responses: list[Response] = []
        self._streaming: Optional[Response] = None

    @property
    def engine(self) -> Engine:
        """The chat's engine."""
        return self._engine

    def starts_early(self, name: str, offered: frozenset[str]) -> bool:
        """Whether a call of tool ``name`` may start at its seal, in a step that offers ``offered``."""
        policy = self._policies.get(name)
        return policy is not None and policy.early and name in offered

    def _bind(self) -> None:
        """The chat's loop is the running one (the first that used it)."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop and self._loop.is_closed():
            # The loop that served the chat has ended (a framework's synchronous run makes one per run): what it
            # held ended with it, and the chat goes on on this one.
            self._loop, self._responses, self._streaming = None, [], None
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError(
                "a headstart chat runs on one event loop: this one was first used on another (give each event loop, "
                "or each thread running its own, a with_headstart of its own)"
            )

    async def _check(self) -> None:
        """Once, on the chat's first use (every concurrent first use waits for the one check): a session the store
        holds goes on. Calls of it without a result (a process ended first) are refused, naming ``resume``, or, for
        a chat made with ``recover``, recovered at once: an idempotent call runs again, any other gets the
        interrupted result."""
        if self._checked:
            return
        loop = asyncio.get_running_loop()
        if self._checking is None or self._checking.get_loop() is not loop:
            self._checking = loop.create_task(self._first_check())
        await asyncio.shield(self._checking)
        self._checked = True

    async def _first_check(self) -> None:
        if not self._given_id:
            return
        try:
            log: Optional[list[dict[str, Any]]] = await self._engine._native.log(self.id)
        except Exception:  # noqa: BLE001 - a session the store does not hold yet is a new one
            log = None
        if log is None:
            return
        waiting = unanswered(log)
        if waiting and self._recover:
            await self._engine.recover(self.id, "rerun_idempotent")
            log = await self._engine._native.log(self.id)
        elif waiting:
            raise RuntimeError(
                f"session {self.id} has calls without a result ({', '.join(waiting)}): the process that ran them "
                "ended first (a crash, or a call left to the app, such as an approval). resume(store, session_id, "
                "tools=...) gives each its result; then the chat goes on"
            )
        self._exists = True
        self._log = log
        self._recorded_users = sum(1 for entry in log if entry.get("message", {}).get("role") == "user")

    async def transcript(self) -> list[dict[str, Any]]:
        """The session's stored log, as the store holds it now."""
        log: list[dict[str, Any]] = await self._engine._native.log(self.id)
        return log

    async def stored_result(self, call_id: Optional[str]) -> Optional[dict[str, Any]]:
        """The result the store holds for call ``call_id`` of the session as this process found it (after its
        recovery), for a framework that runs again a call an earlier process made: ``None`` when it holds none."""
        self._bind()
        await self._check()
        found = None
        for entry in self._log or []:
            message = entry.get("message", {})
            if message.get("role") == "tool_result" and message.get("tool_call_id") == call_id:
                found = message
        return found

    async def respond(self, users: list[str], offered: frozenset[str], outcomes: Optional[dict[str, Answer]] = None) -> Response:
        """Opens the response of one model call: what the framework did not run of earlier responses is answered
        from ``outcomes`` (by call id, from this prompt), the prompt's new user messages (``users``, all of the
        prompt's) are recorded, and the response opens once the earlier one's results are stored."""
        self._bind()
        if self._streaming is not None and not self._streaming.feed.closed:
            raise RuntimeError(
                "a headstart chat serves one model call at a time: another model call of it is still streaming "
                "(give each chat, and each concurrent call, a with_headstart of its own)"
            )
        await self._check()
        for response in self._responses:
            response.reconcile(outcomes or {})
        previous = self._streaming
        if previous is not None:
            await asyncio.shield(previous.drained)
        fresh = users[self._recorded_users :]
        self._recorded_users = max(self._recorded_users, len(users))
        feed, pending = self._engine._native.open(self.id, "headstart", users=fresh, create=not self._exists, after_previous=previous is not None)
        self._exists = True
        events = await pending
        response = Response(self.face, self.starts_early, feed, events, offered)
        self._responses = [earlier for earlier in self._responses if not earlier.drained.done()] + [response]
        self._streaming = response
        return response

    def _holding(self, call_id: str) -> Optional[Response]:
        for response in reversed(self._responses):
            if response.holds(call_id):
                return response
        return self._streaming

    async def on_call(self, call_id: str, name: str, arguments: dict[str, Any]) -> Answer:
        """The engine asks for a call: the newest response that holds it answers; with none (a recovery runs an
        interrupted idempotent call again), the face runs it."""
        response = self._holding(call_id)
        if response is None:
            try:
                outcome = await self.face.run_recovered(call_id, name, arguments)
            except Exception as raised:  # noqa: BLE001 - the call's error, stored
                outcome = Outcome(error=raised)
            return self.face.answer_of(outcome)
        return await response.on_call(call_id, name, arguments)

    def claim(self, call_id: Optional[str], name: str) -> Optional[Call]:
        """The record of the call the framework now runs: the newest response's that holds it and that nothing
        claimed yet, of the same tool; ``None`` when the engine never saw it (it then runs outside the
        transcript)."""
        if not call_id:
            return None
        for response in reversed(self._responses):
            if not response.holds(call_id):
                continue
            call = response.call(call_id)
            if call.claimed or (call.name is not None and call.name != name):
                continue
            call.claimed = True
            return call
        return None

    async def framework_runs(
        self, call_id: Optional[str], name: str, run: Callable[[], Awaitable[Any]], from_store: Callable[[dict[str, Any]], Any]
    ) -> Any:
        """The framework runs call ``call_id`` of tool ``name``; ``run`` runs the tool as it would without headstart.
        A call of one of the chat's responses goes through it (``run_claimed``: an early call's outcome handed
        over, any other run once admitted), its outcome returned or its exception raised. A call of an earlier
        process gets the result the store holds (``from_store`` makes the framework's value of it); a call the
        engine never saw, or whose arguments it refused as no JSON object (the tool refuses them too, before its
        body, in the framework's words), runs as it would without headstart."""
        claimed = self.claim(call_id, name)
        if claimed is None:
            stored = await self.stored_result(call_id) if call_id else None
            return from_store(stored) if stored is not None else await run()
        if claimed.arguments is None:
            return await run()

        async def outcome() -> Outcome:
            try:
                return Outcome(value=await run())
            except Exception as raised:  # noqa: BLE001 - raised again below, as the tool raised it
                return Outcome(error=raised)

        result = await self.run_claimed(claimed, outcome)
        if result.error is not None:
            raise result.error
        return result.value

    async def run_claimed(self, call: Call, run: Callable[[], Awaitable[Outcome]]) -> Outcome:
        """The framework runs ``call``: an early call hands over its early run's outcome (waiting for it); any other
        call runs (``run``) once the engine has admitted it, and the engine gets its answer. The body runs once."""
        if call.early:
            started = await call.early_run()
            if started is not None:
                outcome: Outcome = await asyncio.shield(started)
                if not outcome.invalid:
                    return outcome
        if not await call.asked():
            text = stored_text(call.stored or {})
            outcome = Outcome(error=RuntimeError(text or "the engine did not run the call"))
            return outcome
        try:
            outcome = await run()
        except BaseException as raised:
            call.end(self.face.answer_of(Outcome(error=raised)))
            raise
        call.end(self.face.answer_of(outcome))
        return outcome


def _dispatching_tool(chat: Chat, policy: ToolPolicy) -> Tool:
    """The engine's tool for one of the framework's: scheduling only; a call goes to the chat's responses."""

    async def dispatch(ctx: ToolContext, **arguments: Any) -> Answer:
        return await chat.on_call(ctx.call_id, policy.name, arguments)

    return Tool(
        dispatch,
        name=policy.name,
        description=policy.description,
        early=policy.early,
        idempotent=policy.idempotent,
        parameters={"type": "object"},
    )


def open_chat(
    face: Face,
    descriptions: dict[str, str],
    *,
    early: frozenset[str] = frozenset(),
    idempotent: frozenset[str] = frozenset(),
    store: Optional[str] = None,
    durability: Optional[str] = None,
    session_id: Optional[str] = None,
    recover: bool = False,
) -> Chat:
    """A chat over a framework's tools (their descriptions, by name): ``early`` and ``idempotent`` name the tools so
    flagged. A store that cannot be opened is a ``ValueError`` naming it."""
    policies = [
        ToolPolicy(name, description=description, early=name in early, idempotent=name in idempotent)
        for name, description in descriptions.items()
    ]
    try:
        return Chat(face, policies, store=store, durability=durability, session_id=session_id, recover=recover)
    except StoreError as failure:
        raise ValueError(f"the store {store!r} cannot be opened: {failure}") from failure

"""``Engine`` and ``engine.wrap``: one model response from the application's own SDK stream, executed early."""

from __future__ import annotations

import asyncio
import os
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Iterable, Optional, Union

from . import _native
from ._events import Event, ToolResult
from ._pump import pump
from ._tools import Tool

__all__ = ["Engine", "Run", "Wrapped", "inspect", "savings", "submit"]


def inspect(store: Union[str, "os.PathLike[str]"], session: Optional[str] = None) -> dict[str, Any]:
    """What a store holds, read-only: ``{"sessions": [{"id", "state", ..., "messages", "tool_runs"}]}``, only
    ``session`` when it is given. Each message is the stored one (``seq``, ``request``, ``at_us``, ``message``);
    each tool run has its ``call_id``, ``tool_name``, ``state``, ``outcome`` and times."""
    found: dict[str, Any] = _native.inspect(os.fspath(store), session)
    return found


def submit(
    store: Union[str, "os.PathLike[str]"],
    prompt: str,
    *,
    queue: Optional[str] = None,
    system: Optional[str] = None,
    model: Optional[str] = None,
    count: int = 1,
) -> list[str]:
    """Puts ``count`` sessions whose first message is ``prompt`` in a fleet's queue, as ``headstart submit`` does, and
    returns their ids. ``store`` is a SQLite file (created if missing) or a PostgreSQL connection string; ``queue``
    (default ``"default"``) is the queue they wait in: only a worker serving it (``headstart worker --queue NAME``)
    claims them. ``system`` and ``model`` are their own system prompt and model, instead of the worker's. Raises
    ``ValueError`` on a bad queue name (empty, over 64 bytes, whitespace or control characters), an empty model or a
    count outside 1..10000, and ``StoreError`` when the store fails."""
    ids: list[str] = _native.submit(
        os.fspath(store), prompt, queue=queue, system=system, model=model, count=count
    )
    return ids


def savings(store: Union[str, "os.PathLike[str]"], session: str) -> dict[str, Any]:
    """What early execution saved on a stored session, against end-of-stream batching with the same measured
    durations (the figure ``headstart demo`` and ``headstart timeline`` print): ``actual_end_ms``,
    ``batching_end_ms``, ``saved_ms``, ``saved_percent``, and per request its stream end and settle times."""
    found: dict[str, Any] = _native.savings(os.fspath(store), session)
    return found


_runtime_started = False
_forked_child = False


def _after_fork_in_child() -> None:
    global _forked_child
    _forked_child = _forked_child or _runtime_started


os.register_at_fork(after_in_child=_after_fork_in_child)


def _refuse_in_a_forked_child() -> None:
    """The engine's runtime (tokio's threads) does not survive ``fork()``: a child of a process that used headstart
    must not use it, or it would wait forever for threads that are not there."""
    if _forked_child:
        raise _native.EngineError(
            "headstart cannot run in a process forked after it started (its runtime's threads did not survive the "
            "fork); start the child with multiprocessing's 'spawn' or 'forkserver', or use headstart only in it"
        )


class Engine:
    """The early-execution engine over one transcript store (a SQLite path, or a ``postgresql://`` URL) with its
    tools. Share one per process and event loop. ``tool_execution``: ``parallel`` or ``sequential``;
    ``max_in_flight``: bodies running at once (``None``: unbounded); ``early_execution=False``: every call after its
    stream; ``max_requests``: requests per agent run; ``durability`` (SQLite): ``full`` or ``normal``;
    ``async_delivery`` (``all_pending`` or ``as_ready``) and ``max_pending_calls``: provider-async results delivered
    in a later request (contract §3.7.5, §3.7.6).

    Hooks (sync or ``async``, called on the loop with JSON data): ``before_tool_call(call, arguments)`` returns
    ``None``/``True`` to run the call, ``False`` or a reason string to block it; ``after_tool_call(call, result)``
    (``result``: ``content`` text, ``details``, ``is_error``, ``terminate``) returns ``None`` or a dict of the fields
    to replace. A hook that raises fails the call.

    Read a SQLite store with ``headstart.inspect``, or with Python's ``sqlite3`` only from another process: that is a
    second copy of SQLite, whose locks the engine's copy does not see inside one process, and closing its connection
    would delete the WAL index under the engine (https://www.sqlite.org/howtocorrupt.html, 2.2.1)."""

    def __init__(
        self,
        store: Union[str, "os.PathLike[str]"],
        tools: Iterable[Tool] = (),
        *,
        tool_execution: str = "parallel",
        max_in_flight: Optional[int] = 16,
        early_execution: bool = True,
        max_requests: int = 32,
        durability: str = "full",
        async_delivery: str = "all_pending",
        max_pending_calls: int = 16,
        before_tool_call: Optional[Callable[[dict[str, Any], dict[str, Any]], Any]] = None,
        after_tool_call: Optional[Callable[[dict[str, Any], dict[str, Any]], Any]] = None,
    ) -> None:
        global _runtime_started
        _refuse_in_a_forked_child()
        _runtime_started = True
        self.tools: list[Tool] = list(tools)
        for item in self.tools:
            if not isinstance(item, Tool):
                raise TypeError(f"not a headstart tool (decorate it with @headstart.tool): {item!r}")
        self._native = _native.Engine(
            os.fspath(store),
            self.tools,
            tool_execution=tool_execution,
            max_in_flight=max_in_flight,
            early_execution=early_execution,
            max_requests=max_requests,
            durability=durability,
            async_delivery=async_delivery,
            max_pending_calls=max_pending_calls,
            before_tool_call=before_tool_call,
            after_tool_call=after_tool_call,
        )

    async def create_session(self) -> str:
        """Creates a session in the store and returns its id."""
        _refuse_in_a_forked_child()
        session: str = await self._native.create_session()
        return session

    async def recover(self, session: str, policy: str = "fail") -> list[dict[str, Any]]:
        """Recovers ``session`` after a crash: every admitted call without a result gets one, ``interrupted``
        (``policy="fail"``) or, for idempotent tools, a new run (``policy="rerun_idempotent"``). Returns what was
        done with each call (``call_id``, ``tool_name``, ``had_started``, ``action``). The recovery holds the session's
        lock (beside a SQLite file, as ``headstart recover`` does; an advisory lock of a PostgreSQL database): while
        another process holds it (another recovery, or the CLI's ``run``, ``resume`` or ``recover``), or a fleet's
        worker holds the session under its lease, this raises ``SessionBusy`` naming the holder, and writes nothing.
        (``wrap`` takes no lock.)"""
        recovered: list[dict[str, Any]] = await self._native.recover(session, policy)
        return recovered

    def tool_specs(self, format: str = "openai-chat") -> list[Any]:
        """The tools as a request in ``format`` declares them (``tools=`` of the SDK's call)."""
        specs: list[Any] = self._native.tool_specs(format)
        return specs

    def wrap(
        self,
        session: str,
        stream: Any,
        format: str = "openai-chat",
        *,
        seal: str = "complete",
        record: Optional[Union[str, "os.PathLike[str]"]] = None,
    ) -> "Wrapped":
        """Wraps one response: ``stream`` is what the SDK returned (an async or sync iterator of its events), delta
        dicts for ``format="headstart"``, or chunks of the SSE body (``bytes`` or ``str``) for ``format="sse-…"``
        (``sse-openai-chat``, ``sse-anthropic``, ...). An openai or anthropic SDK stream is read from its HTTP
        response (the body as it came off the wire), unless something already read from it. Use as ``async with engine.wrap(...) as events: async for ev in
        events``; leaving the block early cancels the response and waits until every admitted call has its result.

        ``seal`` says when a Chat Completions call is sealed and may start: ``"complete"`` (the default: once its
        arguments form a complete JSON object, the next call starts, or ``finish_reason`` arrives), ``"next-index"``,
        or ``"finish"`` (only at ``finish_reason``, for a server that interleaves calls; the default ends such a
        response with an error naming this). ``record`` names a file the response's raw SSE events are appended to,
        each with its arrival time (``headstart bench headroom`` reads it)."""
        return Wrapped(self, session, stream, format, seal, None if record is None else os.fspath(record))


class Run:
    """A run's events: an async context manager, and, inside it, an async iterator of ``Event``s. Leaving the block
    before the last event cancels the run and waits until every admitted call has its stored result. After the
    events, ``results`` holds the last response's results in the order of its calls."""

    def __init__(self) -> None:
        self._events: Any = None
        self._pending: Optional[Any] = None
        self._calls: list[str] = []
        self._results: dict[str, ToolResult] = {}
        self._request: Optional[int] = None
        self._first_fragment: Optional[int] = None
        self._figures: Optional[dict[str, Any]] = None

    @property
    def results(self) -> list[ToolResult]:
        """The results of the (last) response's calls, in the order of the calls. Once the events are over, each
        carries its call's ``figures``."""
        return [self._results[call] for call in self._calls if call in self._results]

    @property
    def figures(self) -> Optional[dict[str, Any]]:
        """Once the events are over: this run's figures from the stored times, as ``headstart inspect --json`` gives
        them for its responses. ``calls``: per call ``sealed_ms`` (from the message stored before the run's first
        response), ``headroom_ms`` (how long before its stream ended it was sealed), ``seal_to_start_ms``, ``run_ms``
        and ``overlap_ms`` (the part of its run generation hid); ``responses``: per response ``tool_round_ms``
        beside ``batching_round_ms``, what end-of-stream batching would have taken. Only what the run wrote is read,
        so a step of a long session costs the same as the first (``headstart inspect`` shows the whole session)."""
        return self._figures

    def _figures_source(self) -> Optional[tuple[Any, str]]:
        """The native engine and the session the figures are read from."""
        return None

    async def _read_figures(self) -> None:
        source = self._figures_source()
        if source is None:
            return
        native, session = source
        # The message before the run's first fragment dates its first response's start; a run that began the
        # session reads it whole (there is nothing before it).
        first = self._first_fragment
        after = first - 2 if first is not None and first >= 2 else None
        try:
            self._figures = await native.figures(session, after)
        except _native.StoreError:
            # The events were delivered; a store that cannot be read back leaves the figures unknown.
            self._figures = None
            return
        calls = [call for call in self._figures["calls"] if call["request"] == self._request]
        for call in calls:
            result = self._results.get(call["id"])
            if result is not None:
                result.figures = {key: value for key, value in call.items() if key not in ("id", "name", "request")}

    async def _open(self) -> Any:
        raise NotImplementedError

    async def __aenter__(self) -> "Run":
        self._events = await self._open()
        return self

    async def __aexit__(
        self,
        kind: Optional[type[BaseException]],
        error: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancels the run unless it has ended, and waits until every admitted call has its stored result."""
        if self._events is not None:
            await asyncio.shield(self._events.close())

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        if self._events is None:
            raise RuntimeError("iterate inside the `async with` block")
        while True:
            if self._pending is None:
                self._pending = self._events.next_batch()
            # Shielded: a consumer cancelled while it waits leaves the batch to the next wait, so no event is lost.
            batch = await asyncio.shield(self._pending)
            self._pending = None
            if not batch:
                await self._read_figures()
                return
            for data in batch:
                self._note(data)
                yield Event(data)

    def _note(self, data: dict[str, Any]) -> None:
        if data["type"] == "turn_start":
            self._calls, self._results = [], {}
            self._request = data.get("request")
        if data["type"] != "message_end":
            return
        message = data["message"]
        if message["role"] == "assistant":
            if self._first_fragment is None:
                self._first_fragment = data.get("seq")
            self._calls.extend(block["id"] for block in message["content"] if block["type"] == "tool_call")
        elif message["role"] == "tool_result":
            self._results[message["tool_call_id"]] = ToolResult(message)


class Wrapped(Run):
    """One wrapped response (``engine.wrap``): its stream is read on the loop while its events are consumed."""

    def __init__(
        self, engine: Engine, session: str, stream: Any, format: str, seal: str = "complete", record: Optional[str] = None
    ) -> None:
        super().__init__()
        self._engine = engine
        self._session = session
        self._stream = stream
        self._format = format
        self._seal = seal
        self._record = record
        self._pump: Optional[asyncio.Task[None]] = None

    def _figures_source(self) -> Optional[tuple[Any, str]]:
        return self._engine._native, self._session

    async def _open(self) -> Any:
        _refuse_in_a_forked_child()
        feed, pending = self._engine._native.open(self._session, self._format, self._seal, self._record)
        events = await pending
        self._pump = asyncio.get_running_loop().create_task(pump(self._stream, feed, self._format))
        return events

    async def aclose(self) -> None:
        """Cancels the response unless it has ended, and waits until every admitted call has its stored result."""
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()
        await super().aclose()

"""The Python side of a tool call: the engine (from a tokio thread) starts it here, on the run's event loop.

``start_call`` is called with the GIL from tokio's blocking pool, never from the loop's thread: it schedules the
call's task on the loop (``call_soon_threadsafe``) and returns a handle whose ``cancel`` is safe from any thread.
The task's outcome goes back as plain data through ``done(ok, text, details_json)``.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
from typing import Any, Callable, Optional

from ._context import ToolContext
from ._tools import Tool

__all__ = ["start_call", "start_model"]


class _Call:
    """One call's task on the loop; ``cancel`` may be called from any thread, before or after the task starts."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ctx: Optional[ToolContext]) -> None:
        self._loop = loop
        self._ctx = ctx
        self._task: Optional[asyncio.Task[Any]] = None
        self._cancelled = False

    def cancel(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._cancel)
        except RuntimeError:
            pass  # the loop is closed: nothing runs on it any more

    def _cancel(self) -> None:
        self._cancelled = True
        if self._ctx is not None:
            self._ctx._cancelled = True
        if self._task is not None:
            self._task.cancel()


def start_call(
    loop: asyncio.AbstractEventLoop,
    context: contextvars.Context,
    tool: Tool,
    arguments: str,
    call_id: str,
    idempotency_key: str,
    updates: Any,
    done: Callable[..., None],
) -> _Call:
    """Schedules one call of ``tool`` on ``loop`` (in a copy of ``context``) and returns its handle."""
    ctx = ToolContext(call_id, idempotency_key, updates)
    call = _Call(loop, ctx)

    def start() -> None:
        if call._cancelled:
            done(False, "cancelled before start")
            return
        task = context.copy().run(loop.create_task, _run(tool, arguments, ctx))
        call._task = task
        task.add_done_callback(lambda finished: _report(finished, done))

    loop.call_soon_threadsafe(start)
    return call


async def _run(tool: Tool, arguments: str, ctx: ToolContext) -> tuple[str, Optional[str]]:
    value = await tool.run(json.loads(arguments), ctx)
    return _content(value)


def _content(value: Any) -> tuple[str, Optional[str]]:
    """What a body returned, as the result's text and its details (JSON text): a string as itself, anything else as
    its JSON."""
    if isinstance(value, str):
        return value, None
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    try:
        text = json.dumps(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"the tool returned a value that is not JSON-serialisable ({type(value).__name__}): {error}")
    return text, text


def _report(task: "asyncio.Task[tuple[str, Optional[str]]]", done: Callable[..., None]) -> None:
    if task.cancelled():
        done(False, "cancelled")
        return
    error = task.exception()
    if error is not None:
        done(False, f"{type(error).__name__}: {error}")
        return
    text, details = task.result()
    done(True, text, details)


def start_model(
    loop: asyncio.AbstractEventLoop,
    context: contextvars.Context,
    model: Callable[..., Any],
    request: Any,
    format: str,
    feed: Any,
    done: Callable[..., None],
) -> _Call:
    """Schedules one model request on ``loop``: the callable gives its SDK's stream, ``done`` says whether it did,
    and the same task then pumps the stream into ``feed``. Returns the task's handle."""
    call = _Call(loop, None)

    def start() -> None:
        if call._cancelled:
            done(False, "cancelled before the request")
            return
        call._task = context.copy().run(loop.create_task, _model(model, request, format, feed, done))

    loop.call_soon_threadsafe(start)
    return call


async def _model(model: Callable[..., Any], request: Any, format: str, feed: Any, done: Callable[..., None]) -> None:
    from ._agent import ModelRequest
    from ._engine import pump

    try:
        stream = model(ModelRequest(request))
        if inspect.isawaitable(stream):
            stream = await stream
    except asyncio.CancelledError:
        done(False, "the model request was cancelled")
        raise
    except Exception as error:
        done(False, f"the model raised {type(error).__name__}: {error}")
        return
    done(True, "")
    await pump(stream, feed, format)

"""The Python side of the engine's work on the loop: tool calls and model requests.

The engine (on tokio threads) posts letters to its mailbox and wakes the loop with one byte on a socket;
``install`` makes the loop watch that socket (``loop.add_reader``). The reader callback runs on the loop's thread:
it starts each call's task (in a copy of the context captured when the run started), cancels one, or resolves a
run's awaited batch of events with them. An awaitable of the engine (``create_session``, ``recover``, …) has a
mailbox of its own, which ``resolve_once`` watches until it is done. Answers go back as JSON text through
``done(ok, payload)``; the engine's host layer reads them.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
from typing import Any, Callable, Optional

from ._context import ToolContext
from ._hosted.answer import Answer
from ._pump import pump
from ._tools import Tool

__all__ = ["install", "resolve_once"]

# Python 3.12+: a task that starts running at once, saving a loop iteration before a tool's body begins.
_EAGER: Optional[Callable[..., Any]] = getattr(asyncio, "eager_task_factory", None)


def install(loop: asyncio.AbstractEventLoop, context: contextvars.Context, mailbox: Any) -> None:
    """Makes ``loop`` start the work posted to ``mailbox`` (an engine's), with tasks in copies of ``context``."""
    running: dict[int, tuple[asyncio.Task[Any], Optional[ToolContext]]] = {}

    def forget(id: int) -> Callable[[Any], None]:
        def drop(_: Any) -> None:
            running.pop(id, None)

        return drop

    def reporter(done: Callable[..., None]) -> Callable[[Any], None]:
        def report(finished: Any) -> None:
            _report(finished, done)

        return report

    def start(coroutine: Any) -> "asyncio.Task[Any]":
        """``coroutine`` as a task of the loop, in a copy of the run's context. On Python 3.12+ the task starts at
        once (an eager task runs up to its first ``await`` inside this callback); before 3.12 on the loop's next
        iteration."""
        if _EAGER is not None:
            task: asyncio.Task[Any] = _EAGER(loop, coroutine, context=context.copy())
            return task
        return context.copy().run(loop.create_task, coroutine)

    def deliver() -> None:
        for letter in mailbox.take():
            kind, id = letter[0], letter[1]
            if kind == "cancel":
                found = running.get(id)
                if found is not None:
                    task, ctx = found
                    if ctx is not None:
                        ctx._cancelled = True
                    task.cancel()
                continue
            if kind == "resolve":
                _, _, future, value, error = letter
                _settle(future, value, error)
                continue
            if kind == "call":
                _, _, tool, arguments, call_id, session_id, key, updates, done = letter
                ctx = ToolContext(call_id, session_id, key, updates)
                task = start(_call(tool, arguments, ctx))
                task.add_done_callback(reporter(done))
                running[id] = (task, ctx)
            elif kind == "hook":
                _, _, hook, arguments, done = letter
                task = start(_hook(hook, arguments, done))
                running[id] = (task, None)
            else:
                _, _, model, request, format, feed, done = letter
                task = start(_model(model, request, format, feed, done))
                running[id] = (task, None)
            task.add_done_callback(forget(id))

    loop.add_reader(mailbox.fileno(), deliver)


def resolve_once(loop: asyncio.AbstractEventLoop, future: "asyncio.Future[Any]", mailbox: Any) -> None:
    """Makes ``loop`` resolve ``future`` (an awaitable of the engine: ``create_session``, ``recover``, …) with the one
    letter ``mailbox`` will carry, and stop watching ``mailbox`` once ``future`` is done."""
    fileno = mailbox.fileno()

    def deliver() -> None:
        for _, _, awaited, value, error in mailbox.take():
            _settle(awaited, value, error)

    loop.add_reader(fileno, deliver)
    # The callback keeps `mailbox` (and so its socket) alive until the reader is gone.
    future.add_done_callback(lambda _: (loop.remove_reader(fileno), mailbox))


def _settle(future: "asyncio.Future[Any]", value: Any, error: Optional[BaseException]) -> None:
    """Resolves ``future`` with ``value``, or fails it with ``error``; nothing when it is done already (its awaiter
    cancelled it) or its loop is closed, so that one such letter never costs the others of its batch."""
    if future.done() or future.get_loop().is_closed():
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


async def _call(tool: Tool, arguments: str, ctx: ToolContext) -> str:
    value = await tool.run(json.loads(arguments), ctx)
    return _result(value)


def _result(value: Any) -> str:
    """What a body returned, as the JSON text of its result (the host layer's ``ToolAnswer``): a string as its text,
    anything else as its JSON text, with the value itself as the details. A framework's face gives its ``Answer``
    as it is."""
    if isinstance(value, Answer):
        return value.to_json()
    if isinstance(value, str):
        return json.dumps({"content": value})
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    try:
        text = json.dumps(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"the tool returned a value that is not JSON-serialisable ({type(value).__name__}): {error}")
    return json.dumps({"content": text, "details": value})


def _report(task: "asyncio.Task[str]", done: Callable[..., None]) -> None:
    if task.cancelled():
        done(False, "cancelled")
        return
    error = task.exception()
    if error is not None:
        done(False, f"{type(error).__name__}: {error}")
        return
    done(True, task.result())


async def _model(model: Callable[..., Any], request: Any, format: str, feed: Any, done: Callable[..., None]) -> None:
    """Asks the model for its stream, says whether it came, and pumps it into ``feed``."""
    from ._agent import ModelRequest

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
    done(True)
    await pump(stream, feed, format)


async def _hook(hook: Callable[..., Any], arguments: list[str], done: Callable[..., None]) -> None:
    """Calls a hook with its JSON arguments and reports what it returned, as JSON."""
    try:
        answer = hook(*(json.loads(argument) for argument in arguments))
        if inspect.isawaitable(answer):
            answer = await answer
        text = json.dumps(answer)
    except asyncio.CancelledError:
        done(False, "cancelled")
        raise
    except Exception as error:
        done(False, f"{type(error).__name__}: {error}")
        return
    done(True, text)

"""``LoopThread``: an event loop on a thread of its own, for a framework's synchronous entry points.

A synchronous ``invoke`` has no running loop, and the engine runs its tools on one: the chat's work runs on this
thread's loop, and the caller's thread waits for it (or, for a stream, takes its items as they come)."""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Optional, TypeVar

T = TypeVar("T")

_DONE = object()


class LoopThread:
    """A daemon thread running one event loop, started on first use."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The thread's loop (the thread starts on first use)."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name=self._name, daemon=True).start()
                self._loop = loop
            return self._loop

    def run(self, make: Callable[[], Awaitable[T]]) -> T:
        """Runs the coroutine ``make()`` on the thread's loop and waits for its result (or its exception)."""

        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result()

    def iterate(self, make: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
        """The items of the async iterator ``make()``, iterated on the thread's loop, as they come. Closing the
        returned iterator early cancels the async one."""
        items: "queue.Queue[Any]" = queue.Queue()

        async def pump() -> None:
            try:
                async for item in make():
                    items.put((True, item))
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread, raised there
                items.put((False, error))
                if isinstance(error, asyncio.CancelledError):
                    raise
                return
            items.put((True, _DONE))

        future = asyncio.run_coroutine_threadsafe(pump(), self.loop)
        try:
            while True:
                ok, item = items.get()
                if not ok:
                    raise item
                if item is _DONE:
                    return
                yield item
        finally:
            if not future.done():
                future.cancel()

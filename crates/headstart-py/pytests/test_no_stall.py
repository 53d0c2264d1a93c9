"""No stall: a Python thread that holds the GIL does not stop the engine's commits and starts.

The hog holds the GIL inside one C call (``sum`` over a large range: no bytecode boundary, so no switch interval
applies) for about a second at a time. The engine seals, commits and starts the call without Python: its stored
start follows the seal by far less than the hog's hold. The bound asserted is generous (a busy machine must not
fail it); the figure is printed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, AsyncIterator

import headstart
from conftest import consume, runs


def hog_for(seconds: float) -> int:
    """A range whose ``sum`` takes about ``seconds`` on this machine."""
    size = 1_000_000
    began = time.perf_counter()
    sum(range(size))
    took = max(time.perf_counter() - began, 1e-6)
    return int(size * seconds / took)


async def test_a_gil_hog_does_not_delay_the_start_of_an_early_call(db: str) -> None:
    size = hog_for(1.0)
    stop = threading.Event()
    sealed_at: list[int] = []

    def hog() -> None:
        while not stop.is_set():
            sum(range(size))

    @headstart.tool(early=True)
    async def ping(n: int) -> str:
        return f"pong {n}"

    async def stream() -> AsyncIterator[dict[str, Any]]:
        yield {"type": "start"}
        yield {"type": "toolcall_start", "index": 0, "id": "c1", "name": "ping"}
        yield {"type": "toolcall_delta", "index": 0, "delta": '{"n": 1}'}
        yield {"type": "toolcall_end", "index": 0}
        sealed_at.append(time.time_ns() // 1000)
        thread.start()
        await asyncio.sleep(1.5)
        yield {"type": "done", "stop_reason": "tool_use"}

    thread = threading.Thread(target=hog, daemon=True)
    engine = headstart.Engine(db, tools=[ping])
    session = await engine.create_session()
    try:
        _, results = await consume(engine, session, stream(), "headstart")
    finally:
        stop.set()
        thread.join()
    assert [result.content for result in results] == ["pong 1"]
    [run] = runs(db)
    seal_to_start_ms = (run["started_at_us"] - sealed_at[0]) / 1000
    print(f"\nseal to start with a GIL hog beside the run: {seal_to_start_ms:.1f} ms (the hog holds the GIL ~1000 ms)")
    assert seal_to_start_ms < 500, f"the call started {seal_to_start_ms:.0f} ms after its seal: the hog stalled the engine"

"""Cancellation: cancelling the task that consumes a run cancels the running Python tool, and every admitted call
ends with exactly one stored result."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import headstart
from conftest import paced


def slow_call_then_text(words: int) -> list[dict[str, Any]]:
    return [
        {"type": "start"},
        {"type": "toolcall_start", "index": 0, "id": "c1", "name": "slow"},
        {"type": "toolcall_delta", "index": 0, "delta": '{"n": 1}'},
        {"type": "toolcall_end", "index": 0},
        {"type": "text_start", "index": 1},
        *({"type": "text_delta", "index": 1, "delta": "w "} for _ in range(words)),
        {"type": "text_end", "index": 1},
        {"type": "done", "stop_reason": "tool_use"},
    ]


async def test_cancelling_the_consumer_delivers_cancelled_error_to_the_tool(db: str) -> None:
    started = asyncio.Event()
    cancelled: list[int] = []

    @headstart.tool(early=True)
    async def slow(n: int) -> str:
        """Take a long time."""
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(n)
            raise
        return "finished"

    engine = headstart.Engine(db, tools=[slow])
    session = await engine.create_session()
    seen: list[str] = []

    async def consume() -> None:
        async with engine.wrap(session, paced(slow_call_then_text(1000), 0.01), format="headstart") as events:
            async for event in events:
                seen.append(event.type)

    task = asyncio.get_running_loop().create_task(consume())
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled == [1], "the tool's coroutine did not get CancelledError"

    [stored] = headstart.inspect(db, session)["sessions"]
    [run] = stored["tool_runs"]
    assert (run["call_id"], run["outcome"]) == ("c1", "cancelled")
    results = [m for m in stored["messages"] if m["message"]["role"] == "tool_result"]
    assert [r["message"]["tool_call_id"] for r in results] == ["c1"]
    assert results[0]["message"]["is_error"] is True


async def test_leaving_the_block_early_settles_every_admitted_call(db: str) -> None:
    ran: list[str] = []

    @headstart.tool(early=True)
    async def slow(n: int) -> str:
        """Take a while."""
        await asyncio.sleep(0.2)
        ran.append("done")
        return "finished"

    engine = headstart.Engine(db, tools=[slow])
    session = await engine.create_session()
    async with engine.wrap(session, paced(slow_call_then_text(1000), 0.01), format="headstart") as events:
        async for event in events:
            if event.type == "tool_execution_start":
                break
    [stored] = headstart.inspect(db, session)["sessions"]
    assert [(run["call_id"], run["state"] in ("finished", "cancelled")) for run in stored["tool_runs"]] == [("c1", True)]
    results = [m for m in stored["messages"] if m["message"]["role"] == "tool_result"]
    assert len(results) == 1

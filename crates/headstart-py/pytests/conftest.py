"""Shared fixtures of the Python suite: a fresh SQLite path, the recorded provider streams, the replay server."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

import pytest

import headstart
from headstart import _native

FIXTURES = Path(os.environ.get("HEADSTART_FIXTURES", Path(__file__).resolve().parents[3] / "tests/fixtures/providers"))


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A path for a new SQLite store."""
    return str(tmp_path / "agent.db")


def recording(name: str) -> Path:
    """A recorded provider stream under tests/fixtures/providers."""
    return FIXTURES / name


def replay_server(name: str, delay_ms: float = 0.0) -> Any:
    """The replay server (the Rust one, built into the test build of the extension) serving a recording."""
    if not hasattr(_native, "ReplayServer"):
        pytest.fail("the extension module was built without its `testing` feature")
    return _native.ReplayServer(str(recording(name)), delay_ms)


def matrix_tools() -> list[headstart.Tool]:
    """The two early tools the recorded `openai_chat__streaming_gpt41_parallel_model` response calls."""

    @headstart.tool(early=True)
    async def alpha(value: str) -> str:
        return f"alpha got {value}"

    @headstart.tool(early=True)
    async def beta(value: str) -> str:
        return f"beta got {value}"

    return [alpha, beta]


def runs(path: str) -> list[sqlite3.Row]:
    """The stored tool runs, read with Python's own sqlite3."""
    with sqlite3.connect(path) as connection:
        connection.row_factory = sqlite3.Row
        return connection.execute("SELECT * FROM tool_runs ORDER BY admission").fetchall()


def transcript(path: str) -> list[dict[str, Any]]:
    """The stored messages' bodies, in order."""
    import json

    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT body FROM messages ORDER BY seq").fetchall()
    return [json.loads(body) for (body,) in rows]


async def paced(deltas: Iterable[dict[str, Any]], pause: float) -> AsyncIterator[dict[str, Any]]:
    """Delta dicts as a stream that waits `pause` seconds before each."""
    import asyncio

    for delta in deltas:
        await asyncio.sleep(pause)
        yield delta


async def consume(engine: headstart.Engine, session: str, stream: Any, format: str) -> tuple[list[headstart.Event], list[headstart.ToolResult]]:
    """Every event of one wrapped response, and its results."""
    async with engine.wrap(session, stream, format=format) as events:
        seen = [event async for event in events]
    return seen, events.results

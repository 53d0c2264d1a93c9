"""Shared fixtures of the Python suite: a fresh SQLite path, the recorded provider streams, the replay server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
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


# Python's sqlite3 is a second copy of SQLite: in the process that has the store open, its locks would not see the
# engine's (POSIX locks are per process), and closing its connection would delete the WAL index under the engine
# (sqlite.org/howtocorrupt.html, 2.2.1). The tests read the store with it from a process of their own.
_READER = """
import json, sqlite3, sys
connection = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
connection.row_factory = sqlite3.Row
print(json.dumps([dict(row) for row in connection.execute(sys.argv[2]).fetchall()]))
"""


def query(path: str, sql: str) -> list[dict[str, Any]]:
    """The rows of ``sql`` on the store at ``path``, read with Python's own sqlite3 in another process."""
    done = subprocess.run([sys.executable, "-c", _READER, path, sql], capture_output=True, text=True, check=True)
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


async def query_async(path: str, sql: str) -> list[dict[str, Any]]:
    """``query`` without blocking the event loop (from inside a tool's body)."""
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", _READER, path, sql, stdout=asyncio.subprocess.PIPE)
    out, _ = await child.communicate()
    assert child.returncode == 0, f"the reader failed ({child.returncode})"
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


def runs(path: str) -> list[dict[str, Any]]:
    """The stored tool runs, read with Python's own sqlite3."""
    return query(path, "SELECT * FROM tool_runs ORDER BY admission")


def transcript(path: str) -> list[dict[str, Any]]:
    """The stored messages' bodies, in order."""
    return [json.loads(row["body"]) for row in query(path, "SELECT body FROM messages ORDER BY seq")]


async def paced(deltas: Iterable[dict[str, Any]], pause: float) -> AsyncIterator[dict[str, Any]]:
    """Delta dicts as a stream that waits `pause` seconds before each."""
    for delta in deltas:
        await asyncio.sleep(pause)
        yield delta


async def consume(engine: headstart.Engine, session: str, stream: Any, format: str) -> tuple[list[headstart.Event], list[headstart.ToolResult]]:
    """Every event of one wrapped response, and its results."""
    async with engine.wrap(session, stream, format=format) as events:
        seen = [event async for event in events]
    return seen, events.results

"""What the frameworks' crash tests share: the three tools of a run that is killed while two of its early calls run
(``read_file`` finishes, ``fetch`` (idempotent) and ``lookup`` hang, each marking that it started), the same tools as
the process that goes on runs them (recording each run), the model response that calls them, and the child process
killed with SIGKILL once it is where the test wants it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import headstart
from chat_replies import Call, Reply, Runs, started

CALLS = [
    Call("call_read", "read_file", ['{"path": "a"}']),
    Call("call_fetch", "fetch", ['{"path": "b"}']),
    Call("call_lookup", "lookup", ['{"key": "k", "n": 1}']),
]
RESPONSE = Reply(calls=CALLS, finish="tool_calls")
"""The response of the run that is killed."""
EARLY = ["read_file", "fetch", "lookup"]


def hanging_bodies(marks: str) -> list[Callable[..., Awaitable[str]]]:
    """The killed process's tool bodies: ``fetch`` and ``lookup`` mark ``marks/<name>`` and hang."""

    async def hang(name: str) -> str:
        Path(marks, name).touch()
        await asyncio.sleep(3600)  # killed here
        return name

    async def read_file(path: str) -> str:
        """Reads a file."""
        return f"contents of {path}"

    async def fetch(path: str) -> str:
        """Fetches a file again (idempotent)."""
        return await hang("fetch")

    async def lookup(key: str, n: int) -> str:
        """Looks a key up."""
        return await hang("lookup")

    return [read_file, fetch, lookup]


def recorded_bodies(runs: Runs) -> list[Callable[..., Awaitable[str]]]:
    """The same tools in the process that goes on: each run recorded in ``runs``."""

    async def read_file(path: str) -> str:
        """Reads a file."""
        started(runs, "read_file", {"path": path})
        return f"contents of {path}"

    async def fetch(path: str) -> str:
        """Fetches a file again (idempotent)."""
        started(runs, "fetch", {"path": path})
        return f"fetched {path}"

    async def lookup(key: str, n: int) -> str:
        """Looks a key up."""
        started(runs, "lookup", {"key": key, "n": n})
        return f"{key} #{n}"

    return [read_file, fetch, lookup]


def kill_when_ready(code: str, arguments: list[str], ready: Callable[[], bool]) -> None:
    """Runs ``code`` in a child Python (this suite's folder importable) and kills it with SIGKILL once ``ready()``
    holds; fails if it ends first, or is not ready within 30 s."""
    child = subprocess.Popen(
        [sys.executable, "-c", code, *arguments],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(600):
            if ready() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert child.poll() is None, f"the run ended before it was killed: {child.communicate()[0]!r}"
        assert ready(), "the run never got where the test kills it"
    finally:
        child.kill()
        child.communicate()


def stored_results(db: str, session: str) -> dict[str, Any]:
    """The tool results a store holds for ``session``, by call id (none while it holds no such session). Read from
    a process with no engine on the file, as another process may read it."""
    sessions = headstart.inspect(db, session)["sessions"] if Path(db).exists() else []
    return {e["message"]["tool_call_id"]: e["message"] for s in sessions for e in s["messages"] if e["message"]["role"] == "tool_result"}

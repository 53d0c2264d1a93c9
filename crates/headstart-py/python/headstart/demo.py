"""The simulated agent of ``headstart demo``, in Python: its scripted model (the same timed responses, streamed on
the wall clock) and its tools (``lookup_crate``, early, with the same simulated latencies; ``write_file``, sync).
``examples/python/demo.py`` runs it; nothing here needs a network or a key."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any, AsyncIterator

from . import _native
from ._agent import ModelRequest
# The package's `tool`, as its stub types it (a decorator that makes a `Tool`).
from . import Tool, tool

__all__ = ["PROMPT", "model", "tools"]

PROMPT = "Research tokio, serde and rusqlite and write a short summary to summary.md."

_LOOKUPS = {
    "tokio": (1.1, "tokio 1.x: async runtime with a work-stealing scheduler, timers and async I/O."),
    "serde": (0.7, "serde 1.x: derive-based serialization framework; formats live in separate crates."),
    "rusqlite": (0.9, "rusqlite: SQLite bindings; the `bundled` feature compiles SQLite in."),
    "trends": (0.4, "downloads: serde > tokio > rusqlite (all three are among the most used crates)."),
}


async def model(request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
    """The scripted response to ``request`` (format ``headstart``), each delta at its time."""
    responses = _native.demo_script()
    if request.number >= len(responses):
        raise RuntimeError(f"the demo model has no response for request {request.number}")
    return _timed(responses[request.number])


async def _timed(deltas: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    start = time.monotonic()
    for delta in deltas:
        due = start + delta.pop("at_ms") / 1000
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        yield delta


def tools(out_dir: "str | os.PathLike[str]") -> list[Tool]:
    """The demo's tools; ``write_file`` writes into ``out_dir``."""

    @tool(early=True, idempotent=True)
    async def lookup_crate(name: str) -> str:
        """Look a crate up in the (simulated) registry."""
        delay, answer = _LOOKUPS.get(name, (0.3, "no such crate in the simulated registry."))
        await asyncio.sleep(delay)
        return answer

    @tool()
    def write_file(path: str, content: str) -> str:
        """Write a text file in the output folder."""
        if Path(path).name != path:
            raise ValueError(f"refusing to write outside the output folder: {path}")
        target = Path(out_dir) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        return f"wrote {len(content)} bytes to {target}"

    return [lookup_crate, write_file]

"""The package as a user installs it: run by ``tests/pip_install.rs`` in a fresh virtual environment after
``pip install ./crates/headstart-py openai``, against a local server replaying a recorded Chat Completions stream
with two tool calls (``alpha`` and ``beta``), one event every few tens of milliseconds.

This is the README's shape: the application's own ``AsyncOpenAI`` client, ``engine.tool_specs``, ``engine.wrap``.
Each early tool, from inside its body, has the SQLite file read with Python's ``sqlite3`` and looks for its own call
in a committed message (the durable prefix). The reading is done by another process: Python's sqlite3 is a second
copy of SQLite, and two copies in one process do not see each other's locks (closing its connection would delete
the WAL index under the engine; sqlite.org/howtocorrupt.html, 2.2.1). Prints one JSON object for the test to check: the events in order (type
and call id), what each body found, the results, and the stored messages (``headstart.inspect``).

Usage: ``python openai_agent.py BASE_URL DB_PATH``
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from openai import AsyncOpenAI

import headstart

URL, DB = sys.argv[1], sys.argv[2]
found: dict[str, bool] = {}


READER = """
import json, sqlite3, sys
connection = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
print(json.dumps([body for (body,) in connection.execute("SELECT body FROM messages")]))
"""


async def stored_calls() -> set[str]:
    """The ids of the calls in the committed messages, read with Python's own sqlite3 in another process."""
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", READER, DB, stdout=asyncio.subprocess.PIPE)
    out, _ = await child.communicate()
    bodies = [json.loads(body) for body in json.loads(out)]
    blocks = [block for body in bodies for block in body.get("content", []) if isinstance(block, dict)]
    return {block["id"] for block in blocks if block.get("type") == "tool_call"}


@headstart.tool(early=True, idempotent=True)
async def alpha(value: str, ctx: headstart.ToolContext) -> str:
    """Look a value up (read-only)."""
    found[ctx.call_id] = ctx.call_id in await stored_calls()
    return f"alpha saw {value}"


@headstart.tool(early=True, idempotent=True)
async def beta(value: str, ctx: headstart.ToolContext) -> str:
    """Look another value up (read-only)."""
    found[ctx.call_id] = ctx.call_id in await stored_calls()
    return f"beta saw {value}"


def label(event: headstart.Event) -> str:
    if event.type.startswith("tool_execution"):
        call = event.call.id if event.type == "tool_execution_start" else event.tool_call_id
        return f"{event.type} {call}"
    if event.type == "message_end":
        return f"message_end {event.message.role} {event.message.get('stop_reason', '')}".strip()
    return event.type


async def main() -> None:
    client = AsyncOpenAI(base_url=URL, api_key="not-a-key", max_retries=0)
    engine = headstart.Engine(DB, tools=[alpha, beta])
    session = await engine.create_session()
    stream = await client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=[{"role": "user", "content": "Call alpha with value red and beta with value blue."}],
        tools=engine.tool_specs("openai-chat"),  # type: ignore[arg-type]
        stream=True,
    )
    order: list[str] = []
    async with engine.wrap(session, stream, format="openai-chat") as events:
        async for event in events:
            order.append(label(event))
    report: dict[str, Any] = {
        "order": order,
        "found": found,
        "results": [result.to_dict() for result in events.results],
        "messages": [stored["message"] for stored in headstart.inspect(DB, session)["sessions"][0]["messages"]],
    }
    print(json.dumps(report))


asyncio.run(main())

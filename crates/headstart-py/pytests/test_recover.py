"""Recovery: a process killed while its early tool ran leaves an admitted call without a result; `engine.recover`
gives it one (runs an idempotent tool again, or records it as interrupted)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import headstart

CRASHING = textwrap.dedent(
    """
    import asyncio, os, sys
    import headstart

    @headstart.tool(early=True, idempotent=True)
    async def charge(amount: int) -> str:
        print("started", flush=True)
        os._exit(9)  # the process dies while the call runs

    async def main():
        engine = headstart.Engine(sys.argv[1], tools=[charge])
        session = await engine.create_session()
        print(session, flush=True)
        deltas = [
            {"type": "start"},
            {"type": "toolcall_start", "index": 0, "id": "c1", "name": "charge"},
            {"type": "toolcall_delta", "index": 0, "delta": '{"amount": 5}'},
            {"type": "toolcall_end", "index": 0},
            {"type": "done", "stop_reason": "tool_use"},
        ]
        async with engine.wrap(session, deltas, format="headstart") as events:
            async for _ in events:
                pass

    asyncio.run(main())
    """
)


def crash(db: str) -> str:
    done = subprocess.run([sys.executable, "-c", CRASHING, db], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 9, done.stdout + done.stderr
    session, started = done.stdout.split()
    assert started == "started"
    return session


@pytest.mark.parametrize(("policy", "action", "is_error"), [("rerun_idempotent", "re_executed", False), ("fail", "interrupted", True)])
async def test_recover_gives_the_interrupted_call_its_result(tmp_path: Path, policy: str, action: str, is_error: bool) -> None:
    db = str(tmp_path / "crashed.db")
    session = crash(db)
    [stored] = headstart.inspect(db, session)["sessions"]
    # Admitted, and maybe marked started (that write is off the critical path, and the crash may beat it).
    assert [(run["call_id"], run["state"] in ("admitted", "started")) for run in stored["tool_runs"]] == [("c1", True)]

    @headstart.tool(early=True, idempotent=True)
    async def charge(amount: int) -> str:
        return f"charged {amount}"

    engine = headstart.Engine(db, tools=[charge])
    [recovered] = await engine.recover(session, policy=policy)
    assert (recovered["call_id"], recovered["action"]) == ("c1", action)
    [stored] = headstart.inspect(db, session)["sessions"]
    [result] = [m["message"] for m in stored["messages"] if m["message"]["role"] == "tool_result"]
    assert result["is_error"] is is_error
    if not is_error:
        assert result["content"][0]["text"] == "charged 5"

"""Hooks: Python callables before and after each call, on the run's loop."""

from __future__ import annotations

from typing import Any

import headstart
from conftest import consume


def two_calls() -> list[dict[str, Any]]:
    deltas: list[dict[str, Any]] = [{"type": "start"}]
    for index, (call, path) in enumerate([("c1", "notes.txt"), ("c2", "/etc/passwd")]):
        deltas += [
            {"type": "toolcall_start", "index": index, "id": call, "name": "read"},
            {"type": "toolcall_delta", "index": index, "delta": f'{{"path": "{path}"}}'},
            {"type": "toolcall_end", "index": index},
        ]
    return deltas + [{"type": "done", "stop_reason": "tool_use"}]


async def test_a_before_hook_blocks_and_an_after_hook_rewrites(db: str) -> None:
    seen: list[str] = []

    @headstart.tool(early=True)
    async def read(path: str) -> str:
        seen.append(path)
        return f"contents of {path}"

    async def before(call: dict[str, Any], arguments: dict[str, Any]) -> Any:
        return "absolute paths are not allowed" if arguments["path"].startswith("/") else None

    def after(call: dict[str, Any], result: dict[str, Any]) -> Any:
        return {"content": result["content"].upper()} if call["id"] == "c1" else None

    engine = headstart.Engine(db, tools=[read], before_tool_call=before, after_tool_call=after)
    session = await engine.create_session()
    _, results = await consume(engine, session, two_calls(), "headstart")
    assert seen == ["notes.txt"]
    assert [(r.tool_call_id, r.content, r.is_error) for r in results] == [
        ("c1", "CONTENTS OF NOTES.TXT", False),
        ("c2", "absolute paths are not allowed", True),
    ]


async def test_a_hook_that_raises_fails_the_call(db: str) -> None:
    @headstart.tool(early=True)
    async def read(path: str) -> str:
        return path

    def before(call: dict[str, Any], arguments: dict[str, Any]) -> Any:
        raise PermissionError("no approval")

    engine = headstart.Engine(db, tools=[read], before_tool_call=before)
    session = await engine.create_session()
    _, results = await consume(engine, session, two_calls(), "headstart")
    assert all(result.is_error and "PermissionError: no approval" in result.content for result in results)
    assert len(results) == 2

"""Early and durable: an early Python tool starts while the stream still runs, after its prefix is stored."""

from __future__ import annotations

import asyncio
from typing import Any

import headstart
from conftest import consume, paced, query_async


def call_deltas(call_id: str, name: str, arguments: str, then_text: int) -> list[dict[str, Any]]:
    deltas: list[dict[str, Any]] = [
        {"type": "start", "response_id": "resp-1"},
        {"type": "toolcall_start", "index": 0, "id": call_id, "name": name},
        {"type": "toolcall_delta", "index": 0, "delta": arguments},
        {"type": "toolcall_end", "index": 0},
        {"type": "text_start", "index": 1},
    ]
    deltas += [{"type": "text_delta", "index": 1, "delta": f"word{n} "} for n in range(then_text)]
    deltas += [{"type": "text_end", "index": 1}, {"type": "done", "stop_reason": "tool_use"}]
    return deltas


async def test_an_early_tool_finds_its_own_call_committed_and_starts_before_the_stream_ends(db: str) -> None:
    stream_over = asyncio.Event()
    seen: dict[str, Any] = {}

    @headstart.tool(early=True, idempotent=True)
    async def lookup(query: str) -> str:
        """Look something up."""
        seen["stream_over_at_start"] = stream_over.is_set()
        [row] = await query_async(
            db,
            "SELECT r.state, m.body FROM tool_runs r JOIN messages m"
            " ON m.session_id = r.session_id AND m.seq = r.fragment_seq WHERE r.call_id = 'c1'",
        )
        seen["row"] = row
        return f"found {query}"

    async def stream() -> Any:
        async for delta in paced(call_deltas("c1", "lookup", '{"query": "tokio"}', then_text=40), 0.01):
            yield delta
        stream_over.set()

    engine = headstart.Engine(db, tools=[lookup])
    session = await engine.create_session()
    events, results = await consume(engine, session, stream(), "headstart")

    assert seen["row"] is not None, "the call's prefix was not stored when its body began"
    state, body = seen["row"]["state"], seen["row"]["body"]
    assert state in ("admitted", "started")
    assert '"c1"' in body
    assert seen["stream_over_at_start"] is False, "the early tool started only after the stream ended"
    kinds = [event.type for event in events]
    last_update = len(kinds) - 1 - kinds[::-1].index("message_update")
    assert kinds.index("tool_execution_start") < last_update
    start = next(event for event in events if event.type == "tool_execution_start")
    assert start.call.name == "lookup" and start.call.id == "c1"
    assert kinds[-1] == "turn_end"
    assert [(result.tool_call_id, result.content, result.is_error) for result in results] == [("c1", "found tokio", False)]


async def test_each_run_reports_the_figures_of_its_own_responses(db: str) -> None:
    @headstart.tool(early=True, idempotent=True)
    async def lookup(query: str) -> str:
        """Look something up."""
        return f"found {query}"

    engine = headstart.Engine(db, tools=[lookup])
    session = await engine.create_session()
    for n in range(3):
        async with engine.wrap(session, call_deltas(f"c{n}", "lookup", '{"query": "x"}', then_text=2), format="headstart") as run:
            kinds = [event.type async for event in run]
        assert kinds[-1] == "turn_end"
        # Read from what this response wrote: its own call and response only, whatever came before.
        figures = run.figures
        assert figures is not None
        assert [(call["id"], call["request"]) for call in figures["calls"]] == [(f"c{n}", n)]
        assert [response["request"] for response in figures["responses"]] == [n]
        [call] = figures["calls"]
        assert call["headroom_ms"] is not None and call["headroom_ms"] >= 0, call
        [result] = run.results
        assert result.figures is not None and result.figures["run_ms"] is not None


async def test_a_sync_tool_runs_in_a_thread_after_the_stream(db: str) -> None:
    @headstart.tool()
    def add(a: int, b: int) -> dict[str, int]:
        """Add two numbers."""
        return {"sum": a + b}

    engine = headstart.Engine(db, tools=[add])
    session = await engine.create_session()
    events, results = await consume(engine, session, call_deltas("c1", "add", '{"a": 2, "b": 3}', then_text=2), "headstart")
    assert [result.content for result in results] == ['{"sum": 5}']
    end = next(event for event in events if event.type == "tool_execution_end")
    assert end.is_error is False and end.to_dict()["outcome"] == "finished"


def test_the_schema_comes_from_the_signature() -> None:
    @headstart.tool(early=True, conflict_key="path")
    async def read(path: str, limit: int = 10, ctx: headstart.ToolContext | None = None) -> str:
        """Read a file."""
        return path

    assert read.name == "read" and read.description == "Read a file."
    assert read.parameters["properties"]["path"]["type"] == "string"
    assert read.parameters["properties"]["limit"]["type"] == "integer"
    assert "ctx" not in read.parameters["properties"]
    assert read.parameters["required"] == ["path"]
    assert read.spec()["conflict_key"] == "path" and "path" in read.parameters["properties"]


async def test_tool_specs_are_the_formats_own(db: str) -> None:
    @headstart.tool()
    async def ping(host: str) -> str:
        """Ping a host."""
        return host

    engine = headstart.Engine(db, tools=[ping])
    [chat] = engine.tool_specs("openai-chat")
    assert chat["type"] == "function" and chat["function"]["name"] == "ping"
    [anthropic] = engine.tool_specs("anthropic")
    assert anthropic["name"] == "ping" and "input_schema" in anthropic


async def test_a_tools_context_names_its_call_session_and_key(db: str) -> None:
    seen: list[headstart.ToolContext] = []

    @headstart.tool(early=True)
    async def note(ctx: headstart.ToolContext) -> str:
        seen.append(ctx)
        return "noted"

    engine = headstart.Engine(db, tools=[note])
    sessions = [await engine.create_session() for _ in range(2)]
    for session in sessions:
        call = [
            {"type": "start"},
            {"type": "toolcall_start", "index": 0, "id": "c1", "name": "note"},
            {"type": "toolcall_end", "index": 0, "arguments": {}},
            {"type": "done", "stop_reason": "tool_use"},
        ]
        await consume(engine, session, call, "headstart")
    assert [(ctx.call_id, ctx.session_id) for ctx in seen] == [("c1", session) for session in sessions]
    # The same call id in two sessions: two keys, each naming its session's call.
    assert seen[0].idempotency_key != seen[1].idempotency_key
    assert all(ctx.idempotency_key and not ctx.cancelled for ctx in seen)

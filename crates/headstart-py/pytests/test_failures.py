"""Failures: each gives a clear result or exception, and nothing admitted is lost."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

import pytest

import headstart
from conftest import consume


def one_call(name: str, arguments: str, early: bool = True) -> list[dict[str, Any]]:
    return [
        {"type": "start"},
        {"type": "toolcall_start", "index": 0, "id": "c1", "name": name},
        {"type": "toolcall_delta", "index": 0, "delta": arguments},
        {"type": "toolcall_end", "index": 0},
        {"type": "done", "stop_reason": "tool_use"},
    ]


async def run_one(db: str, tool: headstart.Tool, arguments: str) -> tuple[list[headstart.Event], headstart.ToolResult]:
    engine = headstart.Engine(db, tools=[tool])
    session = await engine.create_session()
    events, results = await consume(engine, session, one_call(tool.name, arguments), "headstart")
    [result] = results
    return events, result


async def test_a_tool_that_raises_gives_an_error_result(db: str) -> None:
    @headstart.tool(early=True)
    async def broken(x: int) -> str:
        raise ValueError(f"no good: {x}")

    events, result = await run_one(db, broken, '{"x": 3}')
    assert result.is_error and result.content == "ValueError: no good: 3"
    end = next(event for event in events if event.type == "tool_execution_end")
    assert end.is_error and end.outcome == "error"


async def test_a_sync_tool_that_raises_gives_an_error_result(db: str) -> None:
    @headstart.tool()
    def broken() -> str:
        raise KeyError("missing")

    _, result = await run_one(db, broken, "{}")
    assert result.is_error and result.content == "KeyError: 'missing'"


async def test_a_value_that_is_not_json_gives_an_error_result(db: str) -> None:
    @headstart.tool(early=True)
    async def odd() -> Any:
        return object()

    _, result = await run_one(db, odd, "{}")
    assert result.is_error and "not JSON-serialisable" in result.content


async def test_a_tool_past_its_timeout_is_cancelled_and_fails(db: str) -> None:
    cancelled: list[bool] = []

    @headstart.tool(early=True, timeout=0.2)
    async def sleepy() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "woke"

    events, result = await run_one(db, sleepy, "{}")
    assert result.is_error and result.content == "timed out after 200ms"
    end = next(event for event in events if event.type == "tool_execution_end")
    assert end.outcome == "timed_out"
    for _ in range(100):
        if cancelled:
            break
        await asyncio.sleep(0.01)
    assert cancelled == [True], "the timed-out coroutine was not cancelled"


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), 1e300])
def test_a_timeout_that_is_not_a_finite_duration_is_refused_clearly(db: str, seconds: float) -> None:
    @headstart.tool(timeout=seconds)
    async def forever() -> str:
        return "never"

    with pytest.raises(headstart.ConfigError, match="timeout must be a finite number of seconds"):
        headstart.Engine(db, tools=[forever])


async def test_bad_arguments_never_reach_the_body(db: str) -> None:
    ran: list[int] = []

    @headstart.tool(early=True)
    async def typed(count: int) -> str:
        ran.append(count)
        return "ran"

    _, result = await run_one(db, typed, '{"count": "many"}')
    assert result.is_error and ran == []
    _, result = await run_one(db + "2", typed, '{"count": 2, "extra": true}')
    assert result.is_error and ran == []


async def test_a_stream_that_raises_midway_ends_the_response_and_keeps_the_early_call(db: str) -> None:
    @headstart.tool(early=True)
    async def lookup(q: str) -> str:
        return f"found {q}"

    async def failing() -> AsyncIterator[dict[str, Any]]:
        for delta in one_call("lookup", '{"q": "x"}')[:4]:
            yield delta
        await asyncio.sleep(0.05)
        raise ConnectionError("the network went away")

    engine = headstart.Engine(db, tools=[lookup])
    session = await engine.create_session()
    events, results = await consume(engine, session, failing(), "headstart")
    assert [(result.tool_call_id, result.content) for result in results] == [("c1", "found x")]
    end = events[-1]
    assert end.type == "turn_end"
    assert end.outcome["stop_reason"] == "error"
    assert "ConnectionError: the network went away" in end.outcome["error"]


async def test_an_unknown_format_raises_and_a_bad_delta_fails_the_response(db: str) -> None:
    engine = headstart.Engine(db, tools=[])
    session = await engine.create_session()
    with pytest.raises(headstart.ConfigError):
        async with engine.wrap(session, [], format="nonsense"):
            pass
    events, _ = await consume(engine, session, [{"type": "start"}, {"type": "no_such_delta"}], "headstart")
    end = events[-1]
    assert end.type == "turn_end" and end.outcome["stop_reason"] == "error"
    assert "ModelError: not a delta event" in end.outcome["error"]


def test_a_store_that_cannot_be_opened_raises_store_error(tmp_path: Any) -> None:
    with pytest.raises(headstart.StoreError):
        headstart.Engine(str(tmp_path / "no" / "such" / "dir" / "x.db"))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork")  # the fork is the test
def test_a_forked_child_is_refused_clearly(db: str) -> None:
    import os

    headstart.Engine(db, tools=[])
    child = os.fork()
    if child == 0:
        try:
            headstart.Engine(db + "-child", tools=[])
        except headstart.EngineError as error:
            os._exit(0 if "forked" in str(error) else 2)
        except BaseException:
            os._exit(3)
        os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def chat_chunk(delta: dict[str, Any], finish: Any = None) -> bytes:
    """One Chat Completions SSE event, as the body carries it."""
    chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def chat_call(index: int, id: str, arguments: str) -> bytes:
    call = {"index": index, "id": id, "type": "function", "function": {"name": "lookup", "arguments": arguments}}
    return chat_chunk({"role": "assistant", "tool_calls": [call]})


async def test_a_body_that_ends_before_the_providers_end_fails_and_runs_nothing_unsealed(db: str) -> None:
    """An ``sse-`` body read to its end without the provider's end (``finish_reason``): the response is an error
    (contract §5.5, as ``headstart run`` reads a body), the text is kept, and the call cut off mid-arguments never
    runs: it has an error result."""
    ran: list[str] = []

    @headstart.tool(early=True)
    async def lookup(q: str) -> str:
        ran.append(q)
        return f"found {q}"

    body = [chat_chunk({"role": "assistant", "content": "Looking."}), chat_call(0, "c1", '{"q": "x"')]
    engine = headstart.Engine(db, tools=[lookup])
    session = await engine.create_session()
    events, results = await consume(engine, session, body, "sse-openai-chat")
    end = events[-1]
    assert end.type == "turn_end" and end.outcome["stop_reason"] == "error"
    assert "ended" in end.outcome["error"], end.outcome["error"]
    assert ran == []
    [result] = results
    assert result.tool_call_id == "c1" and result.is_error, result
    assert "not executed" in result.content, result.content
    [said] = [event.message for event in events if event.type == "message_end" and event.message.role == "assistant"]
    assert said.content[0].text == "Looking." and said.stop_reason == "error"


async def test_an_sse_stream_of_something_else_fails_clearly(db: str) -> None:
    engine = headstart.Engine(db, tools=[])
    session = await engine.create_session()
    events, _ = await consume(engine, session, [chat_chunk({"content": "hi"}), 42], "sse-openai-chat")
    end = events[-1]
    assert end.type == "turn_end" and end.outcome["stop_reason"] == "error"
    assert "TypeError: an sse- format's stream yields bytes or str" in end.outcome["error"]
    assert [event.delta.delta for event in events if event.type == "message_update" and event.delta.type == "text_delta"] == ["hi"]


async def test_a_complete_body_in_one_piece_answers(db: str) -> None:
    engine = headstart.Engine(db, tools=[])
    session = await engine.create_session()
    body = chat_chunk({"role": "assistant", "content": "hello"}) + chat_chunk({}, "stop") + b"data: [DONE]\n\n"
    events, _ = await consume(engine, session, [body.decode()], "sse-openai-chat")
    end = events[-1]
    assert end.type == "turn_end" and end.outcome["stop_reason"] == "stop" and end.outcome["error"] is None

"""Differential: the real SDK's stream, served by the replay server, gives what the Rust-only path gives."""

from __future__ import annotations

from typing import Any

import openai

import headstart
from headstart import _native
from conftest import consume, recording, replay_server, runs, transcript

CHAT = "openai_chat__streaming_gpt41_parallel_model.yaml"


def matrix_tools(log: list[str]) -> list[headstart.Tool]:
    @headstart.tool(early=True)
    async def alpha(value: str) -> str:
        """Matrix tool alpha"""
        log.append(f"alpha {value}")
        return f"alpha got {value}"

    @headstart.tool(early=True)
    async def beta(value: str) -> str:
        """Matrix tool beta"""
        log.append(f"beta {value}")
        return f"beta got {value}"

    return [alpha, beta]


def updates(events: list[headstart.Event]) -> list[dict[str, Any]]:
    return [event.to_dict() for event in events if event.type == "message_update"]


def stored(path: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[str, str, str | None]]]:
    """The model's messages in order, the results by call id (they are stored in completion order), the runs."""
    messages = transcript(path)
    said = [message for message in messages if message["role"] != "tool_result"]
    results = sorted((message for message in messages if message["role"] == "tool_result"), key=lambda m: m["tool_call_id"])
    calls = sorted((row["call_id"], row["tool_name"], row["outcome"]) for row in runs(path))
    return said, results, calls


async def test_openai_chat_sdk_stream_equals_the_rust_only_path(tmp_path: Any) -> None:
    # The SDK path: AsyncOpenAI pointed at the replay server.
    server = replay_server(CHAT)
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0)
    sdk_log: list[str] = []
    sdk_db = str(tmp_path / "sdk.db")
    engine = headstart.Engine(sdk_db, tools=matrix_tools(sdk_log))
    session = await engine.create_session()
    stream = await client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=[{"role": "user", "content": "Call alpha with value red and beta with value blue."}],
        tools=engine.tool_specs("openai-chat"),
        stream=True,
    )
    sdk_events, sdk_results = await consume(engine, session, stream, "openai-chat")
    [request] = server.request_bodies()
    assert [tool["function"]["name"] for tool in request["tools"]] == ["alpha", "beta"]

    # The Rust-only path: the converter's deltas of the same recording, wrapped by the same engine code.
    [deltas] = _native.convert_recording(str(recording(CHAT)), "openai-chat")
    rust_log: list[str] = []
    rust_db = str(tmp_path / "rust.db")
    engine = headstart.Engine(rust_db, tools=matrix_tools(rust_log))
    session = await engine.create_session()
    rust_events, rust_results = await consume(engine, session, deltas, "headstart")

    assert updates(sdk_events) == updates(rust_events)
    assert stored(sdk_db) == stored(rust_db)
    assert sorted(sdk_log) == sorted(rust_log) == ["alpha red", "beta blue"]
    assert [result.to_dict() for result in sdk_results] == [result.to_dict() for result in rust_results]
    assert [result.content for result in sdk_results] == ["alpha got red", "beta got blue"]
    assert [event.type for event in sdk_events][-1] == "turn_end"

"""``headstart.HttpModel``: Rust owns the HTTP (requests, retries, SSE); a 429 before the first delta is retried, and
one that persists ends the run with a clear error."""

from __future__ import annotations

from typing import Any

import headstart
from conftest import matrix_tools, recording, runs
from headstart import _native

CHAT = "openai_chat__streaming_gpt41_parallel_model.yaml"


async def run(db: str, server: Any) -> list[headstart.Event]:
    model = headstart.HttpModel("openai-chat", "gpt-4.1-mini", base_url=server.url + "/v1", api_key_env="")
    engine = headstart.Engine(db, tools=matrix_tools())
    agent = headstart.Agent(engine, model, max_turns=1)
    session = await engine.create_session()
    async with agent.run(session, "Call alpha with red and beta with blue.") as events:
        return [event async for event in events]


async def test_a_429_before_the_first_delta_is_retried(db: str) -> None:
    server = _native.ReplayServer(str(recording(CHAT)), 0.0, [429])
    events = await run(db, server)
    assert len(server.request_bodies()) == 2
    assert events[-1].stop.reason == "max_turns"
    assert sorted((row["call_id"], row["outcome"]) for row in runs(db)) == [
        ("call_REDACTED_1", "finished"),
        ("call_REDACTED_2", "finished"),
    ]


async def test_a_429_that_persists_ends_the_run_with_its_error(db: str) -> None:
    server = _native.ReplayServer(str(recording(CHAT)), 0.0, [429, 429, 429])
    events = await run(db, server)
    stop = events[-1].stop
    assert stop.reason == "error" and "429" in stop.message, stop
    assert runs(db) == []


def test_an_unknown_provider_is_a_config_error() -> None:
    try:
        headstart.HttpModel("carrier-pigeon", "m")
    except headstart.ConfigError as error:
        assert "carrier-pigeon" in str(error)
    else:
        raise AssertionError("no ConfigError")

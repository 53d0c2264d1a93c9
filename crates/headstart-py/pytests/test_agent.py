"""``headstart.Agent``: the engine's loop asking a Python model callable, over the real SDKs and the replay server."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai

import headstart
from conftest import matrix_tools, replay_server, runs

ARITHMETIC = {"add": lambda x, y: x + y, "subtract": lambda x, y: x - y, "multiply": lambda x, y: x * y, "divide": lambda x, y: x / y}


def arithmetic_tools() -> list[headstart.Tool]:
    def make(name: str) -> headstart.Tool:
        async def body(x: float, y: float) -> str:
            return str(ARITHMETIC[name](x, y))

        return headstart.tool(body, name=name, description=f"{name} two numbers", early=True)

    return [make(name) for name in ARITHMETIC]


async def test_an_anthropic_agent_runs_the_recorded_conversation_to_its_end(db: str) -> None:
    server = replay_server("anthropic__multi_turn_streaming_tools.yaml")
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="test-key", max_retries=0)
    engine = headstart.Engine(db, tools=arithmetic_tools())
    numbers: list[int] = []

    async def model(request: headstart.ModelRequest) -> Any:
        numbers.append(request.number)
        return await client.messages.create(**request.body(model="claude-sonnet-4-6", max_tokens=1024), stream=True)

    agent = headstart.Agent(engine, model, format="anthropic", max_turns=10)
    session = await engine.create_session()
    async with agent.run(session, "Calculate (10 + 4) * 3 / 2 - 1 step by step.") as run:
        events = [event async for event in run]

    assert events[0].type == "agent_start" and events[-1].type == "agent_end"
    assert events[-1].stop.reason == "completed"
    bodies = server.request_bodies()
    assert numbers == [0, 1, 2, 3] and len(bodies) == 4
    assert [tool["name"] for tool in bodies[0]["tools"]] == list(ARITHMETIC)
    [prompt] = bodies[0]["messages"]
    assert prompt["role"] == "user" and "Calculate (10 + 4)" in json.dumps(prompt["content"])
    # The second request carries the first response's calls and their results, from the transcript.
    second = json.dumps(bodies[1]["messages"])
    assert '"tool_result"' in second and '"tool_use"' in second
    stored = runs(db)
    assert stored and all(row["outcome"] == "finished" for row in stored)


async def test_an_openai_agent_stops_at_max_turns_with_its_results_stored(db: str) -> None:
    server = replay_server("openai_chat__streaming_gpt41_parallel_model.yaml")
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0)

    engine = headstart.Engine(db, tools=matrix_tools())

    async def model(request: headstart.ModelRequest) -> Any:
        return await client.chat.completions.create(**request.body(model="gpt-4.1-mini"), stream=True)

    agent = headstart.Agent(engine, model, format="openai-chat", max_turns=1)
    session = await engine.create_session()
    async with agent.run(session, "Call alpha with value red and beta with value blue.") as run:
        events = [event async for event in run]
    assert events[-1].stop.reason == "max_turns"
    assert [result.content for result in run.results] == ["alpha got red", "beta got blue"]
    [body] = server.request_bodies()
    assert body["messages"] == [{"role": "user", "content": "Call alpha with value red and beta with value blue."}]
    assert "stream" in body and body["stream"] is True


async def test_a_model_that_raises_ends_the_run_with_an_error(db: str) -> None:
    async def model(request: headstart.ModelRequest) -> Any:
        raise RuntimeError("no key")

    engine = headstart.Engine(db, tools=[])
    agent = headstart.Agent(engine, model, format="openai-chat")
    session = await engine.create_session()
    async with agent.run(session, "hello") as run:
        events = [event async for event in run]
    stop = events[-1].stop
    assert stop.reason == "error" and "RuntimeError: no key" in stop.message

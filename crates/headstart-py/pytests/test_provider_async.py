"""Provider-async tools from Python (issue 30, declaring them): ``@headstart.tool(provider_async=True)`` is early and
declared ``async: true`` in an OpenAI Responses request body only when the request opts in; ``HttpModel`` refuses
the option for another wire format."""

from __future__ import annotations

from typing import Any, AsyncIterator

import pytest

import headstart


async def test_a_provider_async_tool_is_declared_async_only_when_the_request_opts_in(db: str) -> None:
    @headstart.tool(provider_async=True)
    async def lookup(q: str) -> str:
        return q

    @headstart.tool
    def write(q: str) -> str:
        return q

    assert lookup.provider_async and lookup.early
    assert not write.provider_async and not write.early
    engine = headstart.Engine(db, tools=[lookup, write])
    bodies: list[tuple[dict[str, Any], dict[str, Any]]] = []

    async def model(request: headstart.ModelRequest) -> Any:
        bodies.append((request.body("m"), request.body("m", provider_async=True)))

        async def stream() -> AsyncIterator[dict[str, Any]]:
            item = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
            yield {"type": "response.output_item.added", "output_index": 0, "item": item}
            yield {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "hi"}
            yield {"type": "response.completed", "response": {"status": "completed"}}

        return stream()

    agent = headstart.Agent(engine, model, format="openai-responses")
    session = await engine.create_session()
    async with agent.run(session, "hello") as run:
        events = [event async for event in run]
    assert events[-1].stop.reason == "completed"
    [(plain, opted_in)] = bodies
    assert [tool.get("async") for tool in plain["tools"]] == [None, None]
    assert [(tool["name"], tool.get("async")) for tool in opted_in["tools"]] == [("lookup", True), ("write", None)]


def test_http_model_declares_async_only_on_openai_responses() -> None:
    headstart.HttpModel("openai-responses", "gpt-6-astra", api_key_env="", provider_async=True)
    with pytest.raises(headstart.ConfigError, match="provider_async=True needs provider 'openai-responses'"):
        headstart.HttpModel("openai-chat", "gpt-4.1-mini", api_key_env="", provider_async=True)

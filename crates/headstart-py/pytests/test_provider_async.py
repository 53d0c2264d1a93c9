"""Provider-async tools from Python (issue 30, declaring them): ``@headstart.tool(provider_async=True)`` is early and
declared ``async: true`` in an OpenAI Responses request body only when the request opts in; ``HttpModel`` refuses
the option for another wire format."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

import openai
import pytest

import headstart
from headstart import _native


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


def _event(data: dict[str, Any]) -> str:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"


def _astra_async_call(words: int) -> list[str]:
    """A Responses stream as GPT-6 Astra sends it for an async call: the call item with ``async: true``, then a
    commentary message while the result is pending, then ``response.completed``."""
    return _astra_async_calls("resp_1", [("call_lookup", "lookup")], words)


def _astra_async_calls(response: str, calls: list[tuple[str, str]], words: int) -> list[str]:
    """``_astra_async_call`` with any calls (call id, tool), each asking for ``{"q": "harbor"}``."""
    arguments = json.dumps({"q": "harbor"})
    events = [_event({"type": "response.created", "response": {"id": response, "status": "in_progress",
                                                                "output": []}})]
    for index, (call_id, name) in enumerate(calls):
        item_id = f"fc_{index}"
        call = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "async": True,
                "call_id": call_id, "name": name}
        done = {**call, "status": "completed", "arguments": arguments}
        events += [
            _event({"type": "response.output_item.added", "output_index": index, "item": call}),
            _event({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": index,
                    "delta": arguments}),
            _event({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index,
                    "arguments": arguments}),
            _event({"type": "response.output_item.done", "output_index": index, "item": done}),
        ]
    at = len(calls)
    message = {"id": f"msg_{response}", "type": "message", "role": "assistant", "content": [], "phase": "commentary"}
    events.append(_event({"type": "response.output_item.added", "output_index": at, "item": message}))
    events += [
        _event({"type": "response.output_text.delta", "item_id": f"msg_{response}", "output_index": at,
                "content_index": 0, "delta": f"waiting {word} "})
        for word in range(words)
    ]
    events.append(_event({"type": "response.completed", "response": {"id": response, "status": "completed",
                                                                     "output": []}}))
    return events


async def _run(engine: headstart.Engine, model: Any) -> tuple[str, list[Any]]:
    """Asks ``model`` through a Responses agent until it answers; the session and its events."""
    agent = headstart.Agent(engine, model, format="openai-responses")
    session = await engine.create_session()
    async with agent.run(session, "Look up the harbor label.") as run:
        events = [event async for event in run]
    assert events[-1].stop.reason == "completed", events[-1]
    return session, events


def _answer() -> list[str]:
    message = {"id": "msg_2", "type": "message", "role": "assistant", "content": []}
    return [
        _event({"type": "response.output_item.added", "output_index": 0, "item": message}),
        _event({"type": "response.output_text.delta", "item_id": "msg_2", "output_index": 0, "content_index": 0,
                "delta": "The harbor label is found."}),
        _event({"type": "response.completed", "response": {"id": "resp_2", "status": "completed", "output": []}}),
    ]


async def test_through_the_openai_sdk_an_async_call_starts_early_and_its_output_is_sent_once(db: str) -> None:
    # One event every 50 ms: the model goes on for about a second after the call is sealed.
    server = _native.ReplayServer.scripted([_astra_async_call(20), _answer()], 50.0, True)
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0)

    @headstart.tool(provider_async=True)
    async def lookup(q: str) -> str:
        return f"found {q}"

    engine = headstart.Engine(db, tools=[lookup])

    async def model(request: headstart.ModelRequest) -> Any:
        return await client.responses.create(**request.body("gpt-6-astra", provider_async=True), stream=True)

    session, _ = await _run(engine, model)
    # The checked server answered every request (a 400 would have ended the run): one output, after its call.
    first, second = server.request_bodies()
    assert [(tool["name"], tool.get("async")) for tool in first["tools"]] == [("lookup", True)]
    items = second["input"]
    [call_at] = [at for at, item in enumerate(items) if item.get("type") == "function_call"]
    assert items[call_at]["async"] is True
    outputs = [at for at, item in enumerate(items) if item.get("type") == "function_call_output"]
    assert len(outputs) == 1 and outputs[0] > call_at
    assert items[outputs[0]]["output"] == "found harbor"
    # The call started while the model went on: its headroom is most of the second after its seal.
    [stored] = headstart.inspect(db, session)["sessions"]
    [figures] = stored["figures"]["calls"]
    assert figures["headroom_ms"] >= 600, figures


@pytest.mark.parametrize("through", ["openai_sdk", "http_model"])
async def test_a_slow_result_is_delivered_later_once(db: str, through: str) -> None:
    """The loop (issue 30, part 2), through the real ``openai`` SDK and through ``HttpModel``: the first response ends
    while ``lookup`` runs, the second request goes at once with the quick ``note``'s result, and ``lookup``'s result,
    ready while the second response streamed, reaches the model once, in the third request, after everything said
    before it."""
    # The first response calls lookup and note; the second only comments; the third answers.
    first = _astra_async_calls("resp_1", [("call_lookup", "lookup"), ("call_note", "note")], 20)
    second = _astra_async_calls("resp_3", [], 20)
    server = _native.ReplayServer.scripted([first, second, _answer()], 50.0, True)

    @headstart.tool(provider_async=True)
    async def lookup(q: str) -> str:
        # Ready only once the model was asked again: the first response surely ended without it.
        while len(server.request_bodies()) < 2:
            await asyncio.sleep(0.01)
        return f"found {q}"

    @headstart.tool(provider_async=True)
    async def note(q: str) -> str:
        return f"noted {q}"

    engine = headstart.Engine(db, tools=[lookup, note])
    model: Any
    if through == "http_model":
        model = headstart.HttpModel(
            "openai-responses", "gpt-6-astra", base_url=server.url + "/v1", api_key_env="", provider_async=True
        )
    else:
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0)

        async def sdk_model(request: headstart.ModelRequest) -> Any:
            return await client.responses.create(**request.body("gpt-6-astra", provider_async=True), stream=True)

        model = sdk_model
    _, events = await _run(engine, model)
    ends = [event for event in events if event.type == "turn_end"]
    assert list(ends[0].outcome["pending"]) == ["call_lookup"], ends[0]
    bodies = server.request_bodies()
    assert len(bodies) == 3
    lookup_outputs = [[item for item in body["input"] if item.get("type") == "function_call_output"
                       and item["call_id"] == "call_lookup"] for body in bodies]
    assert [len(outputs) for outputs in lookup_outputs] == [0, 0, 1]
    assert bodies[2]["input"][-1] == lookup_outputs[2][0], bodies[2]["input"]
    assert lookup_outputs[2][0]["output"] == "found harbor"


def test_the_delivery_policy_is_one_of_two(db: str) -> None:
    headstart.Engine(db, async_delivery="as_ready", max_pending_calls=4)
    with pytest.raises(headstart.ConfigError, match="async_delivery must be 'all_pending' or 'as_ready'"):
        headstart.Engine(db, async_delivery="soon")

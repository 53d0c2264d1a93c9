"""Differential: the real SDK's stream, served by the replay server, gives what the Rust-only path gives.

For each recorded provider stream, the SDK (pointed at the replay server by ``base_url``) is wrapped by the engine;
the same recording's deltas from the Rust converter (``convert_recording``) are wrapped by an engine with the same
tools. The deltas the consumer sees, the stored transcript and the tool runs must be equal, whichever way the
stream reaches the engine (``WAYS``): the SDK's stream object as the SDK returned it (its HTTP body is read), the
SDK's events one by one (each back to its wire JSON), or the body's bytes in small pieces (an ``sse-`` format).
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

import headstart
from headstart import _native
from conftest import consume, recording, replay_server, runs, transcript

CASES = [
    ("openai_chat__streaming_gpt41_parallel_model.yaml", "openai-chat", ["alpha", "beta"]),
    ("deepseek_chat__streaming_parallel_calls_keep_the_complete_one.yaml", "openai-chat", ["file_report", "page_oncall"]),
    ("openai_responses__parallel_tool_calls.yaml", "openai-responses", ["lookup_harbor_label", "lookup_orchard_label"]),
    ("openai_responses__incomplete_mid_tool_call.yaml", "openai-responses", ["add"]),
    ("anthropic__multi_turn_streaming_tools.yaml", "anthropic", ["add", "subtract", "multiply", "divide"]),
    ("anthropic__multi_turn_streaming_tools.yaml", "anthropic-manager", ["add", "subtract", "multiply", "divide"]),
    ("gemini__parallel_function_calls.yaml", "gemini", ["lookup_harbor_label", "lookup_orchard_label"]),
    # The openai SDK's helper streams (`chat.completions.stream()`, `responses.stream()`): managers whose streams
    # yield the helper's own events, so only their HTTP body is read.
    ("openai_chat__streaming_gpt41_parallel_model.yaml", "openai-chat-manager", ["alpha", "beta"]),
    ("openai_responses__parallel_tool_calls.yaml", "openai-responses-manager", ["lookup_harbor_label", "lookup_orchard_label"]),
]


def echo_tools(names: list[str], log: list[str]) -> list[headstart.Tool]:
    """Early tools of these names that answer with their arguments."""

    def make(name: str) -> headstart.Tool:
        async def body(**arguments: Any) -> str:
            text = json.dumps(arguments, sort_keys=True)
            log.append(f"{name} {text}")
            return f"{name} got {text}"

        return headstart.tool(body, name=name, early=True, parameters={"type": "object"})

    return [make(name) for name in names]


async def sdk_stream(kind: str, url: str, parsed: list[int]) -> Any:
    """What the application's own SDK call returns for a streamed request; ``parsed`` counts the events the SDK
    parses into its objects."""
    messages = [{"role": "user", "content": "go"}]
    if kind in ("openai-chat", "openai-responses"):
        client = counting(openai.AsyncOpenAI(base_url=url + "/v1", api_key="test-key", max_retries=0), parsed)
        if kind == "openai-chat":
            return await client.chat.completions.create(model="m", messages=messages, stream=True)  # type: ignore[arg-type]
        return await client.responses.create(model="m", input="go", stream=True)
    if kind == "openai-chat-manager":
        client = counting(openai.AsyncOpenAI(base_url=url + "/v1", api_key="test-key", max_retries=0), parsed)
        return client.chat.completions.stream(model="m", messages=messages)  # type: ignore[arg-type]
    if kind == "openai-responses-manager":
        client = counting(openai.AsyncOpenAI(base_url=url + "/v1", api_key="test-key", max_retries=0), parsed)
        return client.responses.stream(model="m", input="go")
    if kind == "gemini":
        client_g = genai.Client(api_key="test-key", http_options=genai_types.HttpOptions(base_url=url))
        return await client_g.aio.models.generate_content_stream(model="gemini-2.5-flash", contents="go")
    client_a = counting(anthropic.AsyncAnthropic(base_url=url, api_key="test-key", max_retries=0), parsed)
    if kind == "anthropic":
        return await client_a.messages.create(model="m", max_tokens=64, messages=messages, stream=True)  # type: ignore[arg-type]
    # `messages.stream()`: an async context manager whose stream adds derived events to the wire's.
    return client_a.messages.stream(model="m", max_tokens=64, messages=messages)  # type: ignore[arg-type]


def counting(client: Any, parsed: list[int]) -> Any:
    """``client``, counting in ``parsed`` each stream event its SDK parses into an object."""
    parse = client._process_response_data

    def counted(*args: Any, **kwargs: Any) -> Any:
        parsed.append(1)
        return parse(*args, **kwargs)

    client._process_response_data = counted
    return client


# How the application hands the SDK's stream over. google-genai's stream gives no HTTP body to read: only its
# events go over, each back to its wire JSON.
WAYS = ["body", "events", "sse"]
WAYS_OF = {"gemini": ["events"], "openai-chat-manager": ["body"], "openai-responses-manager": ["body"]}
MATRIX = [(*case, way) for case in CASES for way in WAYS_OF.get(case[1], WAYS)]


async def handed_over(stream: Any, way: str, format: str) -> tuple[Any, str]:
    """The stream as ``way`` hands it to ``engine.wrap``, and the format to name."""
    if way == "body":
        return stream, format
    if way == "events":
        return one_by_one(stream), format
    if hasattr(stream, "__aenter__") and not hasattr(stream, "__aiter__"):
        stream = await stream.__aenter__()  # the manager's stream: its response is the request's
    return pieces(stream.response.aiter_bytes()), "sse-" + format


async def one_by_one(stream: Any) -> AsyncIterator[Any]:
    """The SDK's events, through a generator of the application's (as an instrumentation proxy would hand them)."""
    if hasattr(stream, "__aenter__") and not hasattr(stream, "__aiter__"):
        async with stream as entered:
            async for event in entered:
                yield event
    else:
        async for event in stream:
            yield event


async def pieces(body: AsyncIterator[bytes]) -> AsyncIterator[Any]:
    """The body in 7-character pieces, alternately ``str`` and ``bytes`` (each cut in two at its middle byte, which
    may split a character): events, lines and characters straddle pieces."""
    text = b"".join([chunk async for chunk in body]).decode()
    for n, start in enumerate(range(0, len(text), 7)):
        piece = text[start : start + 7]
        if n % 2 == 0:
            yield piece
        else:
            data = piece.encode()
            yield data[: len(data) // 2]
            yield data[len(data) // 2 :]


def updates(events: list[headstart.Event]) -> list[dict[str, Any]]:
    return [event.to_dict() for event in events if event.type == "message_update"]


def stored(path: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[str, str, str | None]]]:
    """The model's messages in order, the results by call id (they are stored in completion order), the runs."""
    messages = transcript(path)
    said = [message for message in messages if message["role"] != "tool_result"]
    results = sorted((message for message in messages if message["role"] == "tool_result"), key=lambda m: m["tool_call_id"])
    calls = sorted((row["call_id"], row["tool_name"], row["outcome"]) for row in runs(path))
    return said, results, calls


@pytest.mark.parametrize(("name", "kind", "tools", "way"), MATRIX, ids=[f"{case[1]}:{case[0].split('__')[1][:-5]}:{case[3]}" for case in MATRIX])
async def test_the_sdk_stream_equals_the_rust_only_path(tmp_path: Any, name: str, kind: str, tools: list[str], way: str) -> None:
    server = replay_server(name)
    sdk_log: list[str] = []
    sdk_db = str(tmp_path / "sdk.db")
    engine = headstart.Engine(sdk_db, tools=echo_tools(tools, sdk_log))
    session = await engine.create_session()
    parsed: list[int] = []
    stream, format = await handed_over(await sdk_stream(kind, server.url, parsed), way, kind.removesuffix("-manager"))
    sdk_events, sdk_results = await consume(engine, session, stream, format)
    if kind != "gemini":
        # The SDK's own stream is read from its HTTP body: the SDK parses none of its events.
        assert (len(parsed) > 0) == (way == "events")
    assert len(server.request_bodies()) == 1

    deltas = _native.convert_recording(str(recording(name)), format.removeprefix("sse-"))[0]
    rust_log: list[str] = []
    rust_db = str(tmp_path / "rust.db")
    engine = headstart.Engine(rust_db, tools=echo_tools(tools, rust_log))
    session = await engine.create_session()
    rust_events, rust_results = await consume(engine, session, deltas, "headstart")

    assert updates(sdk_events), "the SDK's stream gave no deltas"
    assert updates(sdk_events) == updates(rust_events)
    assert stored(sdk_db) == stored(rust_db)
    assert sorted(sdk_log) == sorted(rust_log)
    assert [result.to_dict() for result in sdk_results] == [result.to_dict() for result in rust_results]
    assert [event.type for event in sdk_events][-1] == "turn_end"


async def test_the_openai_chat_recording_runs_both_calls_early(tmp_path: Any) -> None:
    name, _, tools = CASES[0]
    server = replay_server(name)
    log: list[str] = []
    engine = headstart.Engine(str(tmp_path / "a.db"), tools=echo_tools(tools, log))
    session = await engine.create_session()
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0)
    stream = await client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=[{"role": "user", "content": "Call alpha with value red and beta with value blue."}],
        tools=engine.tool_specs("openai-chat"),  # type: ignore[arg-type]
        stream=True,
    )
    _, results = await consume(engine, session, stream, "openai-chat")
    [request] = server.request_bodies()
    assert [tool["function"]["name"] for tool in request["tools"]] == ["alpha", "beta"]
    assert [result.content for result in results] == ['alpha got {"value": "red"}', 'beta got {"value": "blue"}']


@pytest.mark.parametrize("way", ["body", "events"])
async def test_a_sync_sdk_stream_gives_what_the_async_one_gives(tmp_path: Any, way: str) -> None:
    """The synchronous ``openai.OpenAI`` client's stream is read in a worker thread (it blocks on the network), from
    its HTTP body or event by event, with the same results."""
    name, _, tools = CASES[0]
    server = replay_server(name)
    log: list[str] = []
    engine = headstart.Engine(str(tmp_path / "a.db"), tools=echo_tools(tools, log))
    session = await engine.create_session()
    parsed: list[int] = []
    client = counting(openai.OpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0), parsed)
    stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}], stream=True)
    handed = stream if way == "body" else (event for event in stream)
    _, results = await consume(engine, session, handed, "openai-chat")
    assert (len(parsed) > 0) == (way == "events")
    assert sorted(result.content for result in results) == ['alpha got {"value": "red"}', 'beta got {"value": "blue"}']

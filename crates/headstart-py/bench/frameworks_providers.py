"""What the framework faces cost per chunk against the providers' own model classes: ``ChatOpenAI``
(langchain-openai) and ``OpenAIChatCompletionsModel`` (openai-agents), each reading the same 20,000-chunk Chat
Completions body (``frameworks.py``'s stream, as OpenAI sends it) from an in-process ``httpx2`` transport (the openai SDK's client), plain and
wrapped by ``with_headstart`` (in memory), side by side. No network; no assertion on time (the issue's bound: 1.2x).

    python crates/headstart-py/bench/frameworks_providers.py

Needs langchain-openai and openai-agents beside the package; ``frameworks.py`` is read from this folder.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Optional

import httpx2 as httpx  # the openai SDK's HTTP client (a fork of httpx)
from agents import Agent, OpenAIChatCompletionsModel
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI
from pydantic import SecretStr

import frameworks as f
import headstart.agents
import headstart.langchain

ROUNDS = 5


def chunk(delta: dict[str, Any], finish: Optional[str] = None) -> str:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o-mini"}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"


def sse_body() -> bytes:
    """The stream as OpenAI's Chat Completions SSE: text, the two calls' argument pieces, the finish."""
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": f"w{n} "}) for n in range(f.CHUNKS - len(f.CALLS) * (f.PIECES + 1) - 2)]
    for index, (id, name, arguments) in enumerate(f.CALLS):
        events.append(chunk({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}))
        events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}) for piece in f.pieces(arguments)]
    events += [chunk({}, "tool_calls"), "data: [DONE]\n\n"]
    return "".join(events).encode()


BODY = sse_body()


def client() -> httpx.AsyncClient:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=BODY)

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


def chat_openai() -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", api_key=SecretStr("bench"), streaming=True, max_retries=0, http_async_client=client())


def chat_completions() -> OpenAIChatCompletionsModel:
    return OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=AsyncOpenAI(api_key="bench", http_client=client()))


async def lc_wrapped() -> float:
    model, tools = headstart.langchain.with_headstart(chat_openai(), f.LC_TOOLS, early=["lookup"])
    took = await f.lc_stream(model, tools)
    await f.lc_settled(model, tools)
    return took


async def main() -> None:
    jobs: list[f.Job] = [
        ("ChatOpenAI", "plain", lambda: f.lc_stream(chat_openai(), f.LC_TOOLS)),
        ("ChatOpenAI", "wrapped", lc_wrapped),
        ("OpenAIChatCompletionsModel", "plain", lambda: f.ag_stream(chat_completions(), list(f.AG_TOOLS))),
        ("OpenAIChatCompletionsModel", "wrapped", lambda: f.ag_wrapped(chat_completions(), None)),
    ]
    median = await f.interleaved_medians(ROUNDS, lambda _round: jobs)
    print(f"{f.CHUNKS} chunks a stream ({len(BODY)} bytes of SSE), median of {ROUNDS} interleaved rounds, in memory")
    head = f"{'model':<27} {'plain ms':>9} {'wrapped ms':>11} {'ratio':>7} {'plain us/chunk':>15} {'added us/chunk':>15}"
    print(head + "\n" + "-" * len(head))
    for model in ["ChatOpenAI", "OpenAIChatCompletionsModel"]:
        plain, wrapped = median[(model, "plain")], median[(model, "wrapped")]
        print(
            f"{model:<27} {plain * 1e3:9.1f} {wrapped * 1e3:11.1f} {wrapped / plain:6.2f}x"
            f" {plain / f.CHUNKS * 1e6:15.2f} {(wrapped - plain) / f.CHUNKS * 1e6:15.2f}"
        )
    print(f"python {sys.version.split()[0]}")


if __name__ == "__main__":
    asyncio.run(main())

"""An agent on OpenAI's Chat Completions with headstart: the early tool starts while the model still streams.

    pip install ./crates/headstart-py openai
    OPENAI_API_KEY=... python examples/python/openai_agent.py [--base-url URL] [--model gpt-4.1-mini]

`--base-url` points the SDK at any Chat Completions server (a gateway, a local model).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from openai import AsyncOpenAI
from refund_tools import PROMPT, TOOLS, show

import headstart


async def main(base_url: str | None, model_name: str, db: str) -> None:
    client = AsyncOpenAI(base_url=base_url)
    engine = headstart.Engine(db, tools=TOOLS)
    session = await engine.create_session()

    async def model(request: headstart.ModelRequest) -> Any:
        return await client.chat.completions.create(**request.body(model=model_name), stream=True)

    agent = headstart.Agent(engine, model, format="openai-chat", max_turns=6)
    async with agent.run(session, PROMPT) as run:
        await show(run)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default="gpt-4.1-mini")
    parser.add_argument("--db", default="openai-agent.db")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.base_url, arguments.model, arguments.db))

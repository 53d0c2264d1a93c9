"""An agent on Anthropic's Messages API with headstart: the early tool starts while the model still streams.

    pip install ./crates/headstart-py anthropic
    ANTHROPIC_API_KEY=... python examples/python/anthropic_agent.py [--base-url URL] [--model claude-sonnet-4-6]
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from anthropic import AsyncAnthropic
from refund_tools import PROMPT, TOOLS, show

import headstart


async def main(base_url: str | None, model_name: str, db: str) -> None:
    client = AsyncAnthropic(base_url=base_url)
    engine = headstart.Engine(db, tools=TOOLS)
    session = await engine.create_session()

    async def model(request: headstart.ModelRequest) -> Any:
        return await client.messages.create(**request.body(model=model_name, max_tokens=1024), stream=True)

    agent = headstart.Agent(engine, model, format="anthropic", max_turns=6)
    async with agent.run(session, PROMPT) as run:
        await show(run)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default="claude-sonnet-4-6")
    parser.add_argument("--db", default="anthropic-agent.db")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.base_url, arguments.model, arguments.db))

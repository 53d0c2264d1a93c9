"""An OpenAI Agents SDK agent with headstart: `search_docs` starts while the model still streams the rest of its
response; `save_note` runs when the runner runs it, as without headstart.

    pip install "./crates/headstart-py[agents]"
    OPENAI_API_KEY=... python examples/python/agents_sdk_agent.py [--base-url URL] [--model gpt-4.1-mini]

`--base-url` points the SDK's Chat Completions model at any server (a gateway, a local model).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

import headstart
from headstart.agents import headstart_session_id, with_headstart

STARTED = time.perf_counter()


def stamp(what: str) -> None:
    print(f"[{what} +{(time.perf_counter() - STARTED) * 1000:.0f} ms]", flush=True)


@function_tool
async def search_docs(query: str) -> str:
    """Searches the documentation (read-only: safe to start early)."""
    stamp(f"start search_docs({query})")
    await asyncio.sleep(0.3)
    return f"3 pages about {query}"


@function_tool
def save_note(title: str, text: str) -> str:
    """Saves a note (a side effect: it runs when the runner runs it)."""
    stamp(f"start save_note({title})")
    return f"saved {title} ({len(text)} characters)"


async def main(base_url: str | None, model_name: str, db: str) -> None:
    set_tracing_disabled(base_url is not None)  # a local server has no tracing backend
    model = OpenAIChatCompletionsModel(model=model_name, openai_client=AsyncOpenAI(base_url=base_url))
    agent = Agent(
        name="notes",
        instructions="Search the docs, then save a note of what you found.",
        model=model,
        tools=[search_docs, save_note],
    )
    agent = with_headstart(agent, store=db, early=["search_docs"])
    result = await Runner.run(agent, "How do I cancel a run?")
    stamp("done")
    print(result.final_output)
    session = headstart_session_id(agent)
    print(f"session {session}: {headstart.savings(db, session)['calls']} calls stored in {db}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default="gpt-4.1-mini")
    parser.add_argument("--db", default="agents-sdk-agent.db")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.base_url, arguments.model, arguments.db))

"""An OpenAI Agents SDK agent with headstart: `search_docs` starts while the model still streams the rest of its
response; `save_note` runs when the runner runs it, as without headstart.

    pip install "./crates/headstart-py[agents]"
    python examples/python/agents_sdk_agent.py [--db agents-sdk-agent.db]
    OPENAI_API_KEY=... python examples/python/agents_sdk_agent.py [--base-url URL] [--model gpt-4.1-mini]

With no `--base-url` and no OPENAI_API_KEY it runs on a simulated model (simulated_openai.py, a local server);
`--base-url` points the SDK's Chat Completions model at any server (a gateway, a local model). It ends by printing
the time early execution saved and where the transcript is.
"""

from __future__ import annotations

import argparse
import asyncio

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI
from run_report import report, stamp
from simulated_openai import endpoint

from headstart.agents import headstart_session_id, with_headstart


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


async def main(base_url: str | None, api_key: str | None, model_name: str, db: str) -> None:
    set_tracing_disabled(base_url is not None)  # a local server has no tracing backend
    client = AsyncOpenAI(base_url=base_url, api_key=api_key)
    model = OpenAIChatCompletionsModel(model=model_name, openai_client=client)
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
    report(db, headstart_session_id(agent))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default="gpt-4.1-mini")
    parser.add_argument("--db", default="agents-sdk-agent.db")
    arguments = parser.parse_args()
    with endpoint(arguments.base_url) as (base_url, api_key):
        asyncio.run(main(base_url, api_key, arguments.model, arguments.db))

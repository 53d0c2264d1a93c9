"""A LangChain agent (`create_agent`, LangGraph's loop) with headstart: `search_docs` starts while the model still
streams the rest of its response; `save_note` runs when the graph's ToolNode runs it, as without headstart.

    pip install "./crates/headstart-py[langchain]" langchain langchain-openai
    OPENAI_API_KEY=... python examples/python/langchain_agent.py [--base-url URL] [--model gpt-4.1-mini]

`--base-url` points langchain-openai at any Chat Completions server (a gateway, a local model).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import headstart
from headstart.langchain import with_headstart

STARTED = time.perf_counter()


def stamp(what: str) -> None:
    print(f"[{what} +{(time.perf_counter() - STARTED) * 1000:.0f} ms]", flush=True)


@tool
async def search_docs(query: str) -> str:
    """Searches the documentation (read-only: safe to start early)."""
    stamp(f"start search_docs({query})")
    await asyncio.sleep(0.3)
    return f"3 pages about {query}"


@tool
def save_note(title: str, text: str) -> str:
    """Saves a note (a side effect: it runs when the graph runs it)."""
    stamp(f"start save_note({title})")
    return f"saved {title} ({len(text)} characters)"


async def main(base_url: str | None, model_name: str, db: str) -> None:
    model, tools = with_headstart(
        ChatOpenAI(model=model_name, base_url=base_url),
        [search_docs, save_note],
        store=db,
        early=["search_docs"],
    )
    agent = create_agent(model, tools, system_prompt="Search the docs, then save a note of what you found.")
    result = await agent.ainvoke({"messages": [{"role": "user", "content": "How do I cancel a run?"}]})
    stamp("done")
    print(result["messages"][-1].content)
    saved = headstart.savings(db, model.session_id)
    print(f"session {model.session_id}: {saved['calls']} calls stored in {db}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default="gpt-4.1-mini")
    parser.add_argument("--db", default="langchain-agent.db")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.base_url, arguments.model, arguments.db))

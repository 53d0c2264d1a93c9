"""A LangChain agent (`create_agent`, LangGraph's loop) with headstart: `search_docs` starts while the model still
streams the rest of its response; `save_note` runs when the graph's ToolNode runs it, as without headstart.

    pip install "./crates/headstart-py[langchain]" langchain langchain-openai
    python examples/python/langchain_agent.py [--db langchain-agent.db]
    OPENAI_API_KEY=... python examples/python/langchain_agent.py [--base-url URL] [--model gpt-4.1-mini]

With no `--base-url` and no OPENAI_API_KEY it runs on a simulated model (simulated_openai.py, a local server);
`--base-url` points langchain-openai at any Chat Completions server (a gateway, a local model). It ends by printing
the time early execution saved and where the transcript is.
"""

from __future__ import annotations

import argparse
import asyncio

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from run_report import report, stamp
from simulated_openai import endpoint

from headstart.langchain import with_headstart


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


async def main(base_url: str | None, api_key: str | None, model_name: str, db: str) -> None:
    model, tools = with_headstart(
        ChatOpenAI(model=model_name, base_url=base_url, api_key=api_key),
        [search_docs, save_note],
        store=db,
        early=["search_docs"],
    )
    agent = create_agent(model, tools, system_prompt="Search the docs, then save a note of what you found.")
    result = await agent.ainvoke({"messages": [{"role": "user", "content": "How do I cancel a run?"}]})
    stamp("done")
    print(result["messages"][-1].content)
    report(db, model.session_id)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default="gpt-4.1-mini")
    parser.add_argument("--db", default="langchain-agent.db")
    arguments = parser.parse_args()
    with endpoint(arguments.base_url) as (base_url, api_key):
        asyncio.run(main(base_url, api_key, arguments.model, arguments.db))

"""The tools and the event printout that openai_agent.py and anthropic_agent.py share."""

from __future__ import annotations

import asyncio

import headstart

PROMPT = "Why do refunds fail? Search the docs, then file a ticket in PAY."

DOCS = {
    "refunds": "Refunds fail when the card issuer rejects the reversal; retry after 24 h or refund to store credit.",
    "tickets": "Tickets need a project key (PAY, WEB) and a one-line title.",
}


@headstart.tool(early=True, idempotent=True)
async def search_docs(query: str) -> str:
    """Search the product docs."""
    await asyncio.sleep(0.5)  # a real search takes a while: it overlaps with the model's streaming
    return next((text for key, text in DOCS.items() if key in query.lower()), "nothing found")


@headstart.tool()
async def create_ticket(project: str, title: str) -> dict[str, str]:
    """File a ticket in the tracker."""
    return {"ticket": f"{project}-101", "title": title}


TOOLS = [search_docs, create_ticket]


async def show(run: headstart.Run) -> None:
    """Prints the model's text as it streams, and each call's start and end."""
    async for event in run:
        if event.type == "message_update" and event.delta.type == "text_delta":
            print(event.delta.delta, end="", flush=True)
        elif event.type == "tool_execution_start":
            print(f"\n[start {event.call.name} {event.call.arguments}]")
        elif event.type == "tool_execution_end":
            print(f"[end {event.tool_call_id}: {event.outcome}]")
        elif event.type == "agent_end":
            print(f"\n(stopped: {event.stop.reason})")

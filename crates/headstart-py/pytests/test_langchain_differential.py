"""The differential test of ``headstart.langchain``: generated model responses, each answered to the same
``create_agent`` graph twice through langchain-openai, plain and with headstart. The app must see the same
messages, the same tool bodies must run with the same arguments (none twice, none the plain graph would not run),
and the store must hold each call with the result the graph showed.

The responses vary what the framework's rules turn on: early and other tools, a tool the agent does not have,
arguments that are whole, of a wrong type, missing, cut by the length limit or split anywhere, a tool error its
``handle_tool_error`` turns into a message, text before the calls."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import headstart
from chat_replies import Call, Reply, Runs, serve
from langchain_agents import agent, shown

SCRIPTS = 120
TOOLS = ["read_file", "lookup", "write_file", "delete_all"]
"""The tools the model calls: two early ones, a batch one and one the agent does not have."""


def arguments(rng: random.Random, tool: str) -> str:
    """A call's arguments' text: mostly whole and valid, sometimes of a wrong type or missing one."""
    shapes: dict[str, dict[str, Any]] = {
        "read_file": {"path": f"f{rng.randint(0, 9)}.txt"},
        "lookup": {"key": rng.choice(["a", "b"]), "n": rng.choice([1, 2, 13])},
        "write_file": {"path": "out.txt", "text": " ".join(["word"] * rng.randint(1, 8))},
        "delete_all": {"really": True},
    }
    valid = shapes[tool]
    kind = rng.random()
    if kind < 0.15 and tool == "lookup":
        valid["n"] = "many"
    elif kind < 0.25 and valid:
        valid.pop(next(iter(valid)))
    return json.dumps(valid)


def pieces(rng: random.Random, text: str) -> list[str]:
    """``text`` split at random places."""
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 5))))
    return [text[start:end] for start, end in zip([0] + cuts, cuts + [len(text)])]


def script(seed: int) -> list[Reply]:
    """The responses of one generated script: calls (maybe none), then the answer."""
    rng = random.Random(seed)
    calls = []
    for number in range(rng.choice([0, 1, 1, 2, 2, 3])):
        tool = rng.choice(TOOLS)
        calls.append(Call(f"call_{seed}_{number}", tool, pieces(rng, arguments(rng, tool))))
    finish = "tool_calls" if calls else "stop"
    if calls and rng.random() < 0.15:
        # The length limit cuts the last call's arguments.
        last = calls[-1]
        whole = "".join(last.pieces)
        last.pieces = pieces(rng, whole[: rng.randint(1, len(whole) - 1)])
        finish = "length"
    first = Reply(text=rng.choice([[], ["Let me ", "look."]]), calls=calls, finish=finish)
    return [first, Reply(text=["Done."])] if calls else [first]


def stored_results(db: str, session: str) -> dict[str, dict[str, Any]]:
    """The store's tool results of ``session``, by call id."""
    found = headstart.inspect(db, session)["sessions"][0]["messages"]
    return {entry["message"]["tool_call_id"]: entry["message"] for entry in found if entry["message"].get("role") == "tool_result"}


def test_the_graph_shows_and_runs_what_the_plain_graph_does(tmp_path: Path) -> None:
    async def once(seed: int, wrapped: bool) -> tuple[list[Any], Runs, Any]:
        runs = Runs()
        db = str(tmp_path / f"{seed}.db")
        graph, model = agent(serve(script(seed)), runs, headstart=wrapped, store=db if wrapped else None)
        try:
            messages = (await graph.ainvoke({"messages": [{"role": "user", "content": "go"}]}))["messages"]
        except Exception as error:  # noqa: BLE001 - both graphs must fail alike
            return [("raised", type(error).__name__, str(error))], runs, None
        return messages, runs, (db, model.session_id) if wrapped else None

    early_runs = 0
    for seed in range(SCRIPTS):
        plain, plain_runs, _ = asyncio.run(once(seed, False))
        messages, runs, stored = asyncio.run(once(seed, True))
        context = f"script {seed}: {script(seed)}"
        assert shown(messages) == shown(plain) if stored else messages == plain, context
        assert sorted(runs.started, key=repr) == sorted(plain_runs.started, key=repr), context
        if stored is None:
            continue
        results = stored_results(*stored)
        for message in messages:
            for call in getattr(message, "tool_calls", []):
                assert call["id"] in results, f"{context}: call {call['id']} has no stored result"
            if message.type == "tool" and message.name in ("read_file", "lookup", "write_file"):
                result = results[message.tool_call_id]
                text = "".join(block.get("text", "") for block in result["content"])
                assert bool(result.get("is_error")) == (message.status == "error"), context
                if message.status != "error" or not text.startswith("ValidationError"):
                    # A call whose arguments the tool refused keeps the tool's own error; the ToolNode words it
                    # for the model (the README's list of differences).
                    assert text == message.content, context
        early_runs += sum(1 for name, _ in runs.started if name in ("read_file", "lookup"))
    print(f"{SCRIPTS} scripts alike; {early_runs} runs of early tools")
    assert early_runs >= SCRIPTS // 2, "the scripts must exercise early runs"

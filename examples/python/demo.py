"""headstart's demo in Python: the simulated agent of `headstart demo` (no network, no key), run by the Python
package, with the time early execution saved.

    pip install ./crates/headstart-py
    python examples/python/demo.py [--db headstart-py-demo.db]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import headstart
from headstart import demo


def shown(arguments) -> str:
    """A call's first argument, short, as `headstart demo` shows it: `lookup_crate(tokio)`."""
    first = next(iter(arguments.values()), "") if arguments else ""
    text = str(first)
    return text if len(text) <= 40 else text[:37] + "..."


async def main(db: str) -> None:
    out_dir = Path(tempfile.gettempdir()) / "headstart-demo"
    engine = headstart.Engine(db, tools=demo.tools(out_dir))
    agent = headstart.Agent(engine, demo.model, format="headstart", max_turns=8)
    session = await engine.create_session()
    print(f"headstart demo (Python): {demo.PROMPT}")
    print("(simulated model at 40 tokens/s; lookup_crate is early and runs while the model streams; write_file is sync)\n")
    began = time.monotonic()
    stop = "?"
    async with agent.run(session, demo.PROMPT) as run:
        async for event in run:
            at = time.monotonic() - began
            if event.type == "turn_start":
                print(f"{at:6.2f}s  request {event.request}: the model streams")
            elif event.type == "tool_execution_start":
                print(f"{at:6.2f}s    start {event.call.name}({shown(event.call.arguments)})")
            elif event.type == "tool_execution_end":
                print(f"{at:6.2f}s    end   {event.tool_call_id} ({event.outcome})")
            elif event.type == "turn_end":
                print(f"{at:6.2f}s  request {event.request} settled")
            elif event.type == "agent_end":
                stop = event.stop.reason
    saved = headstart.savings(db, session)
    seconds = lambda ms: ms / 1000  # noqa: E731
    print()
    print(
        f"Finished in {seconds(saved['actual_end_ms']):.2f} s: {len(saved['requests'])} model requests, "
        f"{saved['calls']} tool calls ({stop})."
    )
    print(
        f"End-of-stream batching would have taken {seconds(saved['batching_end_ms']):.2f} s with the same measured "
        f"durations: early execution saved {seconds(saved['saved_ms']):.2f} s ({saved['saved_percent']:.0f}%)."
    )
    print(f"Transcript: {db} (session {session}); summary.md in {out_dir}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="headstart-py-demo.db", help="the SQLite transcript file")
    asyncio.run(main(parser.parse_args().db))

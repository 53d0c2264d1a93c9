"""The demo from Python: the same simulated agent as `headstart demo`, and the same calls started early.

The time each saves is read from the wall clock, so the two are compared coarsely (within a quarter): what this
guards is that Python's loop starts the same calls while the model streams (a loop that batched them would save
nothing), not the last tens of milliseconds, which a busy machine moves (a clean-clone CI run once saw 1,102 ms
against 1,166 ms). `bench/python_overhead.py` measures the difference side by side."""

from __future__ import annotations

from pathlib import Path

import headstart
from headstart import _native, demo


async def test_the_python_demo_saves_what_the_rust_demo_saves(tmp_path: Path) -> None:
    db = str(tmp_path / "py.db")
    engine = headstart.Engine(db, tools=demo.tools(tmp_path / "out-py"))
    agent = headstart.Agent(engine, demo.model, format="headstart", max_turns=8)
    session = await engine.create_session()
    async with agent.run(session, demo.PROMPT) as run:
        events = [event async for event in run]
    assert events[-1].stop.reason == "completed"
    assert (tmp_path / "out-py" / "summary.md").is_file()
    python = headstart.savings(db, session)

    rust = _native.rust_demo(str(tmp_path / "rust.db"), str(tmp_path / "out-rust"))
    print(f"\ntime saved: Python {python['saved_ms']:.0f} ms, Rust {rust['saved_ms']:.0f} ms")
    assert (len(python["requests"]), python["calls"]) == (len(rust["requests"]), rust["calls"]) == (3, 5)
    assert rust["saved_ms"] > 0, rust
    assert abs(python["saved_ms"] - rust["saved_ms"]) <= 0.25 * rust["saved_ms"], (python, rust)

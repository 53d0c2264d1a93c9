"""The resume suite on the Python package (docs/reliability.md): a process running a response through
``Engine.wrap`` dies (``os._exit``: no ``finally``, no destructor, as under SIGKILL) at a named instant of a call's
life; other processes recover the crashed store with ``Engine.recover``. The response calls an early idempotent
``fetch`` and an early non-idempotent ``write``; every body appends a line to a file outside every process, so effects
are counted by a target no crash can touch.

The instants:

- ``before-seal``: the stream dies before ``fetch``'s ``toolcall_end``, so nothing is admitted;
- ``after-seal``: ``before_tool_call`` of ``fetch``: its fragment is durable, its body has not begun;
- ``in-body:fetch`` and ``in-body:write``: inside the body, after its effect;
- ``after-body``: ``after_tool_call`` of ``fetch``: its body ended, its result is not written.

Checked at each: (4) the crashed store loads, and every body that began has a stored run whose owning fragment is
stored; then the store is copied five times. One process recovers each of the first two copies, and 2, 4 and 8
processes recover the others at once. (1) each recovered log continues the crashed one, message for message; (2) a
non-idempotent body never runs again, an idempotent one at most once per recovered copy, and a call whose result was
stored never runs again; (5) with k recoverers, still at most once; (3, 6) all five copies end with the same calls,
outcomes and results, timestamps aside.

The ``request`` instant of the Rust suite (while the next request is built) has no counterpart: ``Engine.wrap`` wraps
one response; the loop around it is the caller's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import headstart

#: The two tools, for the process that crashes (``point`` names where) and the ones that recover (``point`` is
#: ``recover``): each body records its effect in ``effects`` before anything else.
TOOLS = textwrap.dedent(
    """
    import asyncio, json, os, sys
    import headstart

    db, effects, point = sys.argv[1], sys.argv[2], sys.argv[3]

    def effect(name):
        with open(effects, "a") as out:
            out.write(f"{name} {point}\\n")

    @headstart.tool(early=True, idempotent=True)
    async def fetch(url: str) -> str:
        effect("c_fetch")
        if point == "in-body:fetch":
            os._exit(9)
        return f"fetched {url}"

    @headstart.tool(early=True)
    async def write(path: str) -> str:
        effect("c_write")
        if point == "in-body:write":
            os._exit(9)
        return f"wrote {path}"
    """
)

CRASHING = TOOLS + textwrap.dedent(
    """
    def before(call, arguments):
        if point == "after-seal" and call["id"] == "c_fetch":
            os._exit(9)

    def after(call, result):
        if point == "after-body" and call["id"] == "c_fetch":
            os._exit(9)

    def deltas():
        yield {"type": "start"}
        yield {"type": "toolcall_start", "index": 0, "id": "c_fetch", "name": "fetch"}
        yield {"type": "toolcall_delta", "index": 0, "delta": '{"url": "https://example.com"}'}
        if point == "before-seal":
            os._exit(9)
        yield {"type": "toolcall_end", "index": 0}
        yield {"type": "toolcall_start", "index": 1, "id": "c_write", "name": "write"}
        yield {"type": "toolcall_delta", "index": 1, "delta": '{"path": "notes.txt"}'}
        yield {"type": "toolcall_end", "index": 1}
        yield {"type": "text_start", "index": 2}
        yield {"type": "text_delta", "index": 2, "delta": "both are under way"}
        yield {"type": "text_end", "index": 2}
        yield {"type": "done", "stop_reason": "tool_use"}

    async def main():
        engine = headstart.Engine(db, tools=[fetch, write], before_tool_call=before, after_tool_call=after)
        session = await engine.create_session()
        print(session, flush=True)
        async def stream():
            for delta in deltas():
                await asyncio.sleep(0.01)
                if point == "in-body:write" and delta.get("id") == "c_write":
                    # fetch's result is written well before write starts: the crash leaves write alone unfinished.
                    await asyncio.sleep(0.3)
                yield delta
        async with engine.wrap(session, stream(), format="headstart") as events:
            async for _ in events:
                pass
        print("ended", flush=True)

    asyncio.run(main())
    """
)

RECOVERING = TOOLS + textwrap.dedent(
    """
    session = sys.argv[4]

    async def main():
        engine = headstart.Engine(db, tools=[fetch, write])
        try:
            recovered = await engine.recover(session, policy="rerun_idempotent")
        except headstart.SessionBusy as error:
            print(json.dumps({"refused": str(error)}))
            return
        print(json.dumps({"recovered": recovered}))

    asyncio.run(main())
    """
)

#: What each instant leaves: the calls without a result, and whether each one's body had begun.
POINTS: dict[str, dict[str, bool]] = {
    "before-seal": {},
    "after-seal": {"c_fetch": False},
    "in-body:fetch": {"c_fetch": True},
    "in-body:write": {"c_write": True},
    "after-body": {"c_fetch": True},
}

#: Recoverers started together on each copy.
RECOVERERS = [1, 1, 2, 4, 8]


def effects(path: Path) -> dict[str, int]:
    """Bodies begun, by call id."""
    counted: dict[str, int] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            call = line.split()[0]
            counted[call] = counted.get(call, 0) + 1
    return counted


def stored(db: Path, session: str) -> dict[str, Any]:
    [found] = headstart.inspect(str(db), session)["sessions"]
    return found


def unfinished(session: dict[str, Any]) -> dict[str, str]:
    """Calls admitted without a result, with their state."""
    answered = {m["message"]["tool_call_id"] for m in session["messages"] if m["message"]["role"] == "tool_result"}
    return {run["call_id"]: run["state"] for run in session["tool_runs"] if run["call_id"] not in answered}


def decisions(session: dict[str, Any]) -> list[Any]:
    """What a recovery decided, timestamps aside: each message's role and content, each run's call, state and
    outcome."""
    messages = []
    for entry in session["messages"]:
        message = {key: value for key, value in entry["message"].items() if not key.endswith(("_us", "_at"))}
        messages.append(json.dumps(message, sort_keys=True))
    runs = sorted((run["call_id"], run["state"], run.get("outcome")) for run in session["tool_runs"])
    return [messages, runs]


def check_crashed(label: str, point: str, db: Path, session: str, begun: dict[str, int]) -> dict[str, Any]:
    """Property 4, and that the instant is the one named."""
    at_crash = stored(db, session)
    left = unfinished(at_crash)
    assert sorted(left) == sorted(POINTS[point]), f"{label}: unfinished at the crash: {left}"
    for call, body_begun in POINTS[point].items():
        assert (call in begun) is body_begun, f"{label}: whether {call}'s body had begun: {begun}"
    fragments = {entry["seq"]: entry["message"] for entry in at_crash["messages"]}
    for call in begun:
        [run] = [run for run in at_crash["tool_runs"] if run["call_id"] == call] or [None]
        assert run is not None, f"{label}: property 4, {call} ran without a stored run"
        owner = fragments.get(run["fragment_seq"])
        assert owner is not None and owner["role"] == "assistant", f"{label}: property 4, {call}'s fragment"
        assert call in json.dumps(owner), f"{label}: property 4, {call} is not in its owning fragment"
    return at_crash


def recover_together(db: Path, effects_file: Path, session: str, count: int) -> list[dict[str, Any]]:
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", RECOVERING, str(db), str(effects_file), "recover", session],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    answers = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, out + err
            answers.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    return answers


@pytest.mark.parametrize("point", list(POINTS))
def test_every_property_holds_at_every_crash_point(tmp_path: Path, point: str) -> None:
    label = f"python, crash at {point}"
    db = tmp_path / "crashed.db"
    effects_at_crash = tmp_path / "effects"
    died = subprocess.run(
        [sys.executable, "-c", CRASHING, str(db), str(effects_at_crash), point],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert died.returncode == 9, f"{label}: the process did not die there: {died.stdout}{died.stderr}"
    session = died.stdout.split()[0]
    begun = effects(effects_at_crash)
    at_crash = check_crashed(label, point, db, session, begun)

    ends = []
    for copy, count in enumerate(RECOVERERS):
        folder = tmp_path / f"copy{copy}"
        folder.mkdir()
        # The crashed store as it lies: the database and its write-ahead log (what the crash left there).
        for suffix in ("", "-wal"):
            if Path(f"{db}{suffix}").exists():
                shutil.copy(f"{db}{suffix}", folder / f"crashed.db{suffix}")
        shutil.copy(effects_at_crash, folder / "effects") if effects_at_crash.exists() else None
        answers = recover_together(folder / "crashed.db", folder / "effects", session, count)
        copy_label = f"{label}, copy {copy} ({count} recoverer{'s' if count > 1 else ''})"
        recovered = [answer for answer in answers if "recovered" in answer]
        for answer in answers:
            if "refused" in answer:
                assert session in answer["refused"], f"{copy_label}: a refusal names the session's holder: {answer}"
        # 5: one recoverer settles the crash; the others find nothing left, or are refused while it works.
        assert sum(1 for answer in recovered if answer["recovered"]) <= 1, f"{copy_label}: {answers}"
        resumed = stored(folder / "crashed.db", session)
        assert not unfinished(resumed), f"{copy_label}: calls still without a result: {unfinished(resumed)}"
        # 1. The crashed log, message for message, then only what recovery appended.
        assert resumed["messages"][: len(at_crash["messages"])] == at_crash["messages"], (
            f"{copy_label}: property 1, the crashed log is not a prefix of the recovered one"
        )
        # 2 and 5. Effects: counted outside every process.
        counted = effects(folder / "effects")
        assert counted.get("c_write", 0) <= 1, f"{copy_label}: property 2, write ran {counted['c_write']} times"
        reruns = counted.get("c_fetch", 0) - begun.get("c_fetch", 0)
        allowed = 1 if "c_fetch" in POINTS[point] else 0
        assert reruns <= allowed, f"{copy_label}: property 2/5, fetch ran again {reruns} times ({allowed} allowed)"
        results = {m["message"]["tool_call_id"]: m["message"] for m in resumed["messages"] if m["message"]["role"] == "tool_result"}
        if "c_write" in POINTS[point]:
            assert results["c_write"]["is_error"], f"{copy_label}: the interrupted write: {results['c_write']}"
        ends.append(decisions(resumed))
    # 3 and 6. Every copy, recovered apart, decided the same.
    assert all(end == ends[0] for end in ends), f"{label}: properties 3 and 6, the copies differ: {ends}"

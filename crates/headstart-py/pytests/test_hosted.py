"""The framework faces' shared core (``headstart._hosted``): the object-end scanner, the delta feed, and a chat
driven as a framework would drive it, with no framework: a call sealed early runs once, and the framework's own run
of it gets the early outcome."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import headstart
from headstart._hosted.answer import Answer
from headstart._hosted.call import Call
from headstart._hosted.chat import Chat, ToolPolicy
from headstart._hosted.feed import DeltaFeed, SealedCall
from headstart._hosted.object_end import ObjectEnd
from headstart._hosted.response import Outcome, Response


@pytest.mark.parametrize(
    "pieces, whole",
    [
        (['{"a": 1}'], True),
        (['{"a"', ': "}"', "}"], True),
        (['{"a": "\\""', "}"], True),
        (['{"a": [1, {"b": 2}]', "}  "], True),
        (['{"a": 1', ""], False),
        (['{"a": 1} x'], False),
        (["[1, 2]"], False),
        (["  ", '{"n": {}}'], True),
    ],
)
def test_object_end_reads_where_the_arguments_are_whole(pieces: list[str], whole: bool) -> None:
    end = ObjectEnd()
    for piece in pieces:
        end.feed(piece)
    assert end.whole is whole


class Recorder:
    """A native feed that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.ended = False

    def push_lines(self, lines: str) -> None:
        assert not self.ended
        self.events.extend(json.loads(line) for line in lines.split("\n"))

    def end(self) -> None:
        self.ended = True


def test_the_feed_seals_a_call_when_its_arguments_are_whole_and_announces_it_once_named() -> None:
    native = Recorder()
    sealed: list[SealedCall] = []
    feed = DeltaFeed(native, on_seal=sealed.append)
    feed.text("Let me ")
    feed.text("look.")
    feed.call_piece(0, arguments='{"path"')  # no id or name yet: held back
    feed.call_piece(0, id="c1", name="read_file")
    feed.call_piece(0, arguments=': "a"}')
    assert [call.id for call in sealed] == ["c1"]
    assert sealed[0].arguments == {"path": "a"}
    feed.call_piece(1, id="c2", name="write_file", arguments='{"path": "b", "text": "x')
    assert len(sealed) == 1
    calls = feed.finish("stop")
    assert [call.id for call in calls] == ["c1", "c2"]
    assert calls[1].arguments is None, "cut arguments are not an object"
    kinds = [event["type"] for event in native.events]
    assert kinds == [
        "start", "text_start", "text_delta", "text_delta", "text_end",
        "toolcall_start", "toolcall_delta", "toolcall_delta", "toolcall_end",
        "toolcall_start", "toolcall_delta", "toolcall_end", "done",
    ]  # fmt: skip
    assert native.events[-1]["stop_reason"] == "tool_use", "a stop with calls admits them"
    assert native.ended


class Face:
    """A framework of the test's own: a tool is a coroutine function of its arguments."""

    def __init__(self, tools: dict[str, Any]) -> None:
        self.tools = tools
        self.runs: list[str] = []

    async def run_early(self, call: Call, response: Response) -> Outcome:
        if call.arguments is None:
            return Outcome(invalid=True)
        return await self.run(call.name or "", call.arguments)

    async def run_recovered(self, call_id: str, name: str, arguments: dict[str, Any]) -> Outcome:
        return await self.run(name, arguments)

    async def run(self, name: str, arguments: dict[str, Any]) -> Outcome:
        self.runs.append(name)
        try:
            return Outcome(value=await self.tools[name](**arguments))
        except Exception as error:  # noqa: BLE001
            return Outcome(error=error)

    def answer_of(self, outcome: Outcome) -> Answer:
        if outcome.error is not None:
            return Answer(content=str(outcome.error), is_error=True)
        return Answer(content=str(outcome.value))


async def test_a_chat_runs_an_early_call_once_and_hands_its_outcome_to_the_framework(db: str) -> None:
    started = asyncio.Event()

    async def read_file(path: str) -> str:
        started.set()
        return f"contents of {path}"

    async def write_file(path: str) -> str:
        return f"wrote {path}"

    face = Face({"read_file": read_file, "write_file": write_file})
    chat = Chat(face, [ToolPolicy("read_file", early=True), ToolPolicy("write_file")], store=db, durability="normal")
    response = await chat.respond(["go"], frozenset({"read_file", "write_file"}))
    response.feed.call_piece(0, id="c1", name="read_file", arguments='{"path": "a"}')
    # The early call starts while the stream goes on.
    await asyncio.wait_for(started.wait(), 5)
    response.feed.call_piece(1, id="c2", name="write_file", arguments='{"path": "b"}')
    response.feed.finish("tool_use")
    response.ended({"c1", "c2"})
    outcomes = []
    for call_id, name in [("c1", "read_file"), ("c2", "write_file")]:
        call = chat.claim(call_id, name)
        assert call is not None
        outcomes.append(await chat.run_claimed(call, lambda name=name: face.run(name, {"path": "b"})))
    assert [outcome.value for outcome in outcomes] == ["contents of a", "wrote b"]
    assert face.runs == ["read_file", "write_file"], "each body ran once"
    await response.drained
    report = headstart.inspect(db, chat.id)
    results = {m["message"]["tool_call_id"]: m["message"] for m in report["sessions"][0]["messages"] if m["message"]["role"] == "tool_result"}
    assert results["c1"]["content"] == [{"type": "text", "text": "contents of a"}]
    assert results["c2"]["content"] == [{"type": "text", "text": "wrote b"}]
    users = [m for m in report["sessions"][0]["messages"] if m["message"]["role"] == "user"]
    assert len(users) == 1
    # The next model call goes on in the same session; a call the framework never ran is answered "not run".
    second = await chat.respond(["go", "again"], frozenset({"read_file", "write_file"}))
    second.feed.call_piece(0, id="c3", name="write_file", arguments='{"path": "c"}')
    second.feed.finish("tool_use")
    second.ended({"c3"})
    third = await chat.respond(["go", "again"], frozenset(), outcomes={"c3": Answer(content="denied", is_error=True)})
    third.feed.text("done")
    third.feed.finish("stop")
    await third.drained
    report = headstart.inspect(db, chat.id)
    results = {m["message"]["tool_call_id"]: m["message"] for m in report["sessions"][0]["messages"] if m["message"]["role"] == "tool_result"}
    assert results["c3"]["content"] == [{"type": "text", "text": "denied"}]
    assert results["c3"]["is_error"] is True
    assert sum(1 for m in report["sessions"][0]["messages"] if m["message"]["role"] == "user") == 2

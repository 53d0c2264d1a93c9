"""Chat Completions replies for the replay server (``ReplayServer.scripted``): one model response as its SSE
events, one per piece, so a server pacing one event every N ms paces the pieces. What the framework tests serve
their frameworks' real clients, and the record of the tool bodies their scripted tools ran."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Optional

from headstart import _native


@dataclass
class Call:
    """A tool call of a reply: its id, tool name and arguments' text in the pieces they stream in."""

    id: str
    name: str
    pieces: list[str]


@dataclass
class Reply:
    """One model response: text pieces, then calls; its finish reason (``None``: the stream is cut before it)."""

    text: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    finish: Optional[str] = "stop"
    usage: bool = True


def _event(choices: list[dict[str, Any]], usage: Optional[dict[str, int]] = None) -> str:
    chunk: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "scripted", "choices": choices}
    if usage is not None:
        chunk["usage"] = usage
    return f"data: {json.dumps(chunk)}\n\n"


def _delta(delta: dict[str, Any], finish: Optional[str] = None) -> str:
    return _event([{"index": 0, "delta": delta, "finish_reason": finish}])


def chat_events(reply: Reply) -> list[str]:
    """The SSE events of ``reply``, as an OpenAI Chat Completions stream gives them."""
    events = [_delta({"role": "assistant", "content": ""})]
    events += [_delta({"content": piece}) for piece in reply.text]
    for index, call in enumerate(reply.calls):
        start = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        events.append(_delta({"tool_calls": [start]}))
        events += [_delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}) for piece in call.pieces]
    if reply.finish is None:
        return events
    events.append(_delta({}, reply.finish))
    if reply.usage:
        events.append(_event([], {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}))
    events.append("data: [DONE]\n\n")
    return events


def serve(replies: list[Reply], pace_ms: float = 0.0) -> Any:
    """The replay server answering each model request with the next reply's events."""
    return _native.ReplayServer.scripted([chat_events(reply) for reply in replies], pace_ms)


@dataclass
class Runs:
    """The tool bodies that ran, in the order they started: (tool, arguments)."""

    started: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    server: Optional[str] = None
    """The replay server's URL: a body GETs ``/started/<tool>`` there as it starts (the server times it)."""


def started(runs: Runs, name: str, arguments: dict[str, Any]) -> None:
    runs.started.append((name, arguments))
    if runs.server is not None:
        try:
            urllib.request.urlopen(f"{runs.server}/started/{name}", timeout=30).read()
        except urllib.error.HTTPError:
            pass  # the server has no such page: it records the GET all the same

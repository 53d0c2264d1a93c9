"""Early execution leads the stream, through each provider's own SDK: the replay server paces a recorded two-call
response at 50 ms an event and holds back the second call's first event until the first call's early tool has
fetched a gate page. The lead is structural (the first call started before the second one began, and the events
still to come are at least 50 ms apart), so it holds on a loaded machine; sealed at ``finish_reason`` instead, the
gate opens only by its timeout and the fetch comes at the very end, which the control case checks."""

from __future__ import annotations

import asyncio
import urllib.request
from typing import Any

import pytest

import headstart
from conftest import consume, query_async, recording
from headstart import _native
from test_differential import sdk_stream

PACE_MS = 50.0
GATE = "/gate"

# (recording, the SDK call, the format engine.wrap reads, the first call's tool, the second call's tool)
CASES = [
    ("openai_chat__streaming_gpt41_parallel_model.yaml", "openai-chat", "openai-chat", "alpha", "beta"),
    ("openai_responses__parallel_tool_calls.yaml", "openai-responses", "openai-responses", "lookup_harbor_label", "lookup_orchard_label"),
    ("anthropic__multi_turn_streaming_tools.yaml", "anthropic", "anthropic", "subtract", "add"),
]


def gated_server(name: str, timeout_ms: float = 30_000.0) -> Any:
    return _native.ReplayServer(str(recording(name)), PACE_MS, gate=GATE, gate_timeout_ms=timeout_ms)


def tools(first: str, second: str, url: str, db: str, seen: dict[str, Any]) -> list[headstart.Tool]:
    async def opener(**arguments: Any) -> str:
        ctx_rows = await query_async(
            db,
            "SELECT r.call_id, r.state FROM tool_runs r JOIN messages m"
            " ON m.session_id = r.session_id AND m.seq = r.fragment_seq",
        )
        seen["committed_when_started"] = [row["call_id"] for row in ctx_rows]
        body = await asyncio.to_thread(lambda: urllib.request.urlopen(url + GATE, timeout=30).read())
        return f"{first}: {body.decode()}"

    async def other(**arguments: Any) -> str:
        return f"{second} ran"

    return [
        headstart.tool(opener, name=first, early=True, parameters={"type": "object"}),
        headstart.tool(other, name=second, early=True, parameters={"type": "object"}),
    ]


@pytest.mark.parametrize("name,kind,format,first,second", CASES)
async def test_the_first_call_starts_before_the_second_begins_and_well_before_the_stream_ends(
    db: str, name: str, kind: str, format: str, first: str, second: str
) -> None:
    server = gated_server(name)
    held_back = server.held_back
    assert held_back >= 4, f"{name}: the gate holds back {held_back} events"
    seen: dict[str, Any] = {}
    engine = headstart.Engine(db, tools=tools(first, second, server.url, db, seen))
    session = await engine.create_session()
    stream = await sdk_stream(kind, server.url, [])
    events, results = await consume(engine, session, stream, format)

    lead = server.lead(GATE)
    assert lead is not None, "the first call fetched the gate"
    lead_ms, events_after = lead
    # Every held-back event was sent after the fetch, each at least 50 ms after the one before.
    assert events_after >= held_back, (lead, held_back)
    assert lead_ms >= PACE_MS * (held_back - 1), (lead, held_back)
    if format == "openai-chat":
        assert lead_ms >= 250.0, lead  # the acceptance figure
    # Its call was durable when its body began.
    assert len(seen["committed_when_started"]) >= 1
    by_tool = {result.tool_name: result for result in results}
    assert by_tool[first].content == f"{first}: open" and not by_tool[first].is_error
    assert by_tool[second].content == f"{second} ran"
    assert [event.type for event in events][-1] == "turn_end"

    # The figures from the stored times: sealed before the fetch, so at least the measured lead before the end.
    figures = by_tool[first].figures
    assert figures is not None
    assert figures["headroom_ms"] >= 0.9 * lead_ms, (figures, lead)
    assert 0.0 <= figures["seal_to_start_ms"] < figures["headroom_ms"]
    assert figures["overlap_ms"] == pytest.approx(figures["run_ms"]), "its whole run was hidden behind the stream"
    [stored] = headstart.inspect(db)["sessions"]
    [response] = stored["figures"]["responses"]
    assert response["calls"] == 2
    assert 0.0 <= response["tool_round_ms"] <= response["batching_round_ms"], response
    assert [call["headroom_ms"] for call in stored["figures"]["calls"] if call["name"] == first] == [figures["headroom_ms"]]


async def test_sealed_at_finish_reason_the_first_call_starts_only_at_the_end(db: str) -> None:
    """The control: the same Chat Completions stream with ``seal="finish"`` (the rule before issue 29)."""
    name, kind, format, first, second = CASES[0]
    server = gated_server(name, timeout_ms=500.0)
    seen: dict[str, Any] = {}
    engine = headstart.Engine(db, tools=tools(first, second, server.url, db, seen))
    session = await engine.create_session()
    stream = await sdk_stream(kind, server.url, [])
    async with engine.wrap(session, stream, format=format, seal="finish") as events:
        [event async for event in events]
    lead = server.lead(GATE)
    assert lead is not None
    # At finish_reason only the usage chunk and [DONE] are left.
    assert lead[1] <= 2, lead


async def test_a_recording_holds_each_event_with_its_arrival_time(db: str, tmp_path: Any) -> None:
    name, kind, format, first, second = CASES[0]
    server = _native.ReplayServer(str(recording(name)), 5.0)

    async def echo(**arguments: Any) -> str:
        return "ok"

    engine = headstart.Engine(db, tools=[headstart.tool(echo, name=tool, early=True, parameters={"type": "object"}) for tool in (first, second)])
    session = await engine.create_session()
    path = tmp_path / "run.sse"
    stream = await sdk_stream(kind, server.url, [])
    async with engine.wrap(session, stream, format=format, record=path) as events:
        [event async for event in events]
    text = path.read_text()
    assert text.startswith(": headstart-recording format=openai-chat")
    times = [float(line.split("=", 1)[1]) for line in text.splitlines() if line.startswith(": at_ms=")]
    assert len(times) == 14 and times == sorted(times) and times[-1] >= 13 * 5.0, times

    with pytest.raises(headstart.ConfigError, match="unknown sealing rule"):
        async with engine.wrap(session, [], format=format, seal="eager") as events:
            [event async for event in events]

"""What the Python path costs: per text delta over the plain SDK loop, per tool call over the Rust engine's own start
and store.

Run in an environment with a release build of the package and the openai SDK:

    pip install ./crates/headstart-py openai
    python crates/headstart-py/bench/python_overhead.py

The stream is served over HTTP by a small server in a process of its own, so it takes no GIL from the measurement.

1. **Per text delta.** A Chat Completions stream of N text chunks is served over local HTTP, and read four ways,
   every event consumed: (a) the real ``openai`` SDK in a plain ``async for`` loop, no engine; (b) the SDK's stream
   inside ``engine.wrap`` as the SDK returned it (the engine reads its HTTP body); (c) the SDK's events handed over
   one by one (what a stream the engine cannot read the body of costs: each event back to its wire JSON);
   (d) ``headstart.HttpModel`` (Rust reads the HTTP, only the events come to Python). The difference per chunk
   against (a) is what headstart adds to the application's loop; against (d), what the Python hand-over adds to the
   engine's own path.
2. **Per tool call.** A response with M early calls to a trivial ``async def`` tool: from the engine's recorded
   start (``started_at_us``) to the body's first line (the hop to the Python loop), and from the body's return to
   the stored result (``ended_at_us``: the outcome back to Rust and its durable write).

Both use the SQLite store with `durability="normal"` (as `headstart bench` does). Figures are medians of several
rounds; they go to docs/performance.md.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

import headstart

SERVER = """
import http.server, sys
body = open(sys.argv[1], "rb").read()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

DELTAS = 4000
CALLS = 100
ROUNDS = 5


def chat_body(path: Path, chunks: int) -> None:
    """A Chat Completions SSE body of `chunks` text chunks."""

    def chunk(delta: dict[str, Any], finish: Any = None) -> str:
        body = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "bench",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return "data: " + json.dumps(body, separators=(",", ":"))

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": f"w{n} "}) for n in range(chunks)]
    events += [chunk({}, "stop"), "data: [DONE]"]
    path.write_text("".join(event + "\n\n" for event in events))


async def sdk_stream(url: str) -> Any:
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="bench", max_retries=0)
    return await client.chat.completions.create(model="bench", messages=[{"role": "user", "content": "go"}], stream=True)


async def plain_loop(url: str) -> float:
    began = time.perf_counter()
    text = []
    async for chunk in await sdk_stream(url):
        if chunk.choices and chunk.choices[0].delta.content:
            text.append(chunk.choices[0].delta.content)
    return time.perf_counter() - began


async def one_by_one(stream: Any) -> Any:
    async for event in stream:
        yield event


async def wrapped_loop(url: str, db: str, way: str) -> float:
    engine = headstart.Engine(db, tools=[], durability="normal")
    session = await engine.create_session()
    began = time.perf_counter()
    text = []
    if way == "http":
        agent = headstart.Agent(engine, headstart.HttpModel("openai-chat", "bench", base_url=url + "/v1", api_key_env="PATH"))
        run: Any = agent.run(session, "go")
    else:
        stream = await sdk_stream(url)
        run = engine.wrap(session, stream if way == "body" else one_by_one(stream), format="openai-chat")
    async with run as events:
        async for event in events:
            if event.type == "message_update" and event.delta.type == "text_delta":
                text.append(event.delta.delta)
    assert len(text) == DELTAS, len(text)
    return time.perf_counter() - began


async def tool_calls(db: str) -> tuple[list[float], list[float]]:
    entered: dict[str, int] = {}
    left: dict[str, int] = {}

    @headstart.tool(early=True)
    async def noop(n: int, ctx: headstart.ToolContext) -> str:
        entered[ctx.call_id] = time.time_ns() // 1000
        left[ctx.call_id] = time.time_ns() // 1000
        return "ok"

    deltas: list[dict[str, Any]] = [{"type": "start"}]
    for n in range(CALLS):
        deltas += [
            {"type": "toolcall_start", "index": n, "id": f"c{n}", "name": "noop"},
            {"type": "toolcall_delta", "index": n, "delta": json.dumps({"n": n})},
            {"type": "toolcall_end", "index": n},
        ]
    deltas.append({"type": "done", "stop_reason": "tool_use"})

    async def paced() -> Any:
        for delta in deltas:
            if delta["type"] == "toolcall_start":
                await asyncio.sleep(0.002)
            yield delta

    engine = headstart.Engine(db, tools=[noop], durability="normal")
    session = await engine.create_session()
    async with engine.wrap(session, paced(), format="headstart") as events:
        async for _ in events:
            pass
    stored = headstart.inspect(db, session)["sessions"][0]["tool_runs"]
    rows = [(run["call_id"], run["started_at_us"], run["ended_at_us"]) for run in stored]
    to_python = [(entered[call] - started) / 1000 for call, started, _ in rows]
    back = [(ended - left[call]) / 1000 for call, _, ended in rows]
    return to_python, back


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        body = Path(scratch) / "chat.sse"
        chat_body(body, DELTAS)
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(body)], stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            url = f"http://127.0.0.1:{server.stdout.readline().strip()}"
            ways = ["body", "events", "http"]
            plain: list[float] = []
            wrapped: dict[str, list[float]] = {way: [] for way in ways}
            for round_ in range(ROUNDS):
                plain.append(await plain_loop(url))
                for way in ways:
                    wrapped[way].append(await wrapped_loop(url, str(Path(scratch) / f"{way}{round_}.db"), way))
        finally:
            server.kill()
            server.wait()
        per_chunk = {way: statistics.median(times) / DELTAS * 1e6 for way, times in wrapped.items()}
        plain_us = statistics.median(plain) / DELTAS * 1e6
        print(f"text deltas ({DELTAS} chunks, median of {ROUNDS} rounds, interleaved), us per chunk")
        print(f"  (a) plain openai SDK loop, no engine:            {plain_us:7.2f}")
        print(f"  (b) engine.wrap(the SDK's stream):               {per_chunk['body']:7.2f}   vs (a) {per_chunk['body'] - plain_us:+7.2f}   vs (d) {per_chunk['body'] - per_chunk['http']:+7.2f}")
        print(f"  (c) engine.wrap(the SDK's events one by one):    {per_chunk['events']:7.2f}   vs (a) {per_chunk['events'] - plain_us:+7.2f}   vs (d) {per_chunk['events'] - per_chunk['http']:+7.2f}")
        print(f"  (d) headstart.HttpModel (Rust reads the HTTP):   {per_chunk['http']:7.2f}")
        starts, ends = [], []
        for round_ in range(ROUNDS):
            to_python, back = await tool_calls(str(Path(scratch) / f"t{round_}.db"))
            starts += to_python
            ends += back
        print(f"tool calls ({CALLS} early calls x {ROUNDS} rounds, median / p90)")
        print(f"  engine start -> body begins:  {statistics.median(starts):7.3f} / {statistics.quantiles(starts, n=10)[-1]:.3f} ms")
        print(f"  body returns -> result stored:{statistics.median(ends):7.3f} / {statistics.quantiles(ends, n=10)[-1]:.3f} ms")
        print(f"python {sys.version.split()[0]}")


if __name__ == "__main__":
    asyncio.run(main())

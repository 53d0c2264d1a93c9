"""A simulated model for the examples: a local stand-in for OpenAI's Chat Completions API, standard library only.

`serve()` starts it on 127.0.0.1 (a free port, a daemon thread) and yields its base URL; it stops on leaving the
`with`. It answers `POST /v1/chat/completions` by script, whatever the request says: the first request calls
`search_docs` (its arguments complete early), then `save_note` with a long note, so the model still streams for a
while after `search_docs` could start; every later request answers in text. A streaming request gets the reply as
Server-Sent Events, one every `pace_ms`; one without `"stream": true` gets it as one `chat.completion`.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, Optional

Reply = tuple[str, list[tuple[str, str, list[str]]], str]
"""One model response: its text, its calls (id, tool name, arguments in the pieces they stream in), its finish."""

NOTE = ['{"title": "cancel", "text": "'] + ["Dropping the run cancels it. "] * 13 + ['"}']
SEARCH = ("call_1", "search_docs", ['{"query": ', '"cancel"}'])
FIRST: Reply = ("", [SEARCH, ("call_2", "save_note", NOTE)], "tool_calls")
LATER: Reply = ("Dropping the run cancels it.", [], "stop")
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def _chunk(choices: list[dict[str, Any]], **more: Any) -> bytes:
    chunk = {"id": "chatcmpl-simulated", "object": "chat.completion.chunk", "created": int(time.time())}
    return f"data: {json.dumps({**chunk, 'model': 'simulated', 'choices': choices, **more})}\n\n".encode()


def _delta(delta: dict[str, Any], finish: Optional[str] = None) -> bytes:
    return _chunk([{"index": 0, "delta": delta, "finish_reason": finish}])


def events(reply: Reply) -> list[bytes]:
    """The SSE events of `reply`, as OpenAI streams a Chat Completions response (with its usage)."""
    text, calls, finish = reply
    out = [_delta({"role": "assistant", "content": ""})]
    out += [_delta({"content": piece}) for piece in _pieces(text)]
    for index, (call_id, name, pieces) in enumerate(calls):
        start = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        out.append(_delta({"tool_calls": [start]}))
        out += [_delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}) for piece in pieces]
    return out + [_delta({}, finish), _chunk([], usage=USAGE), b"data: [DONE]\n\n"]


def _pieces(text: str) -> list[str]:
    """`text` in pieces of a word and its following space, as a model streams it."""
    words = text.split(" ")
    return [word + " " for word in words[:-1]] + [words[-1]] if text else []


def completion(reply: Reply) -> dict[str, Any]:
    """`reply` as one non-streaming `chat.completion`."""
    text, calls, finish = reply
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "".join(pieces)}}
            for call_id, name, pieces in calls
        ]
    choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
    return {"id": "chatcmpl-simulated", "object": "chat.completion", "created": int(time.time()), "model": "simulated",
            "choices": [choice], "usage": USAGE}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pace_ms: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.pace_ms = pace_ms
        self.requests = 0
        self.lock = threading.Lock()

    def next_reply(self) -> Reply:
        with self.lock:
            self.requests += 1
            return FIRST if self.requests == 1 else LATER


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send_error(404)
            return
        reply = self.server.next_reply()
        if not body.get("stream"):
            payload = json.dumps(completion(reply)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for event in events(reply):
                time.sleep(self.server.pace_ms / 1000)
                self.wfile.write(event)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading (a cancelled run)
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
        pass  # quiet: the examples print their own lines


@contextlib.contextmanager
def serve(pace_ms: float = 40.0) -> Iterator[str]:
    """The simulated model running in a daemon thread: its base URL (`http://127.0.0.1:PORT/v1`) while inside."""
    server = _Server(pace_ms)
    thread = threading.Thread(target=server.serve_forever, name="simulated-openai", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextlib.contextmanager
def endpoint(base_url: Optional[str]) -> Iterator[tuple[Optional[str], Optional[str]]]:
    """The model's (base URL, API key): `base_url` and the environment's key when given one or OPENAI_API_KEY is set
    (`None` for the key: the client reads OPENAI_API_KEY); otherwise the simulated model's, with a dummy key."""
    if base_url is not None or os.environ.get("OPENAI_API_KEY"):
        yield base_url, None
        return
    with serve() as url:
        print(f"No --base-url and no OPENAI_API_KEY: using the simulated model at {url}", flush=True)
        yield url, "simulated"

"""``DeltaFeed``: a framework's stream, as the pieces its face reads from it, into the engine's delta events.

A face says what each chunk of the framework's stream holds: text, reasoning, a piece of a tool call (keyed by the
stream's index for it; its id and name come with its first piece, or later), an explicit end of a call, the finish.
The feed turns them into the engine's events (``headstart`` format, one JSON text each) and hands them to the
response's native feed in bursts (``FLUSH_LINES``). A call is sealed at the first of: its streamed arguments form one whole JSON
object (providers whose frameworks say when a call ends only once the stream has ended need this), its explicit
end, the finish. ``on_seal`` hears of each sealed call: it may start now."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _quoted
from typing import Any, Callable, Optional

from .object_end import ObjectEnd

FLUSH_LINES = 64
FLUSH_AFTER_S = 0.002
"""Events go to the engine in bursts (a wake of its thread per event costs more than the event): at a call's seal
(at once: the call may start), at the end, and otherwise once 64 are held or the first held is 2 ms old (checked
as the next arrives)."""


@dataclass
class SealedCall:
    """A call as the stream sealed it."""

    id: str
    name: str
    text: str
    """Its arguments as the model streamed them."""
    arguments: Optional[dict[str, Any]]
    """Its arguments as a JSON object; ``None`` when the text is not one."""


@dataclass
class _Call:
    at: int
    id: Optional[str] = None
    name: Optional[str] = None
    text: str = ""
    end: ObjectEnd = field(default_factory=ObjectEnd)
    announced: bool = False
    """The engine has its ``toolcall_start`` (it needs the id and the name)."""
    sealed: bool = False


def parsed_arguments(text: str) -> Optional[dict[str, Any]]:
    """The arguments' JSON object, ``{}`` for none at all, ``None`` when the text is not one object."""
    if text.strip() == "":
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class DeltaFeed:
    """One response's stream into the engine. ``native`` is the response's ``_native.Feed``."""

    def __init__(self, native: Any, on_seal: Optional[Callable[[SealedCall], None]] = None) -> None:
        self._native = native
        self._on_seal = on_seal
        self._next = 0
        self._started = False
        self._closed = False
        # The open text or reasoning block: (kind, index), or None.
        self._block: Optional[tuple[str, int]] = None
        self._calls: dict[Any, _Call] = {}
        self.sealed: list[SealedCall] = []
        """The calls sealed so far, in their order."""
        # Events not yet handed over, and when the first of them was held.
        self._lines: list[str] = []
        self._since: Optional[float] = None

    @property
    def closed(self) -> bool:
        """The response has ended (finished, failed or aborted)."""
        return self._closed

    def _push(self, event: dict[str, Any]) -> None:
        self._push_json(json.dumps(event))

    def _push_json(self, text: str) -> None:
        if not self._started:
            self._started = True
            self._lines.append('{"type": "start"}')
        self._lines.append(text)
        now = time.monotonic()
        if self._since is None:
            self._since = now
        if len(self._lines) >= FLUSH_LINES or now - self._since >= FLUSH_AFTER_S:
            self._flush()

    def _flush(self) -> None:
        """Hands the events held so far to the engine, in one burst."""
        if self._lines:
            self._native.push_lines("\n".join(self._lines))
            self._lines = []
            self._since = None

    def _push_delta(self, kind: str, index: int, delta: str) -> None:
        """A ``{kind}_delta`` event, the one pushed per chunk: the text ``json.dumps`` gives its dict, byte for byte,
        written directly (a third of the feed's own time per chunk goes to ``json.dumps`` otherwise)."""
        self._push_json(f'{{"type": "{kind}_delta", "index": {index}, "delta": {_quoted(delta)}}}')

    def text(self, delta: str) -> None:
        """A piece of the response's text."""
        self._block_delta("text", delta)

    def reasoning(self, delta: str) -> None:
        """A piece of the model's reasoning."""
        self._block_delta("thinking", delta)

    def _block_delta(self, kind: str, delta: str) -> None:
        if self._closed or not isinstance(delta, str) or delta == "":
            return
        if self._block is None or self._block[0] != kind:
            self._close_block()
            self._block = (kind, self._next)
            self._next += 1
            self._push({"type": f"{kind}_start", "index": self._block[1]})
        self._push_delta(kind, self._block[1], delta)

    def _close_block(self) -> None:
        if self._block is not None:
            kind, at = self._block
            self._block = None
            self._push({"type": f"{kind}_end", "index": at})

    def call_piece(self, key: Any, *, id: Optional[str] = None, name: Optional[str] = None, arguments: str = "") -> None:
        """A piece of the call the stream keys ``key``: its id and name when this piece has them, a piece of its
        arguments' text."""
        if self._closed:
            return
        call = self._calls.get(key)
        if call is None:
            self._close_block()
            call = _Call(at=self._next)
            self._next += 1
            self._calls[key] = call
        if call.sealed:
            return
        if id and call.id is None:
            call.id = str(id)
        if name and call.name is None:
            call.name = str(name)
        if isinstance(arguments, str) and arguments:
            call.text += arguments
            call.end.feed(arguments)
            if call.announced:
                self._push_delta("toolcall", call.at, arguments)
        self._announce(call)
        if call.announced and call.end.whole:
            self._seal(call, parsed_arguments(call.text))

    def _announce(self, call: _Call) -> None:
        """The engine's ``toolcall_start`` once the call's id and name are known, with the arguments so far."""
        if call.announced or call.id is None or call.name is None:
            return
        call.announced = True
        self._push({"type": "toolcall_start", "index": call.at, "id": call.id, "name": call.name})
        if call.text:
            self._push({"type": "toolcall_delta", "index": call.at, "delta": call.text})

    def end_call(
        self,
        key: Any,
        *,
        id: Optional[str] = None,
        name: Optional[str] = None,
        arguments: Optional[str] = None,
        value: Optional[dict[str, Any]] = None,
    ) -> None:
        """The stream (or the framework's reading of it) says the call keyed ``key`` is whole: ``arguments`` is its
        whole text when the stream gives it again, ``value`` its arguments as the framework reads them (a lenient
        reader may take cut arguments as an object: the engine keeps what the framework will run)."""
        if self._closed:
            return
        call = self._calls.get(key)
        if call is not None and call.sealed:
            return
        fill = arguments if arguments is not None and (call is None or call.text == "") else ""
        self.call_piece(key, id=id, name=name, arguments=fill)
        call = self._calls[key]
        if call.announced and not call.sealed:
            whole = arguments if arguments is not None else call.text
            self._seal(call, value if value is not None else parsed_arguments(whole))

    def _seal(self, call: _Call, arguments: Optional[dict[str, Any]]) -> None:
        call.sealed = True
        event: dict[str, Any] = {"type": "toolcall_end", "index": call.at}
        if arguments is not None:
            event["arguments"] = arguments
        self._push(event)
        self._flush()  # the engine commits the prefix and may start the call now
        assert call.id is not None and call.name is not None
        sealed = SealedCall(id=call.id, name=call.name, text=call.text, arguments=arguments)
        self.sealed.append(sealed)
        if self._on_seal is not None:
            self._on_seal(sealed)

    def finish(self, stop_reason: str, usage: Optional[dict[str, int]] = None) -> list[SealedCall]:
        """The response's end: ``stop``, ``tool_use`` or ``length``. Calls still open are sealed (those without an
        id or a name are not the framework's either, and the engine never hears of them). Returns every sealed call."""
        if self._closed:
            return list(self.sealed)
        self._close_block()
        for call in self._calls.values():
            if call.announced and not call.sealed:
                self._seal(call, parsed_arguments(call.text))
        if stop_reason == "stop" and self.sealed:
            stop_reason = "tool_use"
        event: dict[str, Any] = {"type": "done", "stop_reason": stop_reason}
        if usage:
            event["usage"] = usage
        self._push(event)
        self._end()
        return list(self.sealed)

    def fail(self, message: str) -> None:
        """The stream failed: the response ends as an error."""
        self._error("error", message)

    def abort(self, message: str = "aborted") -> None:
        """The stream was cancelled: the response ends as aborted."""
        self._error("aborted", message)

    def _error(self, stop_reason: str, message: str) -> None:
        if self._closed:
            return
        self._push({"type": "error", "stop_reason": stop_reason, "message": message})
        self._end()

    def _end(self) -> None:
        self._closed = True
        self._flush()
        self._native.end()

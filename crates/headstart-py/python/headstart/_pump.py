"""``pump``: a model's stream, read on the loop into the engine's feed.

An openai or anthropic SDK stream not yet read goes over as its HTTP body (``_sdk_body``), any other stream event by
event (each back to its wire JSON), an ``sse-…`` format's items as the body's chunks, delta dicts as themselves.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Optional

__all__ = ["pump"]

_NAMED_EVENTS = {"openai-responses", "anthropic"}
# `messages.stream()` of the anthropic SDK adds events of its own beside the wire's: only the wire's are read.
_ANTHROPIC_WIRE = {
    "message_start",
    "message_delta",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "ping",
    "error",
}


def _encode(event: Any) -> str:
    """One stream item as its JSON text: an SDK object's wire JSON, a dict's JSON, a string as it is."""
    if isinstance(event, str):
        return event
    if isinstance(event, dict):
        return json.dumps(event)
    to_json = getattr(event, "to_json", None)
    if callable(to_json):
        text: str = to_json(indent=None)
        return text
    dump: Any = getattr(event, "model_dump_json")
    text = dump(by_alias=True, exclude_unset=True)
    return text


def _event_type(event: Any) -> Optional[str]:
    if isinstance(event, dict):
        return event.get("type")
    return getattr(event, "type", None)


async def pump(stream: Any, feed: Any, format: str) -> None:
    """Reads the model's stream and hands it to the engine; its end or its failure ends the response.

    An openai or anthropic SDK stream not yet read goes over as its HTTP body (see ``_sdk_body``); any other stream
    event by event; an ``sse-…`` format's items are the body's chunks."""
    named = format in _NAMED_EVENTS
    try:
        if format.startswith("sse-"):
            await _pump_chunks(stream, feed)
        elif hasattr(stream, "__aenter__") and not hasattr(stream, "__aiter__"):
            async with stream as entered:
                await _pump_stream(entered, feed, format, named)
        else:
            await _pump_stream(stream, feed, format, named)
    except asyncio.CancelledError:
        feed.fail("the stream was cancelled")
        raise
    except Exception as error:
        feed.fail(f"the stream raised {type(error).__name__}: {error}")
        return
    feed.end()


# The SDKs whose own stream classes (``AsyncStream`` and ``Stream``) the engine may read the HTTP response of.
_SDKS = ("openai", "anthropic")


def _sdk_body(stream: Any) -> Any:
    """The openai or anthropic SDK stream under ``stream`` whose HTTP response the engine can read itself, or
    ``None``. Reading the SSE body as it came off the wire skips the SDK's parsing and its object per event (most
    of the cost of a plain SDK loop) and the way back to wire JSON, and the engine's parser is the one that reads
    ``headstart run``'s bodies. Only the SDKs' own stream classes qualify (an instrumentation library's proxy
    around one is read event by event, so it still sees the events it observes), only over SSE (not Bedrock's
    binary event stream), and only before anything was read from it."""
    if _sdk_of(stream) and hasattr(stream, "_raw_stream"):
        stream = stream._raw_stream  # a helper stream (`messages.stream()`) over the SDK's own
    if not _sdk_of(stream) or type(stream).__name__ not in ("AsyncStream", "Stream"):
        return None
    decoder = type(getattr(stream, "_decoder", None))
    if not _sdk_of(decoder) or decoder.__name__ != "SSEDecoder":
        return None
    response = getattr(stream, "response", None)
    if response is None or getattr(response, "is_stream_consumed", True) or getattr(response, "is_closed", True):
        return None
    return stream


def _sdk_of(thing: Any) -> bool:
    """Whether ``thing``'s class (or ``thing``, a class) is one of the SDKs' own."""
    kind = thing if isinstance(thing, type) else type(thing)
    return kind.__module__.split(".")[0] in _SDKS


async def _pump_stream(stream: Any, feed: Any, format: str, named: bool) -> None:
    sdk = _sdk_body(stream)
    if sdk is None:
        await _each(stream, lambda event: _push(feed, event, format, named))
    elif type(sdk).__name__ == "AsyncStream":
        try:
            await _each(sdk.response.aiter_bytes(), feed.push_body)
        finally:
            await sdk.close()
    else:
        await asyncio.to_thread(_drain_body, sdk, feed)


def _drain_body(sdk: Any, feed: Any) -> None:
    """A synchronous SDK stream's body, read in a worker thread, which closes the response when done."""
    try:
        _each_in_thread(sdk.response.iter_bytes(), feed.push_body)
    finally:
        sdk.close()


async def _pump_chunks(stream: Any, feed: Any) -> None:
    """An ``sse-…`` stream: chunks of the SSE body (``bytes`` or ``str``), as ``aiter_bytes()`` or ``aiter_text()``
    give them."""
    await _each(stream, lambda chunk: feed.push_body(_chunk_bytes(chunk)))


def _chunk_bytes(chunk: Any) -> bytes:
    if isinstance(chunk, str):
        return chunk.encode()
    if isinstance(chunk, (bytes, bytearray, memoryview)):
        return bytes(chunk)
    raise TypeError(f"an sse- format's stream yields bytes or str (chunks of the SSE body), not {type(chunk).__name__}")


async def _each(items: Any, handle: Callable[[Any], None]) -> None:
    """Calls ``handle`` on every item of ``items``: of an async iterable on the loop; of a synchronous one, which
    blocks on the network, in a worker thread, so that the loop keeps running the tools meanwhile."""
    if hasattr(items, "__aiter__"):
        async for item in items:
            handle(item)
    else:
        await asyncio.to_thread(_each_in_thread, items, handle)


def _each_in_thread(items: Any, handle: Callable[[Any], None]) -> None:
    for item in items:
        handle(item)


def _push(feed: Any, event: Any, format: str, named: bool) -> None:
    if format == "headstart":
        if isinstance(event, dict) and "at_ms" in event:
            event = {key: value for key, value in event.items() if key != "at_ms"}
        feed.push(_encode(event))
        return
    kind = _event_type(event) if named else None
    if format == "anthropic" and kind not in _ANTHROPIC_WIRE:
        return
    feed.push(_encode(event), kind)

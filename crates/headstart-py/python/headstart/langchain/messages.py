"""LangChain's shapes and the engine's: what a prompt says (its user messages, the results the app or the graph
gave), which tools a step offers, and what one streamed chunk holds (its text, reasoning, tool call pieces, its
finish and usage)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.output_parsers.openai_tools import parse_tool_call
from langchain_core.utils.json import parse_partial_json

from .._hosted.answer import Answer
from .._hosted.feed import DeltaFeed


def text_of(content: Any) -> str:
    """A message's content as text: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "".join(parts)


def users_of(messages: Sequence[BaseMessage]) -> list[str]:
    """The text of a prompt's user messages, in order."""
    return [text_of(message.content) for message in messages if isinstance(message, HumanMessage)]


def outcomes_of(messages: Sequence[BaseMessage]) -> dict[str, Answer]:
    """The results a prompt holds for calls, by call id: what the graph gave the model (a tool's message, the
    error a ToolNode wrote, the answer to an approval the middleware refused)."""
    outcomes: dict[str, Answer] = {}
    for message in messages:
        if isinstance(message, ToolMessage) and message.tool_call_id:
            outcomes[message.tool_call_id] = Answer(content=text_of(message.content), is_error=message.status == "error")
    return outcomes


def offered_of(kwargs: dict[str, Any]) -> frozenset[str]:
    """The tools a model call offers (``bind_tools``'s formatted ``tools``, OpenAI's or Anthropic's shape); none
    under ``tool_choice="none"``."""
    if kwargs.get("tool_choice") == "none":
        return frozenset()
    names = set()
    for tool in kwargs.get("tools") or []:
        if not isinstance(tool, dict):
            name = getattr(tool, "name", None)
        elif isinstance(tool.get("function"), dict):
            name = tool["function"].get("name")
        else:
            name = tool.get("name")
        if isinstance(name, str):
            names.add(name)
    return frozenset(names)


class ChunkReader:
    """One response's chunks, read into its feed: each chunk as it passes, then the finish. Keeps what the
    framework will make of the calls (LangChain merges the pieces by their index)."""

    def __init__(self, feed: DeltaFeed) -> None:
        self._feed = feed
        # index -> [id, name, arguments text]
        self._calls: dict[Any, list[Any]] = {}
        self._finish: Optional[str] = None
        self._usage: Optional[dict[str, int]] = None

    def read(self, chunk: Any) -> None:
        """One ``ChatGenerationChunk`` (or message chunk)."""
        message = getattr(chunk, "message", chunk)
        if not isinstance(message, AIMessageChunk):
            return
        content = message.content
        if isinstance(content, str):
            self._feed.text(content)
        elif isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "text" and isinstance(block.get("text"), str):
                    self._feed.text(block["text"])
                elif kind in ("thinking", "reasoning"):
                    piece = block.get("thinking", block.get("reasoning", block.get("text")))
                    if isinstance(piece, str):
                        self._feed.reasoning(piece)
        for piece in message.tool_call_chunks or []:
            key: Any = piece.get("index")
            if key is None:
                key = piece.get("id")
            entry = self._calls.setdefault(key, [None, None, ""])
            entry[0] = entry[0] or piece.get("id")
            entry[1] = entry[1] or piece.get("name")
            entry[2] += piece.get("args") or ""
            self._feed.call_piece(key, id=piece.get("id"), name=piece.get("name"), arguments=piece.get("args") or "")
        info = getattr(chunk, "generation_info", None) or {}
        reason = info.get("finish_reason") or message.response_metadata.get("finish_reason") or message.response_metadata.get("stop_reason")
        if isinstance(reason, str):
            self._finish = reason
        if message.usage_metadata:
            self._usage = usage_of(message.usage_metadata, self._usage)

    def finish(self, *, lenient: bool) -> set[str]:
        """The stream has ended: each call sealed with its arguments as the framework reads them (``lenient``: as
        LangChain merges a stream, which reads cut arguments as far as they go; else strictly, as a non-streaming
        response is read), and the end. Returns the ids of the calls the framework's message holds."""
        held = set()
        runs = False
        for key, (id, name, text) in self._calls.items():
            value = framework_arguments(name or "", text, lenient)
            runs = runs or value is not None
            self._feed.end_call(key, value=value)
            if id:
                held.add(str(id))
        self._feed.finish(self._stop_reason(runs), self._usage)
        return held

    def _stop_reason(self, runs: bool) -> str:
        """The engine's end: the calls the framework runs are admitted (LangChain's agents run a message's calls
        whatever its finish reason says); a cut with none is a cut."""
        if runs:
            return "tool_use"
        if self._finish in ("length", "max_tokens"):
            return "length"
        return "stop"


def framework_arguments(name: str, text: str, lenient: bool) -> Optional[dict[str, Any]]:
    """A call's arguments as LangChain reads them, ``None`` when it makes the call an invalid one: ``lenient`` as it
    merges a stream (cut arguments read as far as they go), else as a provider's non-streaming response is read."""
    if lenient:
        if text == "":
            return {}
        try:
            value = parse_partial_json(text)
        except Exception:  # noqa: BLE001 - LangChain's reader takes such a call as invalid
            return None
        return value if isinstance(value, dict) else None
    try:
        parsed = parse_tool_call({"function": {"name": name, "arguments": text}, "id": None})
    except OutputParserException:
        return None
    args = (parsed or {}).get("args")
    return args if isinstance(args, dict) else None


def usage_of(usage: Any, earlier: Optional[dict[str, int]] = None) -> dict[str, int]:
    """The engine's usage of LangChain's ``usage_metadata`` (added to what earlier chunks said)."""
    details = usage.get("input_token_details") or {}
    read = int(details.get("cache_read") or 0)
    write = int(details.get("cache_creation") or 0)
    total = {
        "input": max(0, int(usage.get("input_tokens") or 0) - read - write),
        "output": int(usage.get("output_tokens") or 0),
        "cache_read": read,
        "cache_write": write,
    }
    if earlier:
        total = {key: total[key] + earlier.get(key, 0) for key in total}
    return total

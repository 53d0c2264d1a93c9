"""The Agents SDK's shapes and the engine's: what a model call's input says (its user messages, the outputs the run
gave earlier calls), which tools the step offers, and what each stream event holds (Responses API events, which
the SDK's Chat Completions model also yields)."""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

from .._hosted.answer import Answer, stored_text
from .._hosted.feed import DeltaFeed


def text_of(content: Any) -> str:
    """An input item's content as text: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(part.get("text", "") for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def users_of(input: Any) -> list[str]:
    """The text of the input's user messages, in order."""
    if isinstance(input, str):
        return [input]
    return [
        text_of(_field(item, "content"))
        for item in input or []
        if _field(item, "role") == "user" and _field(item, "type") in (None, "message")
    ]


def outcomes_of(input: Any) -> dict[str, Answer]:
    """The outputs the input holds for calls, by call id: what the run gave the model."""
    if isinstance(input, str):
        return {}
    outcomes: dict[str, Answer] = {}
    for item in input or []:
        if _field(item, "type") == "function_call_output" and _field(item, "call_id"):
            output = _field(item, "output")
            outcomes[str(_field(item, "call_id"))] = Answer(content=output if isinstance(output, str) else text_of(output))
    return outcomes


def offered_of(tools: Sequence[Any]) -> frozenset[str]:
    """The function tools a model call offers (handoffs are not: the SDK runs them as handoffs)."""
    return frozenset(str(tool.name) for tool in tools if type(tool).__name__ == "FunctionTool")


class EventReader:
    """One response's stream events, read into its feed: each as it passes, then the completed response. Calls are
    keyed by their ``output_index`` (the Chat Completions model gives every call the same item id)."""

    def __init__(self, feed: DeltaFeed) -> None:
        self._feed = feed
        self.completed: Optional[Any] = None
        """The ``response.completed`` event's response."""

    def read(self, event: Any) -> None:
        """One event."""
        kind = getattr(event, "type", None)
        if kind == "response.output_text.delta":
            self._feed.text(getattr(event, "delta", ""))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            self._feed.reasoning(getattr(event, "delta", ""))
        elif kind == "response.output_item.added" and getattr(event.item, "type", None) == "function_call":
            item = event.item
            self._feed.call_piece(event.output_index, id=item.call_id, name=item.name, arguments=item.arguments or "")
        elif kind == "response.function_call_arguments.delta":
            self._feed.call_piece(event.output_index, arguments=getattr(event, "delta", ""))
        elif kind == "response.output_item.done" and getattr(event.item, "type", None) == "function_call":
            item = event.item
            self._feed.end_call(event.output_index, id=item.call_id, name=item.name, arguments=item.arguments)
        elif kind == "response.completed":
            self.completed = event.response

    def finish(self) -> set[str]:
        """The stream has ended with its completed response: the calls the run will see are its function calls
        (sealed as it holds them), and the end. Returns their ids."""
        response = self.completed
        calls = [item for item in getattr(response, "output", None) or [] if getattr(item, "type", None) == "function_call"]
        for index, item in enumerate(getattr(response, "output", None) or []):
            if getattr(item, "type", None) == "function_call":
                self._feed.end_call(index, id=item.call_id, name=item.name, arguments=item.arguments)
        self._feed.finish("tool_use" if calls else _stop_reason(response), usage_of(getattr(response, "usage", None)))
        return {str(item.call_id) for item in calls}


def _stop_reason(response: Any) -> str:
    details = getattr(response, "incomplete_details", None)
    return "length" if getattr(details, "reason", None) == "max_output_tokens" else "stop"


def usage_of(usage: Any) -> Optional[dict[str, int]]:
    """The engine's usage of a Responses API usage."""
    if usage is None:
        return None
    cached = int(getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", 0) or 0)
    return {
        "input": max(0, int(usage.input_tokens or 0) - cached),
        "output": int(usage.output_tokens or 0),
        "cache_read": cached,
        "cache_write": 0,
    }


def input_items_of(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stored session as the Responses input items a run goes on with: the user's messages, the model's text and
    function calls, each call's output."""
    items: list[dict[str, Any]] = []
    for entry in log:
        message = entry.get("message", {})
        role = message.get("role")
        if role == "user":
            items.append({"role": "user", "content": message.get("text", "")})
        elif role == "assistant":
            text = "".join(block.get("text", "") for block in message.get("content") or [] if block.get("type") == "text")
            if text:
                items.append({"role": "assistant", "content": text})
            for block in message.get("content") or []:
                if block.get("type") == "tool_call":
                    arguments = json.dumps(block.get("arguments") if block.get("arguments") is not None else {})
                    items.append({"type": "function_call", "call_id": block["id"], "name": block["name"], "arguments": arguments})
        elif role == "tool_result":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"], "output": stored_text(message)})
    return items

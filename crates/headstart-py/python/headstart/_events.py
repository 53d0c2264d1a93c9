"""Agent events as read-only Python objects, and the tool results a response produced."""

from __future__ import annotations

import copy
from typing import Any, Iterator, Mapping, Optional

__all__ = ["Event", "Record", "ToolResult"]


def _view(value: Any) -> Any:
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, list):
        return tuple(_view(item) for item in value)
    return value


class Record(Mapping[str, Any]):
    """A read-only JSON object whose keys are also attributes (``call.name`` is ``call["name"]``)."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        try:
            return _view(self._data[name])
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: str) -> Any:
        return _view(self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the object as plain JSON data."""
        return copy.deepcopy(self._data)

    def __repr__(self) -> str:
        return f"Record({self._data!r})"


class Event(Record):
    """One agent event: ``type`` is the Rust ``AgentEvent``'s name (``message_update``, ``tool_execution_start``,
    ...); its fields are attributes (``ev.call.name``, ``ev.delta``, ``ev.is_error``); ``to_dict()`` is the Rust
    event's serialization. A tool result's ``message_end`` also has ``ev.result``, the stored result message."""

    __slots__ = ()

    @property
    def type(self) -> str:
        """The event's name."""
        kind: str = self._data["type"]
        return kind

    @property
    def result(self) -> Any:
        """The tool result message of a tool result's ``message_end``; ``None`` for every other event."""
        message = self._data.get("message")
        if self._data["type"] == "message_end" and message and message.get("role") == "tool_result":
            return Record(message)
        return None

    def __repr__(self) -> str:
        return f"Event({self._data!r})"


class ToolResult:
    """A call's stored result: its call id, tool name, content text, and whether it is an error."""

    __slots__ = ("tool_call_id", "tool_name", "content", "is_error", "details", "figures")

    def __init__(self, message: dict[str, Any]) -> None:
        self.tool_call_id: str = message["tool_call_id"]
        self.tool_name: str = message["tool_name"]
        blocks = message.get("content", [])
        self.content: str = "".join(block.get("text", "") for block in blocks if block.get("type") == "text")
        self.is_error: bool = bool(message.get("is_error", False))
        self.details: Any = message.get("details")
        # Once the run's events are over: the call's figures from the stored times (``sealed_ms``, ``headroom_ms``,
        # ``seal_to_start_ms``, ``run_ms``, ``overlap_ms``; ``None`` where a time is unknown).
        self.figures: Optional[dict[str, Any]] = None

    def to_dict(self) -> dict[str, Any]:
        """The result as plain data."""
        return {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "content": self.content,
            "is_error": self.is_error,
            "details": self.details,
        }

    def __repr__(self) -> str:
        return f"ToolResult({self.tool_call_id!r}, {self.tool_name!r}, is_error={self.is_error})"

"""``Answer``: a call's result as the engine stores it, given by a framework's face rather than read from a value."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Answer:
    """The stored result of a call: its text, whether it is an error, and details kept beside it."""

    content: str
    is_error: bool = False
    details: Any = field(default=None)

    def to_json(self) -> str:
        """The JSON text the engine's host layer reads (``ToolAnswer``)."""
        return json.dumps({"content": self.content, "is_error": self.is_error, "details": self.details}, default=str)


def error(message: str) -> Answer:
    """An error result with ``message``."""
    return Answer(content=message, is_error=True)


def stored_text(message: dict[str, Any]) -> str:
    """The text of a stored tool result (its text blocks, one per line)."""
    return "\n".join(block.get("text", "") for block in message.get("content") or [] if isinstance(block, dict))


def raised(exception: BaseException) -> Answer:
    """The error result of a tool that raised ``exception``: its type and message."""
    return error(f"{type(exception).__name__}: {exception}")

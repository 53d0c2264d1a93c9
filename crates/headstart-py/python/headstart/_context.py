"""``ToolContext``: what a running call's body may ask about itself."""

from __future__ import annotations

import json
from typing import Any, Optional

__all__ = ["ToolContext"]


class ToolContext:
    """The context of one tool call: its id, its session's id, its idempotency key (stable across attempts and
    workers: pass it to the service the tool calls), partial results, and whether it was cancelled."""

    def __init__(self, call_id: str, session_id: Optional[str], idempotency_key: str, updates: Any) -> None:
        self.call_id = call_id
        self.session_id = session_id
        self.idempotency_key = idempotency_key
        self._updates = updates
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        """True once the engine cancelled the call (the run was cancelled, or the call timed out)."""
        return self._cancelled

    async def update(self, partial: Any) -> None:
        """Reports a partial result (a string, or anything JSON-serialisable) as a ``tool_execution_update``."""
        if isinstance(partial, str):
            self._updates.send(partial)
        else:
            text = json.dumps(partial)
            self._updates.send(text, text)

    def __repr__(self) -> str:
        return f"<headstart.ToolContext call_id={self.call_id!r} session_id={self.session_id!r}>"

"""Where a tool call's streamed JSON arguments are whole: the top-level object has closed.

Read a piece at a time (each piece costs its own length), by the rule the engine's Chat Completions parser seals a
call by (contract §2.15(a)): the top-level object has closed and only whitespace follows. Arguments that do not
begin with ``{`` never complete this way."""

from __future__ import annotations

from typing import Optional

_SPACE = frozenset(" \n\r\t")


class ObjectEnd:
    """The state of one call's streamed arguments."""

    __slots__ = ("_depth", "_in_string", "_escaped", "_object", "closed", "trailing")

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._escaped = False
        # None before the first character that is not whitespace; then whether it was `{`.
        self._object: Optional[bool] = None
        self.closed = False
        """The top-level object has closed."""
        self.trailing = False
        """Something other than whitespace came after it (no valid arguments do that)."""

    @property
    def whole(self) -> bool:
        """The arguments are one whole JSON object, and nothing follows it."""
        return self.closed and not self.trailing

    def feed(self, piece: str) -> None:
        """Reads the next piece of the arguments' text."""
        for char in piece:
            if self.closed:
                if char not in _SPACE:
                    self.trailing = True
                continue
            if self._object is None:
                if char in _SPACE:
                    continue
                self._object = char == "{"
            if not self._object:
                return
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._in_string = False
            elif char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
            elif char in "}]":
                self._depth -= 1
                if self._depth == 0:
                    self.closed = True

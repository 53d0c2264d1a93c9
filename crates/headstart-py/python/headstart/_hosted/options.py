"""The options every framework face reads the same way."""

from __future__ import annotations

from typing import Iterable


def tool_names(given: Iterable[str], tools: Iterable[str], option: str) -> frozenset[str]:
    """The tool names an option (``early``, ``idempotent``) gives: a ``TypeError`` for a string in place of a list,
    a ``ValueError`` naming one that is not among ``tools``."""
    if isinstance(given, str):
        raise TypeError(f"{option} must be a list of tool names, not the string {given!r}")
    known = list(tools)
    names = frozenset(given)
    for name in sorted(names):
        if name not in known:
            raise ValueError(f"{option} names {name!r}, which is not one of the tools ({', '.join(known) or 'none'})")
    return names

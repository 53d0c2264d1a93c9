"""``require``: a framework face's import of its framework, failing with what to install."""

from __future__ import annotations

import importlib


def require(module: str, face: str, install: str) -> None:
    """Imports ``module``, or raises ``ImportError`` naming the ``face`` that needs it and how to ``install`` it."""
    try:
        importlib.import_module(module)
    except ImportError as missing:
        raise ImportError(f"{face} needs {install}") from missing

"""``ephemeral_store``: the store of chats given none."""

from __future__ import annotations

import atexit
import os
import tempfile
import uuid
from typing import Optional

_ephemeral: Optional[str] = None


def ephemeral_store() -> str:
    """One SQLite file for the process, in memory where the machine has a memory file system (``/dev/shm``),
    removed when the process exits. (SQLite's own ``:memory:`` cannot hold the store: it needs a write-ahead log.)"""
    global _ephemeral
    if _ephemeral is None:
        folder = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        path = os.path.join(folder, f"headstart-{os.getpid()}-{uuid.uuid4()}.db")
        _ephemeral = path

        def remove() -> None:
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.remove(path + suffix)
                except OSError:
                    pass

        atexit.register(remove)
    return _ephemeral

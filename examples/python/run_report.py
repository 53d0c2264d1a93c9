"""What the framework examples print: when each tool starts, and at the end the time early execution saved and
where the transcript is."""

from __future__ import annotations

import os
import time

import headstart

STARTED = time.perf_counter()


def stamp(what: str) -> None:
    """``what`` with the milliseconds since the example started."""
    print(f"[{what} +{(time.perf_counter() - STARTED) * 1000:.0f} ms]", flush=True)


def report(db: str, session: str) -> None:
    """The time early execution saved on the session, against end-of-stream batching; where its transcript is."""
    saved = headstart.savings(db, session)
    seconds, percent = saved["saved_ms"] / 1000, saved["saved_percent"]
    print(f"{saved['calls']} calls stored; early execution saved {seconds:.2f} s ({percent:.0f}%)")
    print(f"Transcript: {os.path.abspath(db)}, session {session}")
    print(f"Read it with: headstart inspect {db} --session {session}")

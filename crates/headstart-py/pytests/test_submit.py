"""`headstart.submit`: sessions put in a fleet's queue from Python (issue 44), as `headstart submit` does: each waits
in its queue, pending, with its prompt and settings; a bad queue name, model or count is refused before anything is
written."""

from __future__ import annotations

from pathlib import Path

import pytest

import headstart


def test_submitted_sessions_wait_in_their_queue(tmp_path: Path) -> None:
    db = tmp_path / "fleet.db"
    ids = headstart.submit(db, "summarize the notes", queue="gpu-batch", model="m2", count=2)
    plain = headstart.submit(str(db), "and again")
    assert len(ids) == 2 and len(plain) == 1 and len(set(ids + plain)) == 3
    sessions = {entry["id"]: entry for entry in headstart.inspect(db)["sessions"]}
    for session in ids:
        entry = sessions[session]
        assert entry["state"] == "pending"
        assert entry["settings"]["queue"] == "gpu-batch"
        assert entry["settings"]["model"] == "m2"
        assert entry["attempts"] == 0
        assert entry["messages"][0]["message"]["text"] == "summarize the notes"
    assert "queue" not in sessions[plain[0]]["settings"], "the default queue is stored as none"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"queue": ""}, "must not be empty"),
        ({"queue": "two words"}, "whitespace or a control character"),
        ({"queue": "q" * 65}, "at most 64 bytes"),
        ({"model": "  "}, "model must name a model"),
        ({"count": 0}, "count must be between 1 and 10000"),
    ],
)
def test_bad_submissions_are_refused_before_anything_is_written(
    tmp_path: Path, arguments: dict[str, object], message: str
) -> None:
    db = tmp_path / "never.db"
    with pytest.raises(ValueError, match=message):
        headstart.submit(db, "go", **arguments)  # type: ignore[arg-type]
    assert not db.exists()

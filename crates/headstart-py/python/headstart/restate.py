"""headstart on Restate from Python: submit a prompt as a new session's turn to a Restate server running headstart
deployments (``headstart restate serve``, docs/restate.md), wait for the turn's report, and read what the server knows
of the sessions' turns. The transcript itself is in the deployments' store, the record: read it with
``headstart.inspect(store, session)``.

Only the standard library: the server speaks plain HTTP and JSON.

    import headstart.restate as restate

    submitted = restate.submit("http://127.0.0.1:8080", "what changed in the notes?")
    report = restate.wait("http://127.0.0.1:8080", submitted.invocation)   # {"session", "stop", "recoveries"}
    turns = restate.turns("http://127.0.0.1:9070", submitted.session)     # [{"invocation", "status", ...}]
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any, Optional

from ._native import HeadstartError

__all__ = ["NotRegistered", "RestateError", "Submitted", "SubmittedTwice", "new_session_id", "submit", "turns", "wait"]

#: How long one request may take when the caller gives no ``timeout`` (a turn's report is awaited as long as asked).
REQUEST_TIMEOUT = 30.0

#: The most bytes of an answer read: the server's answers are small; a bigger one is not the server.
MAX_ANSWER = 16 * 1024 * 1024


class RestateError(HeadstartError):
    """A request to the Restate server failed: nothing answers, it refused, or its answer could not be read."""


class NotRegistered(RestateError):
    """The server has no ``Session`` service: no headstart deployment was registered with it."""


class SubmittedTwice(RestateError):
    """This session's turn was already submitted under the same idempotency key; attach to ``invocation``."""

    def __init__(self, session: str, invocation: str) -> None:
        super().__init__(
            f"session {session} was already submitted (its turn is {invocation}); "
            "attach to it instead of submitting again"
        )
        self.session = session
        self.invocation = invocation


@dataclass(frozen=True)
class Submitted:
    """A submitted turn: its session (the ``Session`` object's key) and its invocation id (``inv_…``)."""

    session: str
    invocation: str


def new_session_id() -> str:
    """A new session id: a UUIDv7 (time-ordered), as ``headstart submit --restate`` and the stores make theirs."""
    millis = time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))


def submit(
    ingress: str,
    prompt: str,
    *,
    session: Optional[str] = None,
    model: Optional[str] = None,
    system: Optional[str] = None,
    timeout: float = REQUEST_TIMEOUT,
) -> Submitted:
    """Sends ``prompt`` as the turn of a new session (``session``, or a new id) to the ``Session`` object at the
    server's ingress (``http://127.0.0.1:8080``), with the session id as its idempotency key: submitting the same
    session again raises ``SubmittedTwice`` instead of running a second turn. ``model`` and ``system`` replace the
    deployment's for this session. Returns at once; ``wait`` waits for the turn."""
    if not isinstance(prompt, str) or not prompt:
        raise ValueError("submit needs a non-empty prompt")
    if model is not None and not model.strip():
        raise ValueError("model needs a model name")
    session = session if session is not None else new_session_id()
    if not session:
        raise ValueError("session needs an id")
    body: dict[str, Any] = {"prompt": prompt}
    if model is not None:
        body["model"] = model
    if system is not None:
        body["system"] = system
    url = f"{_base(ingress)}/Session/{_segment(session)}/turn/send"
    answer = _request("POST", url, body, {"idempotency-key": session}, "submit a turn", timeout)
    invocation = answer.get("invocationId") if isinstance(answer, dict) else None
    if not isinstance(invocation, str):
        raise RestateError(f"Restate's answer to submit a turn has no invocation id: {str(answer)[:500]}")
    if answer.get("status") == "PreviouslyAccepted":
        raise SubmittedTwice(session, invocation)
    return Submitted(session=session, invocation=invocation)


def wait(ingress: str, invocation: str, *, timeout: Optional[float] = None) -> dict[str, Any]:
    """Waits for the turn ``invocation`` to end and returns its report: ``{"session", "stop", "recoveries"}``
    (``stop`` as the agent loop's stop, e.g. ``{"reason": "completed"}``). ``timeout``: seconds, ``None`` for as long
    as the turn takes."""
    url = f"{_base(ingress)}/restate/invocation/{_segment(invocation)}/attach"
    report = _request("GET", url, None, {}, "wait for a turn", timeout)
    if not isinstance(report, dict):
        raise RestateError(f"Restate's answer to wait for a turn is not a report: {str(report)[:500]}")
    return report


def turns(admin: str, session: Optional[str] = None, *, timeout: float = REQUEST_TIMEOUT) -> list[dict[str, Any]]:
    """The turns the server whose admin API is at ``admin`` (``http://127.0.0.1:9070``) knows of ``session`` (of
    every session when ``None``), oldest first, as ``headstart inspect --restate --json`` shows them: ``session``,
    ``invocation``, ``status`` (``pending``, ``running``, ``backing-off``, ``completed``, …), ``retries``,
    ``last_failure``, ``created_at``. A server keeps a finished turn as long as its idempotency key (a day by
    default)."""
    query = (
        "SELECT id, target_service_key, status, retry_count, last_failure, created_at "
        "FROM sys_invocation WHERE target_service_name = 'Session' AND target_handler_name = 'turn'"
    )
    if session is not None:
        query += " AND target_service_key = '" + session.replace("'", "''") + "'"
    query += " ORDER BY created_at"
    answer = _request(
        "POST", f"{_base(admin)}/query", {"query": query}, {"accept": "application/json"}, "list the turns", timeout
    )
    rows = answer.get("rows") if isinstance(answer, dict) else None
    if not isinstance(rows, list):
        raise RestateError(f"Restate's answer to list the turns has no rows: {str(answer)[:500]}")
    listed = []
    for row in rows:
        if not isinstance(row, dict) or not row.get("id") or not row.get("target_service_key"):
            continue
        listed.append(
            {
                "session": row["target_service_key"],
                "invocation": row["id"],
                "status": row.get("status") or "unknown",
                "retries": row.get("retry_count") or 0,
                "last_failure": row.get("last_failure") or None,
                "created_at": row.get("created_at"),
            }
        )
    return listed


def _base(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    return url.rstrip("/")


def _segment(text: str) -> str:
    return urllib.parse.quote(text, safe="-_.~")


def _request(
    method: str, url: str, body: Optional[dict[str, Any]], headers: dict[str, str], what: str, timeout: Optional[float]
) -> Any:
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers = {**headers, "content-type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read(MAX_ANSWER + 1)
    except urllib.error.HTTPError as error:
        text = error.read(2_000).decode("utf-8", "replace")
        if error.code == 404 and "/Session/" in url and "ervice" in text:
            raise NotRegistered(
                f"the Restate server at {url.split('/Session/')[0]} has no `Session` service: register a deployment "
                "first (`headstart restate register --admin ADMIN_URL DEPLOYMENT_URL`)"
            ) from None
        raise RestateError(f"Restate answered {error.code} to {what}: {text}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise RestateError(
            f"no Restate server answers at {url}: {reason} (start `restate-server`, or check the address)"
        ) from None
    if len(raw) > MAX_ANSWER:
        raise RestateError(f"Restate's answer to {what} is over {MAX_ANSWER} bytes")
    try:
        return json.loads(raw)
    except ValueError as error:
        raise RestateError(f"Restate's answer to {what} could not be read: {error}: {raw[:500]!r}") from None

"""``headstart.restate``: a prompt submitted from Python to a real ``restate-server`` on loopback running a headstart
deployment (``headstart restate serve`` on the Restate tests' scenario: an early ``lookup``, a sync ``write``, the
answer), its report waited for, its turn read from the server's admin API and its transcript from the store.

The server binary comes from ``RESTATE_SERVER`` (``.ci/run`` sets it), the ``headstart`` binary from
``HEADSTART_CLI`` (the Rust test that runs this suite sets it when cargo built the CLI). Without them the test is
skipped, or fails under ``HEADSTART_REQUIRE_RESTATE=1`` (CI). Every process it starts is killed when it ends."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

import headstart
import headstart.restate as restate

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "crates/headstart-cli/tests/restate/early.json"
START_WITHIN = 60.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _needed(name: str) -> Path:
    found = os.environ.get(name)
    if found and Path(found).is_file():
        return Path(found)
    why = f"{name} does not name a file ({found!r})"
    if os.environ.get("HEADSTART_REQUIRE_RESTATE") == "1":
        pytest.fail(f"the Restate test cannot run, and HEADSTART_REQUIRE_RESTATE=1 requires it: {why}")
    pytest.skip(f"the Restate test cannot run: {why}")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


class Stack:
    """A server and one registered deployment, on free loopback ports."""

    def __init__(self, ingress: str, admin: str, store: Path) -> None:
        self.ingress = ingress
        self.admin = admin
        self.store = store


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    server_binary = _needed("RESTATE_SERVER")
    cli = _needed("HEADSTART_CLI")
    ingress, admin, node, deployment = (_free_port() for _ in range(4))
    environment = {
        **os.environ,
        "RESTATE_INGRESS__BIND_ADDRESS": f"127.0.0.1:{ingress}",
        "RESTATE_ADMIN__BIND_ADDRESS": f"127.0.0.1:{admin}",
        "RESTATE_BIND_ADDRESS": f"127.0.0.1:{node}",
        "RESTATE_ADVERTISED_ADDRESS": f"http://127.0.0.1:{node}",
        "RESTATE_BASE_DIR": str(tmp_path / "restate-data"),
        "RESTATE_DEFAULT_NUM_PARTITIONS": "2",
        "DO_NOT_TRACK": "1",
    }
    children: list[subprocess.Popen[bytes]] = []
    try:
        children.append(
            subprocess.Popen(
                [str(server_binary), "--no-logo"],
                env=environment,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        deadline = time.monotonic() + START_WITHIN
        while not (_answers(f"http://127.0.0.1:{admin}/health") and _answers(f"http://127.0.0.1:{ingress}/restate/health")):
            assert time.monotonic() < deadline, "restate-server did not answer within 60 s"
            time.sleep(0.05)
        store = tmp_path / "agents.db"
        serving = subprocess.Popen(
            [
                str(cli), "restate", "serve", "--addr", f"127.0.0.1:{deployment}", "--store", str(store),
                "--scenario", str(SCENARIO), "--register", f"http://127.0.0.1:{admin}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        children.append(serving)
        assert serving.stderr is not None
        lines = []
        for line in serving.stderr:
            lines.append(line.decode(errors="replace"))
            if line.startswith(b"registered http://"):
                break
        else:
            pytest.fail(f"the deployment did not register: {''.join(lines)}")
        yield Stack(f"http://127.0.0.1:{ingress}", f"http://127.0.0.1:{admin}", store)
    finally:
        for child in children:
            child.kill()
            child.wait()


def test_a_prompt_submitted_from_python_runs_once_on_restate_and_is_read_back(stack: Stack) -> None:
    submitted = restate.submit(stack.ingress, "look it up and write it down")
    assert submitted.invocation.startswith("inv_")
    report = restate.wait(stack.ingress, submitted.invocation, timeout=60)
    assert report == {"session": submitted.session, "stop": {"reason": "completed"}, "recoveries": 0}

    # The server's side: one turn, completed, on its first attempt.
    turns = restate.turns(stack.admin, submitted.session)
    assert [(turn["invocation"], turn["status"], turn["retries"]) for turn in turns] == [
        (submitted.invocation, "completed", 0)
    ]
    assert submitted.session in {turn["session"] for turn in restate.turns(stack.admin)}

    # The record: the store the deployment wrote, read as any other.
    [session] = headstart.inspect(stack.store, submitted.session)["sessions"]
    assert session["state"] == "completed"
    assert sorted(run["call_id"] for run in session["tool_runs"]) == ["c_lookup", "c_write"]
    assert all(run["state"] == "finished" for run in session["tool_runs"])
    lookup = next(call for call in session["figures"]["calls"] if call["id"] == "c_lookup")
    assert lookup["headroom_ms"] >= 800, lookup

    # Submitted again under the same key: refused, naming the first turn; nothing runs again.
    with pytest.raises(restate.SubmittedTwice) as twice:
        restate.submit(stack.ingress, "look it up and write it down", session=submitted.session)
    assert twice.value.invocation == submitted.invocation
    assert isinstance(twice.value, headstart.HeadstartError)
    assert len(restate.turns(stack.admin, submitted.session)) == 1


def test_a_dead_server_and_bad_input_are_clear_errors() -> None:
    port = _free_port()
    with pytest.raises(restate.RestateError, match=f"no Restate server answers at http://127.0.0.1:{port}"):
        restate.submit(f"http://127.0.0.1:{port}", "hello", timeout=5)
    with pytest.raises(restate.RestateError, match="no Restate server answers"):
        restate.turns(f"http://127.0.0.1:{port}", timeout=5)
    with pytest.raises(ValueError, match="non-empty prompt"):
        restate.submit("http://127.0.0.1:8080", "")
    with pytest.raises(ValueError, match="not an http"):
        restate.submit("127.0.0.1:8080", "hello")


def test_session_ids_are_time_ordered_uuid7() -> None:
    first = restate.new_session_id()
    time.sleep(0.002)
    second = restate.new_session_id()
    assert first < second
    assert first[14] == "7" and second[14] == "7"
    assert first[19] in "89ab"

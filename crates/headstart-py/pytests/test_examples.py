"""The examples under examples/python run: the SDK agents against the replay server, the demo on its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import replay_server

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "python"


def run_example(name: str, cwd: Path, *arguments: str, without: tuple[str, ...] = (), **environment: str) -> str:
    """The example's output, run in ``cwd`` with ``environment`` added to ours and the ``without`` names left out."""
    env = {key: value for key, value in {**os.environ, **environment}.items() if key not in without}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.timeout(150)
def test_the_openai_example_runs_against_a_chat_completions_server(tmp_path: Path) -> None:
    server = replay_server("openai_chat__streaming_gpt41_parallel_model.yaml")
    out = run_example("openai_agent.py", tmp_path, "--base-url", server.url + "/v1", OPENAI_API_KEY="test-key")
    assert "[start alpha" in out and "(stopped:" in out


@pytest.mark.timeout(150)
def test_the_anthropic_example_runs_against_a_messages_server(tmp_path: Path) -> None:
    server = replay_server("anthropic__multi_turn_streaming_tools.yaml")
    out = run_example("anthropic_agent.py", tmp_path, "--base-url", server.url, ANTHROPIC_API_KEY="test-key")
    assert "[start add" in out and "(stopped: completed)" in out


@pytest.mark.timeout(150)
def test_the_demo_example_prints_the_time_saved(tmp_path: Path) -> None:
    out = run_example("demo.py", tmp_path, "--db", str(tmp_path / "demo.db"))
    assert "early execution saved" in out and "(completed)" in out
    assert "start lookup_crate(tokio)" in out, "a call is shown by its first argument, as headstart demo shows it"


def search_then_note() -> list[Any]:
    """A response that calls the examples' early `search_docs`, then `save_note` with a long argument; the answer."""
    from chat_replies import Call, Reply

    note = ['{"title": "cancel", "text": "'] + ["Dropping the run cancels it. "] * 12 + ['"}']
    return [
        Reply(calls=[Call("call_1", "search_docs", ['{"query": ', '"cancel"}']), Call("call_2", "save_note", note)], finish="tool_calls"),
        Reply(text=["Dropping ", "the run ", "cancels it."]),
    ]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("example", ["langchain_agent.py", "agents_sdk_agent.py"])
def test_the_framework_examples_run_against_a_chat_completions_server(example: str, tmp_path: Path) -> None:
    from chat_replies import serve

    server = serve(search_then_note(), 40.0)
    out = run_example(example, tmp_path, "--base-url", server.url + "/v1", "--db", str(tmp_path / "agent.db"), OPENAI_API_KEY="test-key")
    assert "[start search_docs(cancel)" in out and "[start save_note(cancel)" in out and "cancels it." in out, out
    assert "2 calls stored" in out, out
    assert "simulated model" not in out, "a --base-url is used as given"


@pytest.mark.timeout(150)
@pytest.mark.parametrize("example", ["langchain_agent.py", "agents_sdk_agent.py"])
def test_the_framework_examples_run_on_the_simulated_model_with_no_key(example: str, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    out = run_example(example, tmp_path, "--db", str(db), without=("OPENAI_API_KEY", "OPENAI_BASE_URL"))
    assert "using the simulated model at http://127.0.0.1:" in out, out
    assert "[start search_docs(cancel)" in out and "[start save_note(cancel)" in out, out
    assert "Dropping the run cancels it." in out, out
    assert "2 calls stored; early execution saved " in out, out
    # The lead itself is asserted in events by test_langchain.py and test_agents.py, on the replay server.
    assert f"Transcript: {db}, session " in out and f"headstart inspect {db} --session " in out, out

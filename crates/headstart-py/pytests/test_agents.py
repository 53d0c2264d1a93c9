"""``headstart.agents`` inside the OpenAI Agents SDK's own runner, through the real openai-agents with its Chat
Completions model against the replay server: the lead of an early call over the stream's end in ``Runner.run``,
``run_streamed`` and ``run_sync`` and after a handoff; a differential of generated responses against the plain
runner; the SDK's rules (approval, guardrails, a tool the step does not offer); the bad input ``with_headstart``
refuses."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any, Optional

import pytest
from agents import (
    Agent,
    FunctionTool,
    GuardrailFunctionOutput,
    OpenAIChatCompletionsModel,
    RunHooks,
    Runner,
    SQLiteSession,
    TracingProcessor,
    function_tool,
    input_guardrail,
    output_guardrail,
    set_trace_processors,
    set_tracing_disabled,
)
from agents import handoff as handoff_to
from openai import AsyncOpenAI

import crashes
import headstart
from chat_replies import Call, Reply, Runs, serve, started
from headstart.agents import headstart_session_id, resume, with_headstart

set_tracing_disabled(True)

PACE_MS = 40.0
EARLY = ["read_file", "lookup"]
SCRIPTS = 100


def scripted_tools(runs: Runs, *, read_enabled: bool = True) -> list[FunctionTool]:
    """``read_file`` (async), ``lookup`` (sync; raises for n == 13, which the SDK's error function words),
    ``write_file`` (sync, never early), ``delete_file`` (needs approval)."""

    @function_tool(is_enabled=read_enabled)
    async def read_file(path: str) -> str:
        """Reads a file."""
        await asyncio.to_thread(started, runs, "read_file", {"path": path})
        return f"contents of {path}"

    @function_tool
    def lookup(key: str, n: int) -> str:
        """Looks a key up."""
        started(runs, "lookup", {"key": key, "n": n})
        if n == 13:
            raise ValueError(f"no luck for {key}")
        return f"{key} #{n}"

    @function_tool
    def write_file(path: str, text: str) -> str:
        """Writes a file."""
        started(runs, "write_file", {"path": path, "text": text})
        return f"wrote {len(text)} characters to {path}"

    @function_tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Deletes a file (a person approves it first)."""
        started(runs, "delete_file", {"path": path})
        return f"deleted {path}"

    return [read_file, lookup, write_file, delete_file]


def model(server: Any) -> OpenAIChatCompletionsModel:
    client = AsyncOpenAI(base_url=server.url + "/v1", api_key="scripted", max_retries=0)
    return OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)


def scripted_agent(server: Any, runs: Runs, *, wrapped: bool, store: Optional[str] = None, **options: Any) -> Agent[Any]:
    agent: Agent[Any] = Agent(name="scripted", instructions="Do it.", model=model(server), tools=scripted_tools(runs, **options))
    return with_headstart(agent, store=store, early=EARLY, durability="normal") if wrapped else agent


async def run(agent: Agent[Any], mode: str, max_turns: int = 10) -> Any:
    """The run's result, reached as ``mode`` says."""
    if mode == "run":
        return await Runner.run(agent, "go", max_turns=max_turns)
    if mode == "run_sync":
        return await asyncio.to_thread(Runner.run_sync, agent, "go", max_turns=max_turns)
    result = Runner.run_streamed(agent, "go", max_turns=max_turns)
    async for _ in result.stream_events():
        pass
    return result


def read_then_write() -> list[Reply]:
    long = ['"'] + ["word " for _ in range(20)] + ['"}']
    first = Reply(
        calls=[Call("call_read", "read_file", ['{"pa', 'th": ', '"a"}']), Call("call_write", "write_file", ['{"path": "b", "text": '] + long)],
        finish="tool_calls",
    )
    return [first, Reply(text=["All ", "done."])]


@pytest.mark.parametrize("mode", ["run", "run_streamed", "run_sync"])
def test_an_early_call_starts_while_the_model_streams_in_every_way_of_running(mode: str, db: str) -> None:
    async def main() -> tuple[Any, Any, Runs, Runs, Any]:
        plain_server, server = serve(read_then_write(), PACE_MS), serve(read_then_write(), PACE_MS)
        plain_runs, runs = Runs(server=plain_server.url), Runs(server=server.url)
        plain = await run(scripted_agent(plain_server, plain_runs, wrapped=False), "run_streamed")
        agent = scripted_agent(server, runs, wrapped=True, store=db)
        result = await run(agent, mode)
        assert result.final_output == plain.final_output == "All done."
        assert headstart.inspect(db, headstart_session_id(agent))["sessions"][0]["tool_runs"]
        return plain_server, server, plain_runs, runs, result

    plain_server, server, plain_runs, runs, _ = asyncio.run(main())
    lead = server.lead("/started/read_file", 0)
    assert lead is not None
    ms, events_after = lead
    assert events_after >= 15, f"read_file started only {events_after} events ({ms:.0f} ms) before the stream ended"
    plain_lead = plain_server.lead("/started/read_file", 0)
    assert plain_lead is not None and plain_lead[1] == 0, "without headstart, the runner runs it after the stream"
    assert sorted(runs.started, key=repr) == sorted(plain_runs.started, key=repr)
    print(f"{mode}: read_file started {ms:.0f} ms, {events_after} events before the stream's end; plain {-plain_lead[0]:.0f} ms after it")


def test_an_agent_handed_off_to_starts_its_early_calls_too(db: str) -> None:
    long = ['"'] + ["word " for _ in range(12)] + ['"}']
    replies = [
        Reply(calls=[Call("call_h", "transfer_to_reader", ["{}"])], finish="tool_calls"),
        Reply(calls=[Call("call_read", "read_file", ['{"path": "a"}']), Call("call_write", "write_file", ['{"path": "b", "text": '] + long)], finish="tool_calls"),
        Reply(text=["Read."]),
    ]
    server = serve(replies, PACE_MS)
    runs = Runs(server=server.url)
    reader: Agent[Any] = Agent(name="reader", instructions="Read.", model=model(server), tools=scripted_tools(runs))
    triage: Agent[Any] = Agent(name="triage", instructions="Hand off.", model=model(server), handoffs=[reader])
    result = asyncio.run(Runner.run(with_headstart(triage, store=db, early=EARLY), "go"))
    assert result.final_output == "Read." and result.last_agent.name == "reader"
    lead = server.lead("/started/read_file", 1)
    assert lead is not None and lead[1] >= 8, f"read_file after the handoff led the stream's end by {lead}"


def arguments(rng: random.Random, tool: str) -> str:
    shapes: dict[str, dict[str, Any]] = {
        "read_file": {"path": f"f{rng.randint(0, 9)}.txt"},
        "lookup": {"key": rng.choice(["a", "b"]), "n": rng.choice([1, 2, 13])},
        "write_file": {"path": "out.txt", "text": " ".join(["word"] * rng.randint(1, 8))},
        "delete_file": {"path": "old.txt"},
    }
    valid = shapes[tool]
    kind = rng.random()
    if kind < 0.15 and tool == "lookup":
        valid["n"] = "many"
    elif kind < 0.25:
        valid.pop(next(iter(valid)))
    elif kind < 0.3:
        return json.dumps(valid)[:-1]  # not JSON: the SDK's invoker refuses it
    return json.dumps(valid)


def script(seed: int) -> list[Reply]:
    rng = random.Random(seed)
    calls = []
    for number in range(rng.choice([0, 1, 1, 2, 2, 3])):
        tool = rng.choice(["read_file", "lookup", "write_file", "read_file", "lookup", "delete_file"])
        text = arguments(rng, tool)
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 4))))
        calls.append(Call(f"call_{seed}_{number}", tool, [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]))
    first = Reply(text=rng.choice([[], ["Let me ", "look."]]), calls=calls, finish="tool_calls" if calls else "stop")
    return [first, Reply(text=["Done."])] if calls else [first]


def shown(result: Any) -> list[Any]:
    """What the app sees of a run: its items (kind, and the call, output or text each holds), its final output and
    the calls it paused on for approval."""
    view: list[Any] = []
    for item in result.new_items:
        raw = item.raw_item
        if item.type == "tool_call_item":
            view.append(("call", raw.call_id, raw.name, raw.arguments))
        elif item.type == "tool_call_output_item":
            view.append(("output", raw["call_id"], item.output))
        else:
            view.append((item.type, getattr(item, "output", None) or str(getattr(raw, "content", ""))[:0]))
    interruptions = [(i.raw_item.call_id, i.raw_item.name) for i in getattr(result, "interruptions", None) or []]
    return [view, result.final_output, interruptions]


def test_the_runner_shows_and_runs_what_the_plain_runner_does(tmp_path: Path) -> None:
    async def once(seed: int, wrapped: bool) -> tuple[Any, Runs, Optional[tuple[str, str]]]:
        runs = Runs()
        db = str(tmp_path / f"{seed}.db")
        agent = scripted_agent(serve(script(seed)), runs, wrapped=wrapped, store=db if wrapped else None)
        try:
            # Every fifth script stops at max_turns=1, after its first turn's tools.
            result = await run(agent, "run" if wrapped and seed % 2 else "run_streamed", 1 if seed % 5 == 0 else 10)
        except Exception as error:  # noqa: BLE001 - both runners must fail alike
            return ("raised", type(error).__name__, str(error)), runs, None
        return shown(result), runs, (db, headstart_session_id(agent)) if wrapped else None

    early_runs = paused_with_early = stopped = 0
    for seed in range(SCRIPTS):
        plain, plain_runs, _ = asyncio.run(once(seed, False))
        seen, runs, stored = asyncio.run(once(seed, True))
        stopped += seen[0] == "raised"
        paused_with_early += seen[0] != "raised" and bool(seen[2]) and any(name in EARLY for name, _ in runs.started)
        context = f"script {seed}: {script(seed)}"
        assert seen == plain, context
        assert sorted(runs.started, key=repr) == sorted(plain_runs.started, key=repr), context
        if stored is not None:
            messages = headstart.inspect(*stored)["sessions"][0]["messages"]
            results = {m["message"]["tool_call_id"]: m["message"] for m in messages if m["message"]["role"] == "tool_result"}
            for entry in seen[0]:
                if entry[0] == "output":
                    text = "".join(block.get("text", "") for block in results[entry[1]]["content"])
                    if not text.startswith("invalid arguments for tool"):
                        # Arguments that are not a JSON object keep the engine's refusal (the README's list of
                        # differences); every other output is the one the run shows.
                        assert text == entry[2], context
        early_runs += sum(1 for name, _ in runs.started if name in EARLY)
    print(f"{SCRIPTS} scripts alike; {early_runs} runs of early tools; {paused_with_early} paused for approval beside an early run; {stopped} stopped by max_turns")
    assert early_runs >= SCRIPTS // 2 and paused_with_early > 0 and stopped > 0


def test_a_tool_the_step_does_not_offer_never_starts() -> None:
    async def main(wrapped: bool) -> tuple[Any, Runs]:
        runs = Runs()
        agent = scripted_agent(serve(read_then_write()), runs, wrapped=wrapped, read_enabled=False)
        try:
            # The plain runner streams too: the stand-in speaks only SSE.
            await run(agent, "run" if wrapped else "run_streamed")
        except Exception as error:  # noqa: BLE001 - the SDK refuses a call of a tool it did not offer
            return type(error).__name__, runs
        return None, runs

    plain, plain_runs = asyncio.run(main(False))
    raised, runs = asyncio.run(main(True))
    assert raised == plain == "ModelBehaviorError"
    assert runs.started == plain_runs.started
    assert "read_file" not in [name for name, _ in runs.started]


class Recorder(TracingProcessor):
    """The spans a run ends, by kind and name."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str]] = []

    def on_trace_start(self, trace: Any) -> None:
        pass

    def on_trace_end(self, trace: Any) -> None:
        pass

    def on_span_start(self, span: Any) -> None:
        pass

    def on_span_end(self, span: Any) -> None:
        data = span.span_data
        self.spans.append((data.type, str(getattr(data, "name", ""))))

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


class Hooks(RunHooks[Any]):
    """The lifecycle callbacks a run makes, in order."""

    def __init__(self) -> None:
        self.heard: list[str] = []

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
        self.heard.append("llm_start")

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.heard.append("llm_end")

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        self.heard.append(f"tool_start {tool.name}")

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.heard.append(f"tool_end {tool.name} {result}")


@output_guardrail
async def checked(context: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="checked", tripwire_triggered=False)


@pytest.mark.parametrize("behavior", ["run_llm_again", "stop_on_first_tool"])
def test_hooks_guardrails_tool_use_behavior_sessions_and_tracing_see_what_they_see_without_headstart(behavior: str, tmp_path: Path) -> None:
    def once(wrapped: bool) -> tuple[Any, ...]:
        runs, hooks, recorder = Runs(), Hooks(), Recorder()
        session = SQLiteSession("chat", str(tmp_path / f"session-{wrapped}.db"))
        agent: Agent[Any] = Agent(
            name="scripted",
            model=model(serve(read_then_write())),
            tools=scripted_tools(runs),
            tool_use_behavior=behavior,  # type: ignore[arg-type]
            input_guardrails=[before],
            output_guardrails=[checked],
        )
        if wrapped:
            agent = with_headstart(agent, early=EARLY)
        set_tracing_disabled(False)
        set_trace_processors([recorder])
        try:

            async def go() -> Any:
                if wrapped:
                    return await Runner.run(agent, "go", hooks=hooks, session=session)
                streamed = Runner.run_streamed(agent, "go", hooks=hooks, session=session)
                async for _ in streamed.stream_events():
                    pass
                return streamed

            result = asyncio.run(go())
            items = asyncio.run(session.get_items())
        finally:
            set_trace_processors([])
            set_tracing_disabled(True)
        guardrails = [g.output.output_info for g in result.output_guardrail_results]
        kinds = [item.get("type", item.get("role")) for item in items]
        return result.final_output, sorted(hooks.heard), guardrails, kinds, sorted(recorder.spans), sorted(runs.started, key=repr)

    seen = once(True)
    assert seen[1] and seen[3] and seen[4], seen
    assert seen == once(False)


CRASHING = """
import asyncio, sys
from agents import Agent, Runner, function_tool, set_tracing_disabled
from crashes import EARLY, hanging_bodies
from headstart.agents import with_headstart
from test_agents import model

set_tracing_disabled(True)
server, db, session, marks = sys.argv[1:]

class Server:
    url = server

tools = [function_tool(body) for body in hanging_bodies(marks)]
agent = with_headstart(Agent(name="crashing", model=model(Server()), tools=tools), store=db, session_id=session, early=EARLY)
asyncio.run(Runner.run(agent, "go"))
"""


def test_resume_gives_each_call_of_a_killed_run_one_result_and_the_items_to_go_on_with(tmp_path: Path) -> None:
    db, session = str(tmp_path / "agent.db"), "agents-crash"
    server = serve([crashes.RESPONSE])

    def ready() -> bool:
        # Killed while fetch and lookup run, read_file's result stored.
        marked = (tmp_path / "fetch").exists() and (tmp_path / "lookup").exists()
        return marked and "call_read" in crashes.stored_results(db, session)

    crashes.kill_when_ready(CRASHING, [server.url, db, session, str(tmp_path)], ready)
    runs = Runs()
    tools = [function_tool(body) for body in crashes.recorded_bodies(runs)]
    items = asyncio.run(resume(db, session, tools=tools, policy="rerun_idempotent", idempotent=["fetch"]))
    assert runs.started == [("fetch", {"path": "b"})], "recovery runs the idempotent call again, once"
    outputs = {item["call_id"]: item["output"] for item in items if item.get("type") == "function_call_output"}
    assert [item["call_id"] for item in items if item.get("type") == "function_call"] == ["call_read", "call_fetch", "call_lookup"]
    assert outputs["call_read"] == "contents of a" and outputs["call_fetch"] == "fetched b"
    assert "interrupt" in outputs["call_lookup"], outputs

    # The run goes on from the items, on the same session; nothing runs again.
    agent: Agent[Any] = Agent(name="resumed", model=model(serve([Reply(text=["ok"])])), tools=tools)
    agent = with_headstart(agent, store=db, session_id=session, early=crashes.EARLY)
    result = asyncio.run(Runner.run(agent, items))
    assert result.final_output == "ok"
    assert runs.started == [("fetch", {"path": "b"})]
    with pytest.raises(ValueError, match="policy must be"):
        asyncio.run(resume(db, session, tools=tools, policy="retry"))


@input_guardrail
async def in_parallel(context: Any, agent: Any, input: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)


@input_guardrail(run_in_parallel=False)
async def before(context: Any, agent: Any, input: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)


def test_with_headstart_refuses_bad_input_naming_the_problem() -> None:
    server = type("S", (), {"url": "http://127.0.0.1:9"})()
    tools = scripted_tools(Runs())
    plain: Agent[Any] = Agent(name="a", model=model(server), tools=tools)
    approval = function_tool(lambda path: path, name_override="read_file", needs_approval=True)
    cases: list[tuple[Any, dict[str, Any], type[Exception], str]] = [
        ("an agent", {}, TypeError, "must be an agents.Agent"),
        (plain, {"early": "read_file"}, TypeError, "a list of tool names"),
        (plain, {"early": ["delete_all"]}, ValueError, "'delete_all', which is not one of"),
        (plain.clone(tools=[approval]), {"early": ["read_file"]}, ValueError, "needs approval"),
        (plain.clone(input_guardrails=[in_parallel]), {"early": ["read_file"]}, ValueError, "run_in_parallel=False"),
        (plain.clone(handoffs=[handoff_to(plain.clone(name="b"))]), {}, TypeError, "Handoff object"),
        (plain, {"store": "/nonexistent/dir/agent.db"}, ValueError, "cannot be opened"),
    ]
    for agent, options, error, says in cases:
        with pytest.raises(error, match=says):
            with_headstart(agent, **options)
    # A guardrail that runs before the model call leaves the tools free to start early.
    with_headstart(plain.clone(input_guardrails=[before]), early=["read_file"])
    with pytest.raises(TypeError, match="already wrapped"):
        with_headstart(with_headstart(plain))

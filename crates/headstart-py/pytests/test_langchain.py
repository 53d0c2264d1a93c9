"""``headstart.langchain`` inside LangChain's own ``create_agent`` (LangGraph's ``ToolNode``), through the real
langchain-openai client against the replay server: the lead of an early call over the stream's end however the
graph reaches the model, the framework's rules (a call it would not run never starts early), the stored result a
later process hands over, and the bad input ``with_headstart`` refuses."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolArg, tool
from typing_extensions import Annotated

import crashes
import headstart
from chat_replies import Call, Reply, Runs, serve
from headstart.langchain import with_headstart
from langchain_agents import EARLY, agent, chat_model, scripted_tools, shown

PACE_MS = 40.0
"""One event every 40 ms: the lead is counted in events the server sent after the early call started."""


def read_then_write() -> list[Reply]:
    """``read_file``'s arguments whole by the response's 4th event, then ``write_file`` with an argument of 20
    pieces; then the answer."""
    long = ['"'] + ["word " for _ in range(20)] + ['"}']
    first = Reply(
        calls=[Call("call_read", "read_file", ['{"pa', 'th": ', '"a"}']), Call("call_write", "write_file", ['{"path": "b", "text": '] + long)],
        finish="tool_calls",
    )
    return [first, Reply(text=["All ", "done."])]


async def run(graph: Any, mode: str) -> list[Any]:
    """The graph's messages after one run on the prompt "go", reached as ``mode`` says."""
    prompt = {"messages": [{"role": "user", "content": "go"}]}
    if mode == "ainvoke":
        return list((await graph.ainvoke(prompt))["messages"])
    if mode == "invoke":
        return list((await asyncio.to_thread(graph.invoke, prompt))["messages"])
    tokens: list[str] = []
    last: dict[str, Any] = {}
    async for kind, data in graph.astream(prompt, stream_mode=["messages", "values"]):
        if kind == "values":
            last = data
        elif isinstance(data[0], AIMessageChunk) and isinstance(data[0].content, str):
            tokens.append(data[0].content)
    assert "".join(tokens).endswith("All done."), tokens
    return list(last["messages"])


@pytest.mark.parametrize("mode", ["ainvoke", "invoke", "astream_messages"])
def test_an_early_call_starts_while_the_model_streams_however_the_graph_reaches_it(mode: str, db: str) -> None:
    async def main() -> tuple[Any, Any, Runs, Runs]:
        plain_server, server = serve(read_then_write(), PACE_MS), serve(read_then_write(), PACE_MS)
        plain_runs, runs = Runs(server=plain_server.url), Runs(server=server.url)
        plain, _ = agent(plain_server, plain_runs, headstart=False)
        wrapped, model = agent(server, runs, headstart=True, store=db)
        if mode != "invoke":  # the plain graph cannot invoke an async-only tool synchronously
            await run(plain, mode)
        await run(wrapped, mode)
        assert headstart.inspect(db, model.session_id)["sessions"][0]["tool_runs"], "the calls have their stored runs"
        return plain_server, server, plain_runs, runs

    plain_server, server, plain_runs, runs = asyncio.run(main())
    lead = server.lead("/started/read_file", 0)
    assert lead is not None
    ms, events_after = lead
    # The write's 23 pieces, the finish, the usage and [DONE] follow the read's last piece: most are sent after
    # the early run started (a busy machine may start it a few events late, never after the end).
    assert events_after >= 15, f"read_file started only {events_after} events ({ms:.0f} ms) before the stream ended"
    assert [name for name, _ in runs.started] == ["read_file", "write_file"]
    if mode != "invoke":
        plain_lead = plain_server.lead("/started/read_file", 0)
        assert plain_lead is not None and plain_lead[1] == 0, "without headstart, the graph runs it after the stream"
        assert sorted(plain_runs.started, key=repr) == sorted(runs.started, key=repr)
        print(f"plain: read_file started {-plain_lead[0]:.0f} ms after the stream's end")
    print(f"{mode}: read_file started {ms:.0f} ms, {events_after} events before the stream's end")


def test_a_tool_the_step_does_not_offer_never_starts_early() -> None:
    class OnlyWrite(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(request.override(tools=[t for t in request.tools if t.name == "write_file"]))

    async def main() -> tuple[Any, Runs]:
        server = serve(read_then_write(), PACE_MS)
        runs = Runs(server=server.url)
        model, tools = with_headstart(chat_model(server), scripted_tools(runs), early=EARLY)
        await create_agent(model, tools, middleware=[OnlyWrite()]).ainvoke({"messages": [{"role": "user", "content": "go"}]})
        return server, runs

    server, runs = asyncio.run(main())
    # The ToolNode still runs it, as the plain graph does: once, after the stream.
    assert sorted(name for name, _ in runs.started) == ["read_file", "write_file"]
    lead = server.lead("/started/read_file", 0)
    assert lead is not None and lead[1] == 0, f"read_file started {lead} before the end of a step that did not offer it"


@pytest.mark.parametrize(
    "arguments, why",
    [(['{"key": "k", "n": "many"}'], "a wrong type"), (['{"key": "k"}'], "a missing argument"), (['{"key": "k", "n": 1'], "cut JSON")],
)
def test_an_early_call_the_tool_would_refuse_never_starts_and_ends_as_in_the_plain_graph(arguments: list[str], why: str) -> None:
    replies = [Reply(calls=[Call("call_bad", "lookup", arguments)], finish="tool_calls"), Reply(text=["ok"])]

    async def main(wrapped: bool) -> tuple[list[Any], Runs]:
        runs = Runs()
        graph, _ = agent(serve(replies), runs, headstart=wrapped)
        messages = await run(graph, "ainvoke")
        return shown(messages), runs

    plain, plain_runs = asyncio.run(main(False))
    wrapped, runs = asyncio.run(main(True))
    assert runs.started == plain_runs.started, why
    assert wrapped == plain
    if why != "cut JSON":  # LangChain reads a merged stream's cut arguments as far as they go, and runs them
        assert runs.started == [], why


def test_a_later_process_hands_the_stored_result_over_without_running_the_body_again(db: str) -> None:
    replies = [Reply(calls=[Call("call_read", "read_file", ['{"path": "a"}'])], finish="tool_calls"), Reply(text=["ok"])]

    async def first() -> str:
        graph, model = agent(serve(replies), Runs(), headstart=True, store=db)
        await run(graph, "ainvoke")
        return str(model.session_id)

    session = asyncio.run(first())

    async def again() -> Any:
        # A graph resumed from its checkpoint runs the ToolNode of a call the first process already ran.
        runs = Runs()
        _, tools = with_headstart(chat_model(serve([])), scripted_tools(runs), store=db, session_id=session, early=EARLY)
        read = next(t for t in tools if t.name == "read_file")
        message = await read.ainvoke({"type": "tool_call", "id": "call_read", "name": "read_file", "args": {"path": "a"}})
        return message, runs

    message, runs = asyncio.run(again())
    assert runs.started == []
    assert (message.tool_call_id, message.content, message.status) == ("call_read", "contents of a", "success")


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_human_in_the_loop_pause_and_its_resume_go_as_in_the_plain_graph(decision: str) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    replies = [
        Reply(calls=[Call("call_read", "read_file", ['{"path": "a"}']), Call("call_write", "write_file", ['{"path": "b", "text": "x"}'])], finish="tool_calls"),
        Reply(text=["ok"]),
    ]

    async def once(wrapped: bool) -> tuple[Any, list[Any], Runs]:
        runs = Runs()
        approvals = HumanInTheLoopMiddleware(interrupt_on={"write_file": True})
        model: Any = chat_model(serve(replies))
        tools = scripted_tools(runs)
        if wrapped:
            model, tools = with_headstart(model, tools, early=EARLY, middleware=[approvals])
        graph = create_agent(model, tools, middleware=[approvals], checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "t"}}
        paused = await graph.ainvoke({"messages": [{"role": "user", "content": "go"}]}, config)
        interrupts = [item.value["action_requests"][0]["name"] for item in paused.get("__interrupt__", [])]
        answer = {"type": decision} if decision == "approve" else {"type": "reject", "message": "not now"}
        done = await graph.ainvoke(Command(resume={"decisions": [answer]}), config)
        return interrupts, shown(done["messages"]), runs

    plain_interrupts, plain, plain_runs = asyncio.run(once(False))
    interrupts, seen, runs = asyncio.run(once(True))
    assert interrupts == plain_interrupts == ["write_file"]
    assert seen == plain
    assert sorted(runs.started, key=repr) == sorted(plain_runs.started, key=repr)


CRASHING = """
import asyncio, sys
from pathlib import Path
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from crashes import EARLY, hanging_bodies
from headstart.langchain import with_headstart
from langchain_agents import chat_model

server, db, checkpoints, thread, marks = sys.argv[1:]

class Server:
    url = server

class Marking(AgentMiddleware):
    \"\"\"Marks each call the ToolNode runs: the model's step, and its checkpoint, are behind.\"\"\"

    async def awrap_tool_call(self, request, handler):
        Path(marks, "node-" + request.tool_call["name"]).touch()
        return await handler(request)

async def main() -> None:
    tools = [tool(body) for body in hanging_bodies(marks)]
    model, tools = with_headstart(chat_model(Server()), tools, store=db, session_id=thread, early=EARLY, idempotent=["fetch"])
    async with AsyncSqliteSaver.from_conn_string(checkpoints) as saver:
        graph = create_agent(model, tools, checkpointer=saver, middleware=[Marking()])
        await graph.ainvoke({"messages": [{"role": "user", "content": "go"}]}, {"configurable": {"thread_id": thread}},
                            durability="sync")

asyncio.run(main())
"""


def test_a_graph_killed_while_its_early_calls_run_resumes_from_its_checkpoint_without_running_a_call_twice(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    db, checkpoints, thread = str(tmp_path / "agent.db"), str(tmp_path / "checkpoints.db"), "thread-1"
    server = serve([crashes.RESPONSE])
    marks = [tmp_path / name for name in ("fetch", "lookup", "node-fetch", "node-lookup")]
    # Killed while fetch and lookup run and the ToolNode waits for them.
    crashes.kill_when_ready(CRASHING, [server.url, db, checkpoints, thread, str(tmp_path)], lambda: all(m.exists() for m in marks))
    runs = Runs()

    async def resumed() -> list[Any]:
        tools = [tool(body) for body in crashes.recorded_bodies(runs)]
        model, wrapped = with_headstart(
            chat_model(serve([Reply(text=["ok"])])), tools, store=db, session_id=thread, early=crashes.EARLY, idempotent=["fetch"]
        )
        async with AsyncSqliteSaver.from_conn_string(checkpoints) as saver:
            graph = create_agent(model, wrapped, checkpointer=saver)
            # The thread goes on from its checkpoint: the ToolNode runs the model's calls again.
            return list((await graph.ainvoke(None, {"configurable": {"thread_id": thread}}))["messages"])

    messages = asyncio.run(resumed())
    # The finished call keeps its result; the idempotent one ran once more; the other got the interrupted result.
    assert runs.started == [("fetch", {"path": "b"})]
    outputs = {m.tool_call_id: (m.content, m.status) for m in messages if m.type == "tool"}
    assert outputs["call_read"] == ("contents of a", "success")
    assert outputs["call_fetch"] == ("fetched b", "success")
    assert outputs["call_lookup"][1] == "error" and "interrupt" in outputs["call_lookup"][0], outputs
    assert messages[-1].content == "ok"
    assert sorted(crashes.stored_results(db, thread)) == ["call_fetch", "call_lookup", "call_read"], "one result each"


class NotStreaming(BaseChatModel):
    """A chat model with no stream of its own."""

    @property
    def _llm_type(self) -> str:
        return "not-streaming"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessageChunk(content=""))])


@tool
def with_a_hidden_argument(path: str, secret: Annotated[str, InjectedToolArg]) -> str:
    """Takes an argument the ToolNode fills in."""
    return path + secret


def bad_inputs() -> list[tuple[dict[str, Any], type[Exception], str]]:
    server_url = "http://127.0.0.1:9"
    model = chat_model(type("S", (), {"url": server_url})())
    tools = scripted_tools(Runs())
    approvals = HumanInTheLoopMiddleware(interrupt_on={"read_file": True})
    return [
        (dict(model=NotStreaming(), tools=tools), TypeError, "does not stream"),
        (dict(model="gpt-4o", tools=tools), TypeError, "must be a LangChain chat model"),
        (dict(model=model, tools=[lambda: 1]), TypeError, "must be LangChain tools"),
        (dict(model=model, tools=tools, early="read_file"), TypeError, "list of tool names"),
        (dict(model=model, tools=tools, early=["delete_all"]), ValueError, "'delete_all', which is not one of the tools"),
        (dict(model=model, tools=tools, early=["read_file"], middleware=[approvals]), ValueError, "human-in-the-loop"),
        (dict(model=model, tools=[with_a_hidden_argument], early=["with_a_hidden_argument"]), ValueError, "secret"),
        (dict(model=model, tools=tools, store="/nonexistent/dir/agent.db"), ValueError, "cannot be opened"),
    ]


@pytest.mark.parametrize("case", range(len(bad_inputs())))
def test_with_headstart_refuses_bad_input_naming_the_problem(case: int) -> None:
    options, error, says = bad_inputs()[case]
    model, tools = options.pop("model"), options.pop("tools")
    with pytest.raises(error, match=says.replace("(", r"\(")):
        with_headstart(model, tools, **options)


def test_a_wrapped_model_cannot_be_wrapped_again() -> None:
    model, tools = with_headstart(chat_model(serve([])), scripted_tools(Runs()))
    with pytest.raises(TypeError, match="already wrapped"):
        with_headstart(model, tools)

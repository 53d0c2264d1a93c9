"""What the framework faces cost per chunk: a model wrapped by ``headstart.langchain.with_headstart`` or
``headstart.agents.with_headstart`` against the same model unwrapped, on a 20,000-chunk stream, side by side.

Run in an environment with the package and both frameworks (langchain-core, openai-agents):

    pip install ./crates/headstart-py langchain-core openai-agents
    python crates/headstart-py/bench/frameworks.py [YIELD_EVERY]

The inner model is a fake in this process (no HTTP, no waits). It yields to the event loop (``sleep(0)``) every
YIELD_EVERY chunks (default 1: each chunk its own read, as a live model's stream comes), so the engine's events
come back to Python during the stream as they would; a larger number is a burst (a buffered body). The plain time is
the framework's own cost per chunk; the wrapped time adds what headstart does with each chunk: read it, write its
delta event's JSON, push it into the engine (whose Rust side takes it on a thread of its own), take the engine's
events back. The stream: text chunks, then two tool calls whose arguments come in PIECES chunks each, one to an
early tool (it runs as soon as the engine asks for it), one to an ordinary tool.

1. **LangChain.** ``model.bind_tools(tools).astream(messages)`` consumed to its end: a fake ``BaseChatModel``
   whose ``_astream`` yields prebuilt ``ChatGenerationChunk``s, plain vs wrapped.
2. **Agents SDK.** ``model.stream_response(...)`` iterated to its end, called as the runner calls it: a fake
   ``Model`` yielding real Responses-API event objects, plain vs the ``HeadstartModel`` of ``with_headstart``.

Each round calls ``with_headstart`` anew (a fresh chat: each timed model call is the first response of a session of
its own), in memory and with a SQLite store (a new file in a temp dir, default durability ``full``). After each
wrapped call, untimed, the tools run as the framework runs them and the response drains, so no engine work spills
into the next timing. Rounds are interleaved, their order alternating; figures are medians. No assertion on time:
the issue's bound is 1.2x the plain time.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Literal, Optional

from agents import Agent, FunctionTool, ModelSettings, function_tool, set_tracing_disabled
from agents.models.interface import Model, ModelTracing
from agents.tool_context import ToolContext
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from openai.types import responses as oa
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import PrivateAttr

import headstart.agents
import headstart.langchain

CHUNKS = 20_000
PIECES = 400
YIELD_EVERY = 1
ROUNDS = 7
CALLS: list[tuple[str, str, dict[str, Any]]] = [("call_1", "lookup", {"key": "k" * 800, "n": 7}), ("call_2", "note", {"text": "t" * 800})]

set_tracing_disabled(True)


def lookup(key: str, n: int) -> str:
    """Looks a key up."""
    return f"{len(key)} #{n}"


def note(text: str) -> str:
    """Notes a text."""
    return f"noted {len(text)}"


LC_TOOLS = [tool(lookup), tool(note)]
AG_TOOLS = [function_tool(lookup), function_tool(note)]


def pieces(arguments: dict[str, Any]) -> list[str]:
    """A call's arguments' JSON text, cut into PIECES pieces."""
    text = json.dumps(arguments)
    cuts = [len(text) * n // PIECES for n in range(PIECES + 1)]
    return [text[start:end] for start, end in zip(cuts, cuts[1:])]


async def paced(items: list[Any]) -> AsyncIterator[Any]:
    for number, item in enumerate(items):
        if number % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        yield item


async def drained(chat: Any) -> None:
    """The chat's last response has drained: results stored, run ended (private; no tail may overlap a timing)."""
    if chat._streaming is not None:
        await chat._streaming.drained


# LangChain


def lc_chunks() -> list[ChatGenerationChunk]:
    """The stream, built anew for each run (``astream`` sets each chunk's id and metadata as it passes)."""
    text = CHUNKS - len(CALLS) * (PIECES + 1) - 1  # a call is its first chunk and its pieces; one chunk ends
    out = [ChatGenerationChunk(message=AIMessageChunk(content=f"w{n} ")) for n in range(text)]
    for index, (id, name, arguments) in enumerate(CALLS):
        first = tool_call_chunk(name=name, args="", id=id, index=index)
        out.append(ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[first])))
        for piece in pieces(arguments):
            rest = tool_call_chunk(name=None, args=piece, id=None, index=index)
            out.append(ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[rest])))
    last = AIMessageChunk(content="", response_metadata={"finish_reason": "tool_calls"})
    out.append(ChatGenerationChunk(message=last, generation_info={"finish_reason": "tool_calls"}))
    assert len(out) == CHUNKS
    return out


class FakeChat(BaseChatModel):
    """Streams ``_script``. Private: a field would be in the model's repr, which LangChain takes at each call's
    start (and the wrapper's holds the inner model's)."""

    _script: list[ChatGenerationChunk] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "bench-fake"

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(each) for each in tools], **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Optional[list[str]] = None, run_manager: Optional[CallbackManagerForLLMRun] = None, **kwargs: Any
    ) -> ChatResult:
        raise NotImplementedError("the bench streams")

    async def _astream(
        self, messages: list[BaseMessage], stop: Optional[list[str]] = None, run_manager: Optional[AsyncCallbackManagerForLLMRun] = None, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        async for chunk in paced(self._script):
            yield chunk


async def lc_stream(model: BaseChatModel, tools: list[BaseTool]) -> float:
    """Seconds to consume one ``astream`` to its end (the tools bound, so the step offers them)."""
    bound = model.bind_tools(tools)
    gc.collect()
    began = time.perf_counter()
    async for _ in bound.astream([HumanMessage("go")]):
        pass
    return time.perf_counter() - began


async def lc_plain(fake: FakeChat) -> float:
    fake._script = lc_chunks()
    return await lc_stream(fake, LC_TOOLS)


async def lc_wrapped(fake: FakeChat, store: Optional[str]) -> float:
    model, tools = headstart.langchain.with_headstart(fake, LC_TOOLS, store=store, early=["lookup"])
    fake._script = lc_chunks()
    took = await lc_stream(model, tools)
    await lc_settled(model, tools)
    return took


async def lc_settled(model: Any, tools: list[BaseTool]) -> None:
    """Untimed, after a wrapped call: the calls run as a ToolNode runs them (the early one hands over its result),
    then the response drains."""
    by_name = {each.name: each for each in tools}
    await asyncio.gather(*(by_name[name].ainvoke({"type": "tool_call", "name": name, "args": args, "id": id}) for id, name, args in CALLS))
    await drained(model._chat)


# Agents SDK


def response(output: list[Any], status: Literal["in_progress", "completed"]) -> oa.Response:
    usage = oa.ResponseUsage(
        input_tokens=10,
        input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
        output_tokens=CHUNKS,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=CHUNKS + 10,
    )
    return oa.Response(
        id="resp_1", created_at=0, model="bench", object="response", output=output, parallel_tool_calls=True,
        tool_choice="auto", tools=[], status=status, usage=usage,
    )  # fmt: skip


def ag_events() -> list[Any]:
    """Created, text deltas, each call (added, argument deltas, done), completed; output indices as the API's."""
    events: list[Any] = [oa.ResponseCreatedEvent(response=response([], "in_progress"), sequence_number=0, type="response.created")]
    text = [f"w{n} " for n in range(CHUNKS - 2 - len(CALLS) * (PIECES + 2))]
    kind: Literal["response.output_text.delta"] = "response.output_text.delta"
    events += [
        oa.ResponseTextDeltaEvent(content_index=0, delta=delta, item_id="msg_1", logprobs=[], output_index=0, sequence_number=0, type=kind)
        for delta in text
    ]
    content: list[Any] = [oa.ResponseOutputText(annotations=[], text="".join(text), type="output_text")]
    output: list[Any] = [oa.ResponseOutputMessage(id="msg_1", role="assistant", status="completed", type="message", content=content)]
    for at, (id, name, arguments) in enumerate(CALLS, start=1):
        item = oa.ResponseFunctionToolCall(arguments="", call_id=id, name=name, type="function_call", id=f"fc_{at}", status="in_progress")
        events.append(oa.ResponseOutputItemAddedEvent(item=item, output_index=at, sequence_number=0, type="response.output_item.added"))
        parts = pieces(arguments)
        piece: Literal["response.function_call_arguments.delta"] = "response.function_call_arguments.delta"
        events += [
            oa.ResponseFunctionCallArgumentsDeltaEvent(delta=part, item_id=f"fc_{at}", output_index=at, sequence_number=0, type=piece)
            for part in parts
        ]
        done = item.model_copy(update={"arguments": "".join(parts), "status": "completed"})
        events.append(oa.ResponseOutputItemDoneEvent(item=done, output_index=at, sequence_number=0, type="response.output_item.done"))
        output.append(done)
    events.append(oa.ResponseCompletedEvent(response=response(output, "completed"), sequence_number=0, type="response.completed"))
    for number, event in enumerate(events):
        event.sequence_number = number
    assert len(events) == CHUNKS
    return events


class FakeModel(Model):
    """Streams ``events``: the same objects every run (reading them changes nothing)."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the bench streams")

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for event in paced(self.events):
            yield event


async def ag_stream(model: Model, tools: list[Any]) -> float:
    """Seconds to iterate one ``stream_response`` to its end, called as the runner calls it."""
    gc.collect()
    began = time.perf_counter()
    stream = model.stream_response(
        None, "go", ModelSettings(), tools, None, [], ModelTracing.DISABLED, previous_response_id=None, conversation_id=None, prompt=None
    )
    async for _ in stream:
        pass
    return time.perf_counter() - began


async def ag_wrapped(fake: Model, store: Optional[str]) -> float:
    agent = headstart.agents.with_headstart(Agent(name="bench", model=fake, tools=list(AG_TOOLS)), store=store, early=["lookup"])
    model = agent.model
    assert isinstance(model, headstart.agents.HeadstartModel)
    took = await ag_stream(model, agent.tools)
    await ag_settled(agent, model)
    return took


async def ag_settled(agent: Agent[Any], model: Any) -> None:
    """Untimed, after a wrapped call: the runner's tool step (the early call hands over its result), then the
    response drains."""
    tools = {each.name: each for each in agent.tools if isinstance(each, FunctionTool)}

    def invoke(id: str, name: str, arguments: dict[str, Any]) -> Awaitable[Any]:
        text = json.dumps(arguments)
        return tools[name].on_invoke_tool(ToolContext(context=None, tool_name=name, tool_call_id=id, tool_arguments=text), text)

    await asyncio.gather(*(invoke(*call) for call in CALLS))
    await drained(model._chat)


Job = tuple[str, str, Callable[[], Awaitable[float]]]


async def interleaved_medians(rounds: int, jobs_of: Callable[[int], list[Job]]) -> dict[tuple[str, str], float]:
    """Each round's jobs run once, in reverse order every other round (so that no side always runs first, or on a
    warmer machine); the median seconds of each (subject, kind)."""
    runs: dict[tuple[str, str], list[float]] = {}
    for round_ in range(rounds):
        jobs = jobs_of(round_)
        for subject, kind, job in jobs if round_ % 2 == 0 else reversed(jobs):
            runs.setdefault((subject, kind), []).append(await job())
    return {key: statistics.median(times) for key, times in runs.items()}


async def main() -> None:
    lc_fake, ag_fake = FakeChat(), FakeModel(ag_events())
    with tempfile.TemporaryDirectory() as scratch:

        def jobs(round_: int) -> list[Job]:
            def db(kind: str) -> str:
                return str(Path(scratch) / f"{kind}{round_}.db")

            return [
                ("langchain", "plain", lambda: lc_plain(lc_fake)),
                ("langchain", "memory", lambda: lc_wrapped(lc_fake, None)),
                ("langchain", "sqlite", lambda: lc_wrapped(lc_fake, db("lc"))),
                ("agents", "plain", lambda: ag_stream(ag_fake, list(AG_TOOLS))),
                ("agents", "memory", lambda: ag_wrapped(ag_fake, None)),
                ("agents", "sqlite", lambda: ag_wrapped(ag_fake, db("ag"))),
            ]

        median = await interleaved_medians(ROUNDS, jobs)
    print(f"{CHUNKS} chunks a stream (2 calls of {PIECES} pieces), a yield every {YIELD_EVERY}, median of {ROUNDS} interleaved rounds")
    head = f"{'framework':<10} {'store':<7} {'plain ms':>9} {'wrapped ms':>11} {'ratio':>7} {'plain us/chunk':>15} {'wrapped us/chunk':>17} {'added us/chunk':>15}"
    print(head + "\n" + "-" * len(head))
    for framework in ["langchain", "agents"]:
        plain = median[(framework, "plain")]
        for store in ["memory", "sqlite"]:
            wrapped = median[(framework, store)]
            per = [value / CHUNKS * 1e6 for value in (plain, wrapped, wrapped - plain)]
            print(
                f"{framework:<10} {store:<7} {plain * 1e3:9.1f} {wrapped * 1e3:11.1f} {wrapped / plain:6.2f}x"
                f" {per[0]:15.2f} {per[1]:17.2f} {per[2]:15.2f}"
            )
    print("(the fakes parse nothing: the ratio is against a near-empty loop; bench/frameworks_providers.py times the providers' own model classes)")
    print(f"python {sys.version.split()[0]}")


if __name__ == "__main__":
    YIELD_EVERY = int(sys.argv[1]) if len(sys.argv) > 1 else YIELD_EVERY
    asyncio.run(main())

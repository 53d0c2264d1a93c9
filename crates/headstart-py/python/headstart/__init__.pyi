"""headstart: streaming early execution for LLM agents, around the streams of the openai and anthropic SDKs."""

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, Optional, TypeVar, Union, final, overload

__all__ = [
    "Agent",
    "AgentRun",
    "ConfigError",
    "Engine",
    "EngineError",
    "Event",
    "HeadstartError",
    "HttpModel",
    "ModelError",
    "ModelRequest",
    "Record",
    "Run",
    "SessionBusy",
    "StoreError",
    "Tool",
    "ToolContext",
    "ToolResult",
    "Wrapped",
    "__version__",
    "inspect",
    "savings",
    "submit",
    "tool",
]

__version__: str
"""The package's version (its distribution's, and its native extension's: importing refuses a mismatch)."""

_F = TypeVar("_F", bound=Callable[..., Any])

class HeadstartError(Exception):
    """The base class of every headstart error."""

class EngineError(HeadstartError):
    """The engine failed in a way that is not the store's or the model's (an internal error, a panic)."""

class StoreError(HeadstartError):
    """The transcript store failed: it cannot be opened, read or written."""

class SessionBusy(StoreError):
    """Another process holds the session (its lock beside the SQLite file): the message names it. Nothing was
    written."""

class ModelError(HeadstartError):
    """The model's stream could not be read (an unknown format, an event that is not JSON)."""

class ConfigError(HeadstartError):
    """A tool or engine setting is invalid (a duplicate tool name, an unknown format)."""

@final
class HttpModel:
    """A provider's HTTP API as an ``Agent``'s model, for applications without an SDK: Rust owns the request, its
    retries (twice before the first delta, with backoff; ``Retry-After`` honoured) and the SSE stream, as
    ``headstart run`` does. ``provider`` is the wire format (``openai-chat``, ``openai-responses``, ``anthropic``,
    ``gemini``); ``api_key_env`` names the variable holding the key (default: the provider's usual one; ``""``:
    no key). ``provider_async``: declare the tools made with ``provider_async=True`` async to the model (OpenAI
    Responses' async tool calling, GPT-6 Astra and later; ``openai-responses`` only)."""

    def __new__(
        cls,
        provider: str,
        model: str,
        *,
        base_url: Optional[str] = None,
        api_key_env: Optional[str] = None,
        system: Optional[str] = None,
        max_tokens: Optional[int] = None,
        seal: str = "complete",
        provider_async: bool = False,
    ) -> HttpModel: ...

class ToolContext:
    """The context of one tool call: its id, its session's id, its idempotency key (stable across attempts and
    workers: pass it to the service the tool calls), partial results, and whether it was cancelled."""

    call_id: str
    session_id: Optional[str]
    idempotency_key: str
    def __init__(self, call_id: str, session_id: Optional[str], idempotency_key: str, updates: Any) -> None: ...
    @property
    def cancelled(self) -> bool:
        """True once the engine cancelled the call (the run was cancelled, or the call timed out)."""
    async def update(self, partial: Any) -> None:
        """Reports a partial result (a string, or anything JSON-serialisable) as a ``tool_execution_update``."""

class Tool:
    """A tool made from a Python function by ``@headstart.tool``; calling it calls the function."""

    function: Callable[..., Any]
    name: str
    description: str
    parameters: dict[str, Any]
    early: bool
    provider_async: bool
    idempotent: bool
    sequential: bool
    conflict_key: Optional[str]
    """The name of an argument the schema lists (calls with equal values run in order), or a fixed key."""
    timeout: Optional[float]
    is_async: bool
    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        early: bool = False,
        idempotent: bool = False,
        sequential: bool = False,
        conflict_key: Optional[str] = None,
        timeout: Optional[float] = None,
        parameters: Optional[dict[str, Any]] = None,
        provider_async: bool = False,
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def spec(self) -> dict[str, Any]:
        """What the engine schedules the tool's calls by (name, description, parameters, flags, timeout in seconds,
        conflict key), as the engine's host layer reads every language's tools."""
    def arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments the function is called with, validated against its signature."""
    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """Runs the function on validated ``arguments``."""

@overload
def tool(
    function: Callable[..., Any],
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    early: bool = False,
    idempotent: bool = False,
    sequential: bool = False,
    conflict_key: Optional[str] = None,
    timeout: Optional[float] = None,
    parameters: Optional[dict[str, Any]] = None,
    provider_async: bool = False,
) -> Tool: ...
@overload
def tool(
    function: None = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    early: bool = False,
    idempotent: bool = False,
    sequential: bool = False,
    conflict_key: Optional[str] = None,
    timeout: Optional[float] = None,
    parameters: Optional[dict[str, Any]] = None,
    provider_async: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...

class Record(Mapping[str, Any]):
    """A read-only JSON object whose keys are also attributes (``call.name`` is ``call["name"]``)."""

    def __init__(self, data: dict[str, Any]) -> None: ...
    def __getattr__(self, name: str) -> Any: ...
    def __getitem__(self, key: str) -> Any: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the object as plain JSON data."""

class Event(Record):
    """One agent event: ``type`` is the Rust ``AgentEvent``'s name; its fields are attributes; ``to_dict()`` is the
    Rust event's serialization."""

    @property
    def type(self) -> str:
        """The event's name (``message_update``, ``tool_execution_start``, ...)."""
    @property
    def result(self) -> Optional[Record]:
        """The tool result message of a tool result's ``message_end``; ``None`` for every other event."""

class ToolResult:
    """A call's stored result: its call id, tool name, content text, and whether it is an error."""

    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool
    details: Any
    figures: Optional[dict[str, Any]]
    def __init__(self, message: dict[str, Any]) -> None: ...
    def to_dict(self) -> dict[str, Any]:
        """The result as plain data."""

class Engine:
    """The early-execution engine over one transcript store with its tools. Read a SQLite store with ``inspect``, or
    with Python's ``sqlite3`` only from another process (two copies of SQLite in one process corrupt its WAL)."""

    tools: list[Tool]
    def __init__(
        self,
        store: Union[str, os.PathLike[str]],
        tools: Iterable[Tool] = (),
        *,
        tool_execution: str = "parallel",
        max_in_flight: Optional[int] = 16,
        early_execution: bool = True,
        max_requests: int = 32,
        durability: str = "full",
        async_delivery: str = "all_pending",
        max_pending_calls: int = 16,
        before_tool_call: Optional[Callable[[dict[str, Any], dict[str, Any]], Any]] = None,
        after_tool_call: Optional[Callable[[dict[str, Any], dict[str, Any]], Any]] = None,
    ) -> None: ...
    async def create_session(self) -> str:
        """Creates a session in the store and returns its id."""
    async def recover(self, session: str, policy: str = "fail") -> list[dict[str, Any]]:
        """Recovers ``session`` after a crash (``policy``: ``fail`` or ``rerun_idempotent``)."""
    def tool_specs(self, format: str = "openai-chat") -> list[Any]:
        """The tools as a request in ``format`` declares them."""
    def wrap(
        self,
        session: str,
        stream: Any,
        format: str = "openai-chat",
        *,
        seal: str = "complete",
        record: Optional[Union[str, os.PathLike[str]]] = None,
    ) -> Wrapped:
        """Wraps one response read from ``stream``: the SDK's stream (an openai or anthropic one is read from its HTTP
        body), delta dicts for ``format="headstart"``, or the SSE body's chunks for ``format="sse-…"``. ``seal``: when
        a Chat Completions call is sealed (``complete``, ``next-index``, ``finish``); ``record``: a file the raw
        events are appended to with their arrival times."""

class Run:
    """A run's events: an async context manager, and, inside it, an async iterator of ``Event``s. Leaving the block
    before the last event cancels the run and waits until every admitted call has its stored result."""

    def __init__(self) -> None: ...
    @property
    def results(self) -> list[ToolResult]:
        """The results of the (last) response's calls, in the order of the calls, each with its ``figures``."""
    @property
    def figures(self) -> Optional[dict[str, Any]]:
        """This run's figures from the stored times (its responses' calls and tool rounds), once the events are
        over."""
    async def __aenter__(self) -> Run: ...
    async def __aexit__(
        self,
        kind: Optional[type[BaseException]],
        error: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None: ...
    async def aclose(self) -> None:
        """Cancels the run unless it has ended, and waits until every admitted call has its stored result."""
    def __aiter__(self) -> AsyncIterator[Event]: ...

class Wrapped(Run):
    """One wrapped response (``engine.wrap``): its stream is read on the loop while its events are consumed."""

    def __init__(
        self, engine: Engine, session: str, stream: Any, format: str, seal: str = "complete", record: Optional[str] = None
    ) -> None: ...

class ModelRequest:
    """What the agent asks the model: the request's number, the canonical context, and ``body(model=...)``."""

    def __init__(self, native: Any) -> None: ...
    @property
    def number(self) -> int:
        """The 0-based number of the request in the session."""
    @property
    def context(self) -> list[dict[str, Any]]:
        """The canonical context (the stored messages the model sees), as JSON data."""
    def body(
        self,
        model: str,
        *,
        system: Optional[str] = None,
        max_tokens: Optional[int] = None,
        provider_async: bool = False,
    ) -> dict[str, Any]:
        """The request body in the agent's wire format, without ``stream``."""

class Agent:
    """An agent: an engine and a model callable returning its SDK's stream in ``format``."""

    engine: Engine
    model: Union[Callable[[ModelRequest], Awaitable[Any]], HttpModel]
    format: str
    def __init__(
        self,
        engine: Engine,
        model: Union[Callable[[ModelRequest], Awaitable[Any]], HttpModel],
        *,
        format: str = "openai-chat",
        max_turns: int = 10,
        seal: str = "complete",
    ) -> None: ...
    def run(self, session: str, prompt: str) -> AgentRun:
        """Appends ``prompt`` to ``session`` and runs the loop; the last event is ``agent_end``."""

class AgentRun(Run):
    """One run of an agent's loop."""

    def __init__(self, agent: Agent, session: str, prompt: str) -> None: ...

def inspect(store: Union[str, os.PathLike[str]], session: Optional[str] = None) -> dict[str, Any]:
    """What a store holds, read-only: its sessions with their messages and tool runs (only ``session`` if given)."""

def savings(store: Union[str, os.PathLike[str]], session: str) -> dict[str, Any]:
    """What early execution saved on a stored session, against end-of-stream batching."""

def submit(
    store: Union[str, os.PathLike[str]],
    prompt: str,
    *,
    queue: Optional[str] = None,
    system: Optional[str] = None,
    model: Optional[str] = None,
    count: int = 1,
) -> list[str]:
    """Puts ``count`` sessions in a fleet's queue (``queue``, default ``"default"``) and returns their ids."""

"""The extension module (private): the engine, the stream feed and the event stream, in Rust.

The test build's support (``ReplayServer``, ``convert_recording``, ``rust_demo``: the crate's ``testing`` feature) is
not here: these stubs describe the package users install, which ``tests/pip_install.rs`` checks with stubtest."""

from typing import Any, Optional, final

__all__ = [
    "Agent",
    "CallDone",
    "CallUpdates",
    "ConfigError",
    "Engine",
    "EngineError",
    "Events",
    "Feed",
    "HeadstartError",
    "HttpModel",
    "Mailbox",
    "ModelError",
    "ModelRequest",
    "SessionBusy",
    "StoreError",
    "demo_script",
    "inspect",
    "savings",
    "submit",
    "__version__",
]

__version__: str
"""The version the extension was built as; the package refuses one that is not its distribution's."""

class HeadstartError(Exception): ...
class EngineError(HeadstartError): ...
class StoreError(HeadstartError): ...
class SessionBusy(StoreError): ...
class ModelError(HeadstartError): ...
class ConfigError(HeadstartError): ...

@final
class Engine:
    def __new__(
        cls,
        store: str,
        tools: list[Any],
        *,
        tool_execution: str = "parallel",
        max_in_flight: Optional[int] = ...,
        early_execution: bool = True,
        max_requests: int = 32,
        durability: str = "full",
        async_delivery: str = "all_pending",
        max_pending_calls: int = ...,
        before_tool_call: Optional[Any] = None,
        after_tool_call: Optional[Any] = None,
    ) -> Engine: ...
    def recover(self, session: str, policy: str = "fail") -> Any: ...
    def create_session(self) -> Any: ...
    def tool_specs(self, format: str) -> list[Any]: ...
    def definitions(self) -> list[Any]: ...
    def figures(self, session: str, after: Optional[int] = None) -> Any: ...
    def open(
        self,
        session: str,
        format: str,
        seal: str = "complete",
        record: Optional[str] = None,
        *,
        users: list[str] = ...,
        create: bool = False,
        after_previous: bool = False,
    ) -> tuple[Feed, Any]: ...
    def new_session_id(self) -> str: ...
    def log(self, session: str) -> Any: ...

@final
class Feed:
    def push(self, data: str, event: Optional[str] = None) -> None: ...
    def push_body(self, data: bytes) -> None: ...
    def push_lines(self, lines: str) -> None: ...
    def end(self) -> None: ...
    def fail(self, message: str) -> None: ...

@final
class Events:
    def next_batch(self) -> Any: ...
    def cancel(self) -> None: ...
    def close(self) -> Any: ...

@final
class CallDone:
    def __call__(self, ok: bool, payload: Optional[str] = None) -> None: ...

@final
class CallUpdates:
    def send(self, text: str, details: Optional[str] = None) -> None: ...

def inspect(store: str, session: Optional[str] = None) -> dict[str, Any]: ...
def submit(
    store: str,
    prompt: str,
    *,
    queue: Optional[str] = None,
    system: Optional[str] = None,
    model: Optional[str] = None,
    count: int = 1,
) -> list[str]: ...

@final
class Agent:
    def __new__(cls, engine: Engine, model: Any, format: str, max_requests: int, seal: str = "complete") -> Agent: ...
    def run(self, session: str, prompt: str) -> Any: ...

@final
class ModelRequest:
    @property
    def number(self) -> int: ...
    @property
    def context(self) -> Any: ...
    def body(
        self, model: str, system: Optional[str] = None, max_tokens: Optional[int] = None, provider_async: bool = False
    ) -> Any: ...
def savings(store: str, session: str) -> dict[str, Any]: ...
def demo_script() -> list[list[dict[str, Any]]]: ...

@final
class Mailbox:
    def fileno(self) -> int: ...
    def take(self) -> list[tuple[Any, ...]]: ...

@final
class HttpModel:
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

"""headstart: streaming early execution for LLM agents, around the streams of the openai and anthropic SDKs.

The moment the model's call to an *early* tool is sealed, headstart commits the transcript prefix holding it
durably, and only then starts the tool, while the model keeps streaming. See ``Engine``, ``tool`` and
``Engine.wrap``.
"""

from ._version import __version__  # first: refuses an extension of another version before anything uses it

from ._agent import Agent, AgentRun, ModelRequest
from ._context import ToolContext
from ._engine import Engine, Run, Wrapped, inspect, savings, submit
from ._events import Event, Record, ToolResult
from ._native import ConfigError, EngineError, HeadstartError, HttpModel, ModelError, SessionBusy, StoreError
from ._tools import Tool, tool

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

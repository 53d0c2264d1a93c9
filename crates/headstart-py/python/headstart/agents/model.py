"""``HeadstartModel``: an Agents SDK ``Model`` around another, whose stream feeds the chat's engine as it passes.

``stream_response`` (``Runner.run_streamed``) passes each event on unchanged; ``get_response`` (``Runner.run``,
``run_sync``) streams from the inner model too, and returns the response a streamed run builds from the completed
event."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any, AsyncIterator, Optional

from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage

from .._hosted.chat import Chat
from .items import EventReader, offered_of, outcomes_of, users_of


class HeadstartModel(Model):
    """``inner``, with headstart: each model call is one response of the chat's session; a call to an early tool
    starts the moment its arguments are whole. Made by ``headstart.agents.with_headstart``."""

    def __init__(self, inner: Model, chat: Chat) -> None:
        self.inner = inner
        """The model that answers."""
        self._chat = chat

    @property
    def session_id(self) -> str:
        """The store's session of the chat."""
        return self._chat.id

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """The inner model's events, each read into the engine as it passes."""
        input, tools = _input_and_tools(args, kwargs)
        response = await self._chat.respond(users_of(input), offered_of(tools), outcomes_of(input))
        reader = EventReader(response.feed)
        # Closing this closes the pass (a runner that stops reading aborts the response).
        async with aclosing(response.passing(self.inner.stream_response(*args, **kwargs), reader.read)) as events:
            async for event in events:
                yield event
        if reader.completed is None:
            response.feed.fail("the model's stream ended without a completed response")
            return
        response.ended(reader.finish())

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """The response a streamed call gives, from the inner model's stream."""
        completed: Optional[Any] = None
        async for event in self.stream_response(*args, **kwargs):
            if getattr(event, "type", None) == "response.completed":
                completed = event.response
        if completed is None:
            raise RuntimeError("the model's stream ended without a completed response")
        usage = completed.usage
        return ModelResponse(
            output=list(completed.output),
            usage=Usage(
                requests=1,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.total_tokens,
                input_tokens_details=usage.input_tokens_details,
                output_tokens_details=usage.output_tokens_details,
            )
            if usage is not None
            else Usage(requests=1),
            response_id=completed.id,
        )

    async def close(self) -> None:
        """Closes the inner model."""
        closing = getattr(self.inner, "close", None)
        if closing is not None:
            await closing()


def _input_and_tools(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The ``input`` and ``tools`` of a call of the ``Model`` interface (positional or named)."""
    input = kwargs["input"] if "input" in kwargs else (args[1] if len(args) > 1 else None)
    tools = kwargs["tools"] if "tools" in kwargs else (args[3] if len(args) > 3 else [])
    return input, list(tools or [])

"""``Response``: one model call of a framework, as one response of the chat's session.

The model's stream goes through the response's ``DeltaFeed`` into the engine as it passes; each call has its
``Call`` record; an early call's run starts when the engine asks for it (its owner is durable); the engine's events
are read to their end, keeping the results it stored without asking."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, AsyncGenerator, AsyncIterator, Callable, Optional, Protocol, TypeVar

from .answer import Answer, error
from .call import Call
from .feed import DeltaFeed, SealedCall

T = TypeVar("T")

NOT_THE_FRAMEWORKS = "not executed: the model's stream was cut before the call was whole, so the framework never saw it"
"""The result of a call the stream sealed that the framework's own message does not hold."""
NOT_RUN = "not executed: the framework did not run the call"
"""The result of a call the framework never ran, by its next model call."""


@dataclass
class Outcome:
    """What a run of a framework's tool gave: its ``value`` as the framework hands it on, or the ``error`` it
    raised; ``invalid`` when an early run's arguments failed the tool's own check (it did not run)."""

    value: Any = None
    error: Optional[BaseException] = None
    invalid: bool = False


class EarlyRuns(Protocol):
    """How a framework runs an early call, and what the transcript keeps of its outcome."""

    async def run_early(self, call: Call, response: "Response") -> Outcome:
        """Runs an early call's tool with its arguments, as the framework would (``invalid`` when the framework
        would refuse the arguments: it does not run)."""
        ...

    def answer_of(self, outcome: Outcome) -> Answer:
        """An outcome's result as the transcript keeps it: what the framework shows the model."""
        ...


class Response:
    """One model call of a chat. ``runs``: how the framework runs early calls; ``starts_early(name, offered)``:
    whether a call of tool ``name`` may start at its seal; ``offered``: the tools the step offers."""

    def __init__(
        self,
        runs: EarlyRuns,
        starts_early: Callable[[str, frozenset[str]], bool],
        native_feed: Any,
        events: Any,
        offered: frozenset[str],
    ) -> None:
        self._runs = runs
        self._starts_early = starts_early
        self.offered = offered
        self._loop = asyncio.get_running_loop()
        self._calls: dict[str, Call] = {}
        self._run_ended = False
        self.framework_calls: Optional[set[str]] = None
        """Once the stream has ended: the ids of the calls the framework's own message holds."""
        self.feed = DeltaFeed(native_feed, on_seal=self._sealed)
        self.drained: asyncio.Task[None] = self._loop.create_task(self._drain(events))
        """Reads the engine's events to their end: the run has ended, every call has its stored result."""

    def call(self, id: str) -> Call:
        """The record of call ``id``, made on first use."""
        call = self._calls.get(id)
        if call is None:
            call = Call(id, self._loop)
            self._calls[id] = call
            if self._run_ended:
                call.settled_by_engine()
        return call

    def holds(self, id: str) -> bool:
        """Whether the response holds call ``id``."""
        return id in self._calls

    def calls(self) -> list[Call]:
        """The response's calls, in the order they were first seen."""
        return list(self._calls.values())

    def _sealed(self, sealed: SealedCall) -> None:
        call = self.call(sealed.id)
        call.name = sealed.name
        call.text = sealed.text
        call.arguments = sealed.arguments
        call.early = self._starts_early(sealed.name, self.offered)

    async def passing(self, stream: AsyncIterator[T], read: Callable[[T], None]) -> AsyncGenerator[T, None]:
        """The model's ``stream``, each item given to ``read`` (which feeds the engine) as it passes on, unchanged.
        A failure of the stream ends the response as an error, a cancellation as aborted; both go on up."""
        try:
            async for item in stream:
                read(item)
                yield item
        except (asyncio.CancelledError, GeneratorExit):
            self.feed.abort("the model call was cancelled")
            raise
        except BaseException as failure:
            self.feed.fail(f"the model failed: {type(failure).__name__}: {failure}")
            raise

    def ended(self, framework_calls: set[str]) -> None:
        """The stream has ended; ``framework_calls``: the ids of the calls the framework's message holds."""
        self.framework_calls = framework_calls

    async def on_call(self, call_id: str, name: str, arguments: dict[str, Any]) -> Answer:
        """The engine asks for a call: it is durable, and may start. An early call starts now; the others run when
        the framework runs them; a call the framework never saw is answered at once."""
        call = self.call(call_id)
        answer = call.ask()
        if call.name is None:
            call.name, call.arguments, call.text = name, arguments, json.dumps(arguments)
        if not call.early and self.framework_calls is not None and call_id not in self.framework_calls:
            call.end(error(NOT_THE_FRAMEWORKS))
        elif call.early and call.run is None:
            call.run = self._loop.create_task(self._run_early(call))
        try:
            return await asyncio.shield(answer)
        except asyncio.CancelledError:
            # The engine stopped waiting (the response was aborted): an early run still going is cancelled too.
            if call.run is not None and not call.run.done():
                call.run.cancel()
            raise

    async def _run_early(self, call: Call) -> Outcome:
        """An early call's run through the face; the engine has its answer first. A call whose arguments the
        framework would refuse does not run: it is no longer early, and waits as any other call for the framework."""
        try:
            outcome = await self._runs.run_early(call, self)
        except asyncio.CancelledError:
            call.end(error("cancelled: the response was aborted"))
            raise
        except BaseException as raised:  # noqa: BLE001 - a face's own failure is the call's error, never lost
            outcome = Outcome(error=raised)
        if outcome.invalid:
            call.early = False
            return outcome
        call.end(self._runs.answer_of(outcome))
        return outcome

    def reconcile(self, outcomes: dict[str, Answer]) -> None:
        """The calls the engine admitted and the framework did not run by the chat's next model call: each gets the
        outcome the next prompt holds for it (a result the app gave, a refusal), or the "not run" result."""
        for call in self._calls.values():
            if call.ended or call.early or call.claimed:
                continue
            call.end(outcomes.get(call.id) or error(NOT_RUN))

    async def _drain(self, events: Any) -> None:
        """Reads the engine's events to their end, keeping the results it stored without asking. Never raises."""
        try:
            while True:
                batch = await events.next_batch()
                if not batch:
                    break
                for event in batch:
                    if event.get("type") == "message_end" and event["message"].get("role") == "tool_result":
                        self.call(event["message"]["tool_call_id"]).settled_by_engine(event["message"])
                if not self.feed.closed:
                    # While the model streams, the engine's events are mostly its updates per delta, which nothing
                    # here waits for (it asks for calls by another way): a batch a millisecond, not a wake per chunk.
                    await asyncio.sleep(0.001)
        except Exception:  # noqa: BLE001 - the store failed: the calls end as the engine left them
            pass
        finally:
            self._run_ended = True
            for call in self._calls.values():
                call.settled_by_engine()

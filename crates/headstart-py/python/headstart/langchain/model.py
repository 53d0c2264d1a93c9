"""``HeadstartChatModel``: a LangChain chat model around another, whose stream feeds the chat's engine as it passes.

Every way a graph reaches a model goes through the stream: ``astream``/``stream`` as themselves, ``ainvoke``/
``invoke`` (a graph's ``stream_mode="values"``, a plain ``invoke``) by streaming from the inner model and returning
the message a non-streaming call would have given. The chunks pass on unchanged and undelayed."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any, AsyncIterator, Iterator, Optional, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, message_chunk_to_message
from langchain_core.output_parsers.openai_tools import make_invalid_tool_call, parse_tool_call
from langchain_core.exceptions import OutputParserException
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import PrivateAttr

from .._hosted.chat import Chat
from .._hosted.loop_thread import LoopThread
from .messages import ChunkReader, offered_of, outcomes_of, users_of


class HeadstartChatModel(BaseChatModel):
    """``inner``, with headstart: each model call is one response of the chat's session; a call to an early tool
    starts the moment its arguments are whole. Made by ``headstart.langchain.with_headstart``."""

    inner: BaseChatModel
    """The model that answers."""

    _chat: Chat = PrivateAttr()
    _sync: LoopThread = PrivateAttr(default_factory=lambda: LoopThread("headstart-langchain"))

    @property
    def session_id(self) -> str:
        """The store's session of the chat."""
        return self._chat.id

    @property
    def _llm_type(self) -> str:
        return f"headstart-{self.inner._llm_type}"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return dict(self.inner._identifying_params)

    @property
    def model_name(self) -> Optional[str]:
        """The inner model's name (``create_agent`` reads it to choose how structured output is asked)."""
        name = getattr(self.inner, "model_name", None) or getattr(self.inner, "model", None)
        return name if isinstance(name, str) else None

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """The tools as the inner model binds them (its own format, ``tool_choice`` and options), bound on this
        model, so each call's request is the inner model's."""
        bound = self.inner.bind_tools(tools, tool_choice=tool_choice, **kwargs)
        return self.bind(**getattr(bound, "kwargs", {}))

    async def _through(self, messages: list[BaseMessage], stop: Optional[list[str]], lenient: bool, kwargs: dict[str, Any]) -> AsyncIterator[ChatGenerationChunk]:
        """The inner model's chunks, each read into the engine as it passes; the stream's end (or failure) ends
        the response. ``lenient``: the calls are read as LangChain merges a stream."""
        response = await self._chat.respond(users_of(messages), offered_of(kwargs), outcomes_of(messages))
        reader = ChunkReader(response.feed)
        # No run manager: the base class reports each chunk to the callbacks itself. Closing this closes the pass.
        async with aclosing(response.passing(self.inner._astream(messages, stop=stop, **kwargs), reader.read)) as chunks:
            async for chunk in chunks:
                yield chunk
        response.ended(reader.finish(lenient=lenient))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: Optional[list[str]] = None,
        run_manager: Optional[AsyncCallbackManagerForLLMRun] = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        async for chunk in self._through(messages, stop, True, kwargs):
            yield chunk

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: Optional[list[str]] = None,
        run_manager: Optional[AsyncCallbackManagerForLLMRun] = None,
        **kwargs: Any,
    ) -> ChatResult:
        # The message the inner model's own invoke would give: a streaming model's merged stream (cut arguments
        # read as far as they go), else a non-streaming response's (cut arguments make an invalid call).
        lenient = getattr(self.inner, "streaming", False) is True
        chunks = [chunk async for chunk in self._through(messages, stop, lenient, kwargs)]
        return as_generated(chunks, lenient=lenient)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: Optional[list[str]] = None,
        run_manager: Optional[CallbackManagerForLLMRun] = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from self._sync.iterate(lambda: self._through(messages, stop, True, kwargs))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: Optional[list[str]] = None,
        run_manager: Optional[CallbackManagerForLLMRun] = None,
        **kwargs: Any,
    ) -> ChatResult:
        async def generate() -> ChatResult:
            return await self._agenerate(messages, stop, **kwargs)

        return self._sync.run(generate)

    @property
    def loop_thread(self) -> LoopThread:
        """The thread whose loop runs the chat for synchronous calls (``invoke``, ``stream``)."""
        return self._sync


def as_generated(chunks: list[ChatGenerationChunk], *, lenient: bool) -> ChatResult:
    """The chunks of a stream as the result of one call: merged, and read as LangChain reads a merged stream
    (``lenient``) or with each call's arguments read strictly (cut arguments make an invalid call, as a provider's
    non-streaming response is read)."""
    if not chunks:
        raise ValueError("No generations found in stream.")
    merged = chunks[0]
    if len(chunks) > 1:
        merged = merged + chunks[1:]
    chunk = merged.message
    if lenient or not isinstance(chunk, AIMessageChunk):
        return ChatResult(generations=[ChatGeneration(message=message_chunk_to_message(chunk), generation_info=merged.generation_info)])
    tool_calls = []
    invalid = []
    for piece in chunk.tool_call_chunks:
        raw = {"function": {"name": piece.get("name") or "", "arguments": piece.get("args") or ""}, "id": piece.get("id")}
        try:
            parsed = parse_tool_call(raw, return_id=True)
        except OutputParserException as error:
            invalid.append(make_invalid_tool_call(raw, str(error)))
            continue
        if parsed is not None:
            tool_calls.append(parsed)
    message = AIMessage(
        content=chunk.content,
        additional_kwargs=chunk.additional_kwargs,
        response_metadata=chunk.response_metadata,
        id=chunk.id,
        name=chunk.name,
        tool_calls=tool_calls,
        invalid_tool_calls=invalid,
        usage_metadata=chunk.usage_metadata,
    )
    return ChatResult(generations=[ChatGeneration(message=message, generation_info=merged.generation_info)])

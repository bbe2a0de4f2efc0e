"""The inside of the sandbox: an ``InferencePort`` and tools that ask the host over stdio.

The container has no network, so its agent cannot reach an engine: every inference is a
request line to the host (:class:`~jarvis.domain.sandbox.protocol.InferenceAsk`) and the
host answers through its own engine, chunk by chunk when streamed. A tool that needs the
host (``web_search``, ``llm``...) is offered only when the user allowed it and is a request
line too. Requests carry ids, so concurrent inferences (an RLM's ``llm_batch``, parallel
tool calls) share the one channel.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol

from jarvis.domain import errors
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Completion, StreamChunk
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.sandbox.protocol import (
    HOST_MESSAGE,
    ChunkReply,
    CompletionReply,
    HostMessage,
    InferenceAsk,
    InferenceErrorReply,
    InferenceRequestModel,
    ToolAsk,
    ToolReply,
    encode,
)
from jarvis.domain.tools.specs import ToolResult, ToolSpec

_INFERENCE_ERRORS: dict[str, type[errors.InferenceError]] = {
    cls.__name__: cls
    for cls in (
        errors.InferenceError,
        errors.EngineUnavailableError,
        errors.RateLimitedError,
        errors.EngineTimeoutError,
        errors.ContextTooLongError,
        errors.ToolsNotSupportedError,
        errors.EngineProtocolError,
    )
}

INFERENCE_KINDS = frozenset({*_INFERENCE_ERRORS, "ModelNotFoundError"})
"""The error kinds of a run that failed on an inference."""


def inference_error(kind: str, message: str, hint: str, *, engine: str) -> errors.InferenceError:
    """The typed error the host's engine raised, rebuilt inside (agents react to the type:
    e.g. ``ToolsNotSupportedError`` makes the orchestrator switch protocol)."""
    if kind == "ModelNotFoundError":
        return errors.EngineProtocolError(message, engine=engine, hint=hint)
    cls = _INFERENCE_ERRORS.get(kind, errors.InferenceError)
    return cls(message, engine=engine, hint=hint)


class LineSink(Protocol):
    """Where the inside writes its lines (the protocol's own copy of stdout)."""

    async def write_line(self, line: str) -> None: ...


class HostLink:
    """The requests in flight to the host, and the replies routed back to them by id."""

    def __init__(self, sink: LineSink) -> None:
        self._sink = sink
        self._lock = asyncio.Lock()
        self._next = 0
        self._pending: dict[int, asyncio.Queue[HostMessage | None]] = {}
        self._closed = False

    async def send_line(self, line: str) -> None:
        async with self._lock:
            await self._sink.write_line(line)

    def open(self) -> tuple[int, asyncio.Queue[HostMessage | None]]:
        if self._closed:
            raise errors.SandboxError("The host is no longer answering.")
        self._next += 1
        queue: asyncio.Queue[HostMessage | None] = asyncio.Queue()
        self._pending[self._next] = queue
        return self._next, queue

    def done(self, request_id: int) -> None:
        self._pending.pop(request_id, None)

    def dispatch(self, line: str) -> None:
        """Route one line from the host to the request it answers (unknown ids: a reply
        to a stream the agent stopped reading; dropped)."""
        message = HOST_MESSAGE.validate_json(line)
        request_id = getattr(message, "id", None)
        if isinstance(request_id, int) and request_id in self._pending:
            self._pending[request_id].put_nowait(message)

    def close(self) -> None:
        """The host's end closed: every request in flight fails."""
        self._closed = True
        for queue in self._pending.values():
            queue.put_nowait(None)


class BrokeredInference:
    """Satisfies ``InferencePort`` by asking the host for every generation."""

    def __init__(self, link: HostLink, *, engine_id: str, model: str) -> None:
        self._link = link
        self._engine_id = engine_id or "host"
        self._model = model

    @property
    def engine_id(self) -> str:
        return self._engine_id

    @property
    def base_url(self) -> str:
        return "sandbox://host"

    async def _ask(
        self, request: InferenceRequest, *, stream: bool
    ) -> tuple[int, asyncio.Queue[HostMessage | None]]:
        request_id, queue = self._link.open()
        ask = InferenceAsk(id=request_id, stream=stream, request=InferenceRequestModel.of(request))
        await self._link.send_line(encode(ask))
        return request_id, queue

    def _failure(self, reply: HostMessage | None) -> errors.JarvisError:
        if isinstance(reply, InferenceErrorReply):
            return inference_error(reply.kind, reply.message, reply.hint, engine=self._engine_id)
        if reply is None:
            return errors.EngineUnavailableError(
                "The host stopped answering the sandbox's inference requests.",
                engine=self._engine_id,
            )
        return errors.EngineProtocolError(
            f"The host answered an inference with a '{reply.type}' message.",
            engine=self._engine_id,
        )

    async def generate(self, request: InferenceRequest) -> Completion:
        request_id, queue = await self._ask(request, stream=False)
        try:
            reply = await queue.get()
        finally:
            self._link.done(request_id)
        if isinstance(reply, CompletionReply):
            return reply.completion.value()
        raise self._failure(reply)

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        request_id, queue = await self._ask(request, stream=True)
        try:
            while True:
                reply = await queue.get()
                if not isinstance(reply, ChunkReply):
                    raise self._failure(reply)
                chunk = reply.value()
                yield chunk
                if chunk.is_final:
                    return
        finally:
            self._link.done(request_id)

    async def list_models(self) -> list[str]:
        return [self._model] if self._model else []

    async def health(self) -> bool:
        return True

    async def aclose(self) -> None:
        return None


class BrokeredTool:
    """Satisfies ``ToolPort``: a host tool the user allowed, run by the host (with the
    host's own argument checks and limits) and answered over the channel."""

    def __init__(self, link: HostLink, spec: ToolSpec) -> None:
        self._link = link
        self._spec = spec

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def execute(self, arguments: JSONObject) -> ToolResult:
        request_id, queue = self._link.open()
        try:
            await self._link.send_line(
                encode(ToolAsk(id=request_id, name=self._spec.name, arguments=arguments))
            )
            reply = await queue.get()
        finally:
            self._link.done(request_id)
        if isinstance(reply, ToolReply):
            return reply.result.value()
        return ToolResult(
            tool_name=self._spec.name,
            content="Error: the host did not answer this tool call.",
            success=False,
            metadata={"error": "sandbox"},
        )

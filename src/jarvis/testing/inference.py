"""``ScriptedInference``: an inference engine that replies from a script."""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TypeAlias

from jarvis.domain.errors import EngineUnavailableError, ModelNotFoundError
from jarvis.domain.llm.completion import Completion, FinishReason, StreamChunk, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import ToolCall

ScriptedReply: TypeAlias = "str | Completion | Exception | Sequence[StreamChunk]"
"""A text answer, a full completion (tool calls included), an error to raise, or the exact
stream chunks to deliver."""

_WORDS = re.compile(r"\S+\s*|\s+")


def _usage_for(request: InferenceRequest, content: str) -> Usage:
    prompt = sum(len(m.content) for m in request.messages) // 4 + 4 * len(request.messages)
    return Usage(prompt_tokens=prompt, completion_tokens=max(1, len(content) // 4))


class ScriptedInference:
    """Replies in order from ``replies``; the last reply repeats once the script runs out.

    Every request is recorded in :attr:`requests`, so tests assert on what the agent asked.
    With ``models`` and ``strict_models=True`` an unknown model raises
    ``ModelNotFoundError`` like a real engine would. ``healthy=False`` makes every call
    raise ``EngineUnavailableError``. ``latency`` (seconds) delays every reply, like a slow
    engine, so time limits and cancellation can be tested.
    """

    def __init__(
        self,
        replies: Iterable[ScriptedReply] = ("OK",),
        *,
        engine_id: str = "scripted",
        base_url: str = "",
        models: Sequence[str] = ("scripted-model",),
        strict_models: bool = False,
        healthy: bool = True,
        latency: float = 0.0,
    ) -> None:
        self._script: deque[ScriptedReply] = deque(replies)
        self.latency = latency
        self._last: ScriptedReply = "OK"
        self._engine_id = engine_id
        self._base_url = base_url
        self.models = list(models)
        self.strict_models = strict_models
        self.healthy = healthy
        self.requests: list[InferenceRequest] = []
        self.closed = False

    @property
    def engine_id(self) -> str:
        return self._engine_id

    @property
    def base_url(self) -> str:
        return self._base_url

    def add(self, *replies: ScriptedReply) -> None:
        """Append replies to the script."""
        self._script.extend(replies)

    def _next(self, request: InferenceRequest) -> ScriptedReply:
        if not self.healthy:
            raise EngineUnavailableError(
                "Scripted engine is marked unavailable.", engine=self._engine_id
            )
        if self.strict_models and request.model not in self.models:
            raise ModelNotFoundError(request.model, available=self.models, engine=self._engine_id)
        self.requests.append(request)
        if self._script:
            self._last = self._script.popleft()
        return self._last

    def _completion(self, request: InferenceRequest, reply: ScriptedReply) -> Completion:
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, str):
            usage = _usage_for(request, reply)
            if usage.completion_tokens > request.max_tokens:
                # like a real engine: cut at max_tokens (4 characters a token) and say so
                return Completion(
                    content=reply[: max(1, request.max_tokens) * 4],
                    finish_reason="length",
                    usage=Usage(
                        prompt_tokens=usage.prompt_tokens, completion_tokens=request.max_tokens
                    ),
                    model=request.model,
                )
            return Completion(
                content=reply,
                finish_reason="stop",
                usage=usage,
                model=request.model,
            )
        if isinstance(reply, Completion):
            return reply
        # a chunk script used for a non-streaming call: assemble it
        content = "".join(c.content for c in reply)
        calls: tuple[ToolCall, ...] = ()
        finish: FinishReason = "stop"
        usage = Usage()
        for chunk in reply:
            calls = calls + chunk.tool_calls
            finish = chunk.finish_reason or finish
            usage = chunk.usage or usage
        return Completion(
            content=content,
            tool_calls=calls,
            finish_reason=finish,
            usage=usage,
            model=request.model,
        )

    async def generate(self, request: InferenceRequest) -> Completion:
        reply = self._next(request)
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        return self._completion(request, reply)

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        reply = self._next(request)
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if isinstance(reply, Exception):
            raise reply
        if not isinstance(reply, (str, Completion)):
            for chunk in reply:
                yield chunk
            return
        completion = self._completion(request, reply)
        for piece in _WORDS.findall(completion.content):
            yield StreamChunk(content=piece, model=completion.model)
        yield StreamChunk(
            tool_calls=completion.tool_calls,
            finish_reason=completion.finish_reason,
            usage=completion.usage,
            model=completion.model,
        )

    async def list_models(self) -> list[str]:
        if not self.healthy:
            raise EngineUnavailableError(
                "Scripted engine is marked unavailable.", engine=self._engine_id
            )
        return list(self.models)

    async def health(self) -> bool:
        return self.healthy

    async def aclose(self) -> None:
        self.closed = True

"""One inference of the tool loop: fitted to the context window, streamed or not, bounded
by the run's deadline, its usage added to the run's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from jarvis.domain.errors import ContextTooLongError
from jarvis.domain.llm.completion import Completion, StreamChunk, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.loop.loop_run import LoopAgent, LoopRun, Reply
from jarvis.domain.protocols.tool_protocol import RequestShape, TextFilter
from jarvis.domain.run.updates import TextDelta


async def infer(
    agent: LoopAgent, run: LoopRun, shape: RequestShape, deadline: float | None, reply: Reply
) -> AsyncIterator[TextDelta]:
    """The one inference of a turn or of the wrap-up, streamed or not, into ``reply``.

    The request is fitted to the run's context window; when the engine says it is too
    long (before anything was streamed) it is shrunk and sent again, at most
    ``overflow_retries`` times. When ``deadline`` passes, ``reply.completion`` stays
    ``None``.
    """
    request = request_for(agent, run, shape)
    retries = agent.context_window.overflow_retries
    while True:
        try:
            if run.streaming:
                text_filter = run.protocol.text_filter()
                async for delta in stream_reply(agent, request, text_filter, deadline, reply):
                    yield delta
            else:
                reply.completion = await generate_until(agent, request, deadline)
            break
        except ContextTooLongError:
            smaller = run.window.shrink(request) if retries > 0 and not reply.chunks else None
            if smaller is None:
                raise
            request, retries = smaller, retries - 1
        except TimeoutError:
            if deadline is None or asyncio.get_running_loop().time() < deadline:
                raise
            return
    assert reply.completion is not None
    account(run, reply.completion)


def request_for(agent: LoopAgent, run: LoopRun, shape: RequestShape) -> InferenceRequest:
    sampling = agent.sampling
    return InferenceRequest(
        messages=run.window.fit(run.messages),
        model=agent.model,
        temperature=sampling.temperature,
        max_tokens=sampling.max_tokens,
        tools=shape.tools,
        tool_choice=shape.tool_choice,
        response_format=shape.response_format,
        options=sampling.engine_options,
    )


async def generate_until(
    agent: LoopAgent, request: InferenceRequest, deadline: float | None
) -> Completion:
    if deadline is None:
        return await agent.generate(request)
    async with asyncio.timeout_at(deadline):
        return await agent.generate(request)


async def stream_reply(
    agent: LoopAgent,
    request: InferenceRequest,
    text_filter: TextFilter,
    deadline: float | None,
    reply: Reply,
) -> AsyncIterator[TextDelta]:
    """Stream one inference: visible text as ``TextDelta``, then the whole completion in
    ``reply``. The deadline bounds every wait for a chunk (never a ``yield``)."""
    parts: list[str] = []
    final: StreamChunk | None = None
    stream = agent.stream_inference(request)
    try:
        while True:
            try:
                if deadline is None:
                    chunk = await anext(stream)
                else:
                    async with asyncio.timeout_at(deadline):
                        chunk = await anext(stream)
            except StopAsyncIteration:
                break
            reply.chunks += 1
            if chunk.content:
                parts.append(chunk.content)
                visible = text_filter.feed(chunk.content)
                if visible:
                    reply.shown.append(visible)
                    yield TextDelta(text=visible)
            if chunk.is_final:
                final = chunk
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    reply.completion = _completion("".join(parts), final, request.model)


def _completion(content: str, final: StreamChunk | None, model: str) -> Completion:
    if final is None:
        return Completion(content=content, model=model)
    return Completion(
        content=content,
        tool_calls=final.tool_calls,
        finish_reason=final.finish_reason or "stop",
        usage=final.usage or Usage(),
        model=final.model or model,
    )


def account(run: LoopRun, completion: Completion) -> None:
    """Add one inference's turn and usage to the run."""
    run.turns += 1
    run.usage = run.usage + completion.usage
    run.finish_reason = completion.finish_reason
    if completion.model:
        run.model = completion.model
    text = run.protocol.visible_text(completion)
    if text:
        run.last_content = text

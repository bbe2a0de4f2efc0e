"""The contract every agent meets, and the helpers they share."""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from typing import ClassVar, Self

from jarvis.domain.llm.completion import Completion, StreamChunk, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, Role
from jarvis.domain.loop.options import AgentOptions, AgentParts
from jarvis.domain.loop.settings import PromptSettings, SamplingSettings
from jarvis.domain.ports import InferencePort
from jarvis.domain.run.contract import AgentContext, AgentResult
from jarvis.domain.run.events import (
    AgentRunEnded,
    AgentRunStarted,
    EventBus,
    InferenceEnded,
    InferenceStarted,
)
from jarvis.domain.run.updates import RunFinished, RunUpdate

DEFAULT_SYSTEM_PROMPT = (
    # Worded for small local models too: with SmolLM2-135M, naming the assistant (or the
    # earlier "running locally on ..." phrasing) tipped answers into French nonsense, while
    # this wording answers plain factual questions correctly even at temperature 0.7.
    "You are a helpful AI assistant. You run locally, on the user's own hardware. "
    "Answer helpfully, concisely and accurately."
)


class BaseAgent(ABC):
    """An agent answers one input, optionally with context, and returns a typed result.

    The core is async (``arun``/``astream``) so that parallel tool calls, sub-model
    batches and many concurrent streams are cheap; ``run`` is the synchronous facade.
    Nothing of a run is kept on the agent: one instance serves any number of concurrent
    runs.

    Settings come whole, as value objects: ``sampling`` (default: the class's
    :attr:`default_sampling`) and ``prompts`` (see :class:`PromptSettings`).
    """

    agent_id: ClassVar[str] = "base"
    accepts_tools: ClassVar[bool] = False
    uses_repl: ClassVar[bool] = False
    """True for agents that run code: they take a REPL factory as ``repl=``."""
    reads_memory_itself: ClassVar[bool] = False
    """True for agents that use ``AgentContext.memory_results`` their own way (the RLM as
    its ``context``, operatives among their recalled notes); the others get them in the
    system prompt, quoted as data."""
    default_sampling: ClassVar[SamplingSettings] = SamplingSettings()

    def __init__(
        self,
        inference: InferencePort,
        model: str,
        *,
        sampling: SamplingSettings | None = None,
        prompts: PromptSettings | None = None,
        bus: EventBus | None = None,
    ) -> None:
        self.inference = inference
        self.model = model
        self.bus = bus
        self.sampling = self.default_sampling if sampling is None else sampling
        self.prompts = PromptSettings() if prompts is None else prompts

    @classmethod
    def from_options(cls, parts: AgentParts, options: AgentOptions) -> Self:
        """The agent built from ``parts`` and the named ``options`` it reads (this one reads
        none); see :mod:`jarvis.domain.loop.options`."""
        return cls(
            parts.inference,
            parts.model,
            sampling=parts.sampling,
            prompts=parts.prompts,
            bus=parts.bus,
        )

    @property
    def temperature(self) -> float:
        return self.sampling.temperature

    @property
    def max_tokens(self) -> int:
        return self.sampling.max_tokens

    # -- the contract ---------------------------------------------------------------------

    @abstractmethod
    async def arun(self, input: str, context: AgentContext | None = None) -> AgentResult:
        """Answer ``input`` and return the typed result."""

    async def astream(
        self, input: str, context: AgentContext | None = None
    ) -> AsyncIterator[RunUpdate]:
        """Report the run as it happens; the last update is always ``RunFinished``.

        The default runs to the end and reports only the result; agents that can stream
        override it.
        """
        yield RunFinished(result=await self.arun(input, context))

    def run(self, input: str, context: AgentContext | None = None) -> AgentResult:
        """Synchronous facade over :meth:`arun` (not for use inside a running loop)."""
        return asyncio.run(self.arun(input, context))

    # -- shared helpers -------------------------------------------------------------------

    def template(self) -> str:
        """The agent's own system prompt (protocol instructions included)."""
        return DEFAULT_SYSTEM_PROMPT

    def effective_system_prompt(self) -> str:
        prompts = self.prompts
        base = prompts.system_prompt if prompts.system_prompt is not None else self.template()
        parts = [p for p in (base.strip(), prompts.persona_prompt.strip()) if p]
        return "\n\n".join(parts)

    def build_messages(self, input: str, context: AgentContext | None) -> list[Message]:
        """One leading system message (template, persona, folded context system
        messages), then the prior conversation, then the input."""
        system_parts = [self.effective_system_prompt()]
        rest: list[Message] = []
        if context is not None:
            for message in context.conversation:
                if message.role is Role.SYSTEM:
                    if message.content.strip():
                        system_parts.append(message.content.strip())
                else:
                    rest.append(message)
        system = "\n\n".join(p for p in system_parts if p)
        messages = [Message.system(system)] if system else []
        messages.extend(rest)
        messages.append(Message.user(input))
        return messages

    def request(self, messages: Sequence[Message]) -> InferenceRequest:
        """An inference request with this agent's model and sampling settings."""
        sampling = self.sampling
        return InferenceRequest(
            messages=tuple(messages),
            model=self.model,
            temperature=sampling.temperature,
            max_tokens=sampling.max_tokens,
            options=sampling.engine_options,
        )

    async def generate(self, request: InferenceRequest) -> Completion:
        """One inference, with INFERENCE_START/END published when someone listens."""
        bus = self.bus
        if bus is None:
            return await self.inference.generate(request)
        recording = bus.recording
        if recording is not None and not bus.has_subscribers:
            started = time.monotonic()
            try:
                completion = await self.inference.generate(request)
            except BaseException:
                recording.inference_started(self.inference.engine_id, request.model, started)
                raise
            usage = completion.usage
            recording.inference(
                self.inference.engine_id,
                request.model,
                started,
                usage.prompt_tokens,
                usage.completion_tokens,
                completion.finish_reason,
                len(completion.tool_calls),
            )
            return completion
        if not bus.has_subscribers:
            return await self.inference.generate(request)
        return await self._generate_published(bus, request)

    async def _generate_published(self, bus: EventBus, request: InferenceRequest) -> Completion:
        """One inference, its events published (and recorded, when the bus records)."""
        recording = bus.recording
        bus.publish(InferenceStarted(engine=self.inference.engine_id, model=request.model))
        started = time.monotonic()  # a duration: no need of the loop's clock (a system call)
        try:
            completion = await self.inference.generate(request)
        except BaseException:
            if recording is not None:
                recording.inference_started(self.inference.engine_id, request.model, started)
            raise
        usage = completion.usage
        if recording is not None:
            recording.inference(
                self.inference.engine_id,
                request.model,
                started,
                usage.prompt_tokens,
                usage.completion_tokens,
                completion.finish_reason,
                len(completion.tool_calls),
            )
        bus.publish(
            InferenceEnded(
                engine=self.inference.engine_id,
                model=request.model,
                usage=usage,
                finish_reason=completion.finish_reason,
                tool_calls=completion.tool_calls,
                latency_seconds=time.monotonic() - started,
            )
        )
        return completion

    async def stream_inference(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        """A streamed inference, with INFERENCE_START/END published when someone listens."""
        bus = self.bus
        publishing = bus is not None and bus.has_subscribers
        recording = None if bus is None else bus.recording
        step = -1
        if recording is not None:
            step = recording.inference_started(self.inference.engine_id, request.model)
        if publishing and bus is not None:
            bus.publish(InferenceStarted(engine=self.inference.engine_id, model=request.model))
        started = time.monotonic()
        first_token: float | None = None
        async for chunk in self.inference.stream(request):
            if first_token is None and chunk.content:
                first_token = time.monotonic() - started
            if chunk.is_final and recording is not None:
                usage = chunk.usage or Usage()
                recording.inference_ended(
                    step,
                    usage.prompt_tokens,
                    usage.completion_tokens,
                    chunk.finish_reason or "stop",
                    len(chunk.tool_calls),
                    first_token,
                )
            if chunk.is_final and publishing and bus is not None:
                bus.publish(
                    InferenceEnded(
                        engine=self.inference.engine_id,
                        model=request.model,
                        usage=chunk.usage or Usage(),
                        finish_reason=chunk.finish_reason or "stop",
                        tool_calls=chunk.tool_calls,
                        latency_seconds=time.monotonic() - started,
                        first_token_seconds=first_token,
                    )
                )
            yield chunk

    def run_started(self, input: str) -> None:
        bus = self.bus
        if bus is None:
            return
        recording = bus.recording
        if recording is not None and bus.records_runs:
            recording.run_started(self.agent_id, input)
        if bus.has_subscribers:
            bus.publish(AgentRunStarted(agent=self.agent_id, input=input))

    def run_stopped(self, exc: BaseException, *, turns: int = 0) -> None:
        """Publish (and record) the end of a run that raised ``exc`` (cancelled, or an
        error)."""
        cancelled = isinstance(exc, asyncio.CancelledError | GeneratorExit)
        self.publish_end(
            turns, "cancelled" if cancelled else "error", "" if cancelled else type(exc).__name__
        )

    def run_ended(self, result: AgentResult) -> None:
        self.publish_end(result.turns, result.stop_reason)

    def publish_end(self, turns: int, stop_reason: str, error: str = "") -> None:
        """Publish (and record) the end of this agent's run."""
        bus = self.bus
        if bus is None:
            return
        recording = bus.recording
        if recording is not None and bus.records_runs:
            recording.run_ended(turns, stop_reason, error)
        if bus.has_subscribers:
            bus.publish(
                AgentRunEnded(
                    agent=self.agent_id, turns=turns, stop_reason=stop_reason, error=error
                )
            )

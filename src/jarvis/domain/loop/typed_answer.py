"""Typed answers from any agent: the engine's own structured output where it has one, the
answer checked, an invalid one sent back with its errors a bounded number of times.

Two pieces, both agent-agnostic:

* :class:`StructuredAnswers` wraps the run's engine (an ``InferencePort``). A request that
  offers tools gets one more, ``final_answer``, whose parameters are the answer's schema: a
  model that calls it has given its answer, which the agent receives as its final text
  (so tools and typed answers combine, with the engine's tool-call grammar shaping the
  answer). A tool-less request of an agent whose every such request is its answer (``simple``)
  carries the schema as its response format (Ollama ``format``, OpenAI ``json_schema``,
  llama.cpp's grammar). An engine that refuses structured output altogether is asked
  again without it, once per run, and the answer is then only prompted for and checked.
* :func:`run_typed` runs the agent, decodes and checks its answer, and when it is invalid
  continues the conversation with the errors, at most ``spec.retries`` times; then it
  raises :class:`~jarvis.domain.errors.OutputValidationError`. Usage and turns of every
  attempt are summed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from jarvis.domain.errors import OutputValidationError, StructuredOutputNotSupportedError
from jarvis.domain.llm.completion import Completion, StreamChunk, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.loop.wrapped_engine import WrappedEngine
from jarvis.domain.ports import InferencePort
from jarvis.domain.run.contract import AgentContext, AgentResult
from jarvis.domain.tools.specs import ToolResult, ToolSpec
from jarvis.domain.typed_output import (
    InvalidOutput,
    OutputSchema,
    OutputSpec,
    answer_instruction,
    decode_reply,
    feedback,
)

T = TypeVar("T")

FINAL_ANSWER_TOOL = "final_answer"


class StructuredAnswers(WrappedEngine):
    """An ``InferencePort`` that asks the engine for answers shaped by ``schema``.

    ``constrain_plain``: a request without tools is the run's answer (the ``simple`` agent),
    so it gets the schema as its response format. A request that already has a response
    format (the orchestrator's structured mode) is left as it is.
    """

    def __init__(
        self, inner: InferencePort, schema: OutputSchema, *, constrain_plain: bool
    ) -> None:
        self.inner = inner
        self.schema = schema
        self.constrain_plain = constrain_plain
        self.refused = False
        """Set once the engine refused structured output: the rest of the run prompts only."""

    def wrapped(self) -> InferencePort:
        return self.inner

    async def aclose(self) -> None:
        """The wrapped engine belongs to whoever built it: nothing to close here."""

    def final_tool_name(self, tools: tuple[ToolSpec, ...]) -> str:
        """``final_answer``, or a free variant when a tool of the run has that name."""
        names = {tool.name for tool in tools}
        name, index = FINAL_ANSWER_TOOL, 1
        while name in names:
            index += 1
            name = f"{FINAL_ANSWER_TOOL}_{index}"
        return name

    def shaped(self, request: InferenceRequest) -> tuple[InferenceRequest, str | None]:
        """The request as sent, and the name of the final-answer tool it offers (if any)."""
        if request.response_format is not None:
            return request, None
        if request.tools and request.tool_choice == "auto":  # a forced call is no answer yet
            name = self.final_tool_name(request.tools)
            tool = ToolSpec(
                name=name,
                description=(
                    "Give your final answer. Call this once you have the answer, with the "
                    "answer itself as the arguments (a JSON object matching the schema)."
                ),
                parameters=self.schema.schema,
            )
            return replace(request, tools=(*request.tools, tool)), name
        if self.constrain_plain and not request.tools and not self.refused:
            return replace(request, response_format=self.schema.response_format()), None
        return request, None

    def _unconstrained(self, request: InferenceRequest, sent: InferenceRequest) -> bool:
        """Whether a refusal of ``sent`` is worth a retry without its response format."""
        return sent.response_format is not None and request.response_format is None

    async def generate(self, request: InferenceRequest) -> Completion:
        sent, final_tool = self.shaped(request)
        try:
            completion = await self.inner.generate(sent)
        except StructuredOutputNotSupportedError:
            if not self._unconstrained(request, sent):
                raise
            self.refused = True
            return await self.inner.generate(request)
        return _as_answer(completion, final_tool)

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        sent, final_tool = self.shaped(request)
        chunks = self.inner.stream(sent)
        try:
            first = await anext(chunks, None)
        except StructuredOutputNotSupportedError:
            if not self._unconstrained(request, sent):
                raise
            self.refused = True
            sent, chunks = request, self.inner.stream(request)
            first = await anext(chunks, None)
        if first is None:
            return
        pending: StreamChunk | None = first
        while pending is not None:
            chunk = pending
            pending = await anext(chunks, None)
            answer = _final_call(chunk.tool_calls, final_tool) if chunk.is_final else None
            if answer is None:
                yield chunk
                continue
            yield StreamChunk(content=answer.arguments_json(), model=chunk.model)
            yield replace(chunk, tool_calls=(), finish_reason="stop")


def _final_call(calls: tuple[ToolCall, ...], final_tool: str | None) -> ToolCall | None:
    if final_tool is None:
        return None
    return next((call for call in calls if call.name == final_tool), None)


def _as_answer(completion: Completion, final_tool: str | None) -> Completion:
    """A call of the final-answer tool becomes the reply's text (its arguments, as JSON)."""
    call = _final_call(completion.tool_calls, final_tool)
    if call is None:
        return completion
    return replace(completion, content=call.arguments_json(), tool_calls=(), finish_reason="stop")


@dataclass(frozen=True, slots=True, kw_only=True)
class TypedResult(Generic[T]):
    """A run whose answer matched its schema: ``result.content`` is the answer as compact
    JSON, ``output`` what the parser made of it; usage and turns cover every attempt."""

    result: AgentResult
    output: T
    attempts: int


def typed_question(question: str, schema: OutputSchema) -> str:
    """The question as the agent receives it: with the answer's shape appended."""
    return f"{question}\n\n{answer_instruction(schema)}"


async def run_typed(
    agent: BaseAgent,
    question: str,
    context: AgentContext | None,
    spec: OutputSpec[T],
    *,
    engine: str = "",
) -> TypedResult[T]:
    """Run ``agent`` until its answer matches ``spec`` (at most ``spec.retries`` + 1 runs)."""
    base = context or AgentContext()
    conversation = base.conversation
    asked = typed_question(question, spec.schema)
    usage = Usage()
    turns = 0
    tool_results: list[ToolResult] = []
    reply = ""
    errors: tuple[str, ...] = ()
    for attempt in range(1, spec.retries + 2):
        result = await agent.arun(asked, replace(base, conversation=conversation))
        usage += result.usage
        turns += result.turns
        tool_results.extend(result.tool_results)
        reply = result.content
        try:
            value = decode_reply(reply)
            output = spec.parser.parse(value)
        except InvalidOutput as exc:
            errors = exc.errors
        else:
            merged = replace(
                result,
                content=json.dumps(value, ensure_ascii=False, separators=(",", ":")),
                usage=usage,
                turns=turns,
                tool_results=tuple(tool_results),
                metadata={**result.metadata, "output_attempts": attempt},
            )
            return TypedResult(result=merged, output=output, attempts=attempt)
        conversation = (*conversation, Message.user(asked), Message.assistant(reply))
        asked = feedback(errors)
    attempts = spec.retries + 1
    raise OutputValidationError(
        f"The model's answer did not match the requested schema after {attempts} "
        f"attempt{'s' if attempts > 1 else ''} ({errors[0] if errors else 'invalid'}).",
        last_reply=reply,
        errors=errors,
        attempts=attempts,
        usage=usage,
        engine=engine,
        hint="A larger model, a simpler schema or more output retries may help.",
    )

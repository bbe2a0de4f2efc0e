"""What CodeAct (``native_openhands``) and the RLM share: the one tool loop, plus a REPL.

Running code is a tool call to an internal tool (:class:`ReplCellTool`) that the agent adds
beside the user's tools, so it goes through the executor (events, timeout, output bound) and
the loop guard like any other call. Each run gets its own REPL session, started on the first
piece of code and closed when the run ends, and its own :class:`SubModelCallbacks`, so the
code's ``llm_query``/``llm_batch``/``tool_call`` reach the sub-model and the user's tools.
The sub-calls' usage is added to the run's usage and their tool results to its results.

Context window: with ``max_prompt_tokens`` set, every request is fitted to it (oldest steps
first, see :mod:`~jarvis.domain.agents.context_window`); whatever the setting, when the engine
reports the prompt as too long, the request is refitted to half its size and the turn
retried (three times at most), and the smaller budget holds for the rest of the run.

Runs of one agent instance are serialised (the REPL session belongs to the running run).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import ClassVar, TypedDict

from jarvis.domain.agent_contract import AgentContext, AgentResult
from jarvis.domain.agents.base import BaseAgent
from jarvis.domain.agents.context_window import estimate_tokens, fit_messages
from jarvis.domain.agents.loop_guard import LoopGuardConfig
from jarvis.domain.agents.repl_cell import ReplCellTool
from jarvis.domain.agents.sub_calls import SubModelCallbacks
from jarvis.domain.agents.tool_loop import ToolUsingAgent
from jarvis.domain.completion import Completion, StreamChunk
from jarvis.domain.errors import ContextTooLongError
from jarvis.domain.events import EventBus
from jarvis.domain.inference import InferenceRequest
from jarvis.domain.json_types import JSONObject
from jarvis.domain.messages import Message
from jarvis.domain.ports import InferencePort, ReplPort, ToolPort
from jarvis.domain.repl import ReplLimits
from jarvis.domain.tool_executor import ToolExecutor
from jarvis.domain.tools import ToolResult
from jarvis.domain.updates import RunFinished, RunUpdate

OVERFLOW_RETRIES = 3
"""How many times a turn is retried, each time at half the size, when the engine reports
that the prompt does not fit its context window."""
MIN_PROMPT_TOKENS = 256


class ReplAgentOptions(TypedDict, total=False):
    """Every keyword option of :class:`ReplUsingAgent` (what subclasses pass through)."""

    repl: ReplPort | None
    repl_limits: ReplLimits | None
    sub_model: str | None
    sub_temperature: float
    sub_max_tokens: int
    sub_concurrency: int
    max_sub_calls: int
    max_prompt_tokens: int | None
    tools: Sequence[ToolPort]
    max_turns: int | None
    max_seconds: float | None
    max_total_tokens: int | None
    loop_guard: LoopGuardConfig | None
    max_parse_errors: int | None
    max_output_chars: int | None
    bus: EventBus | None
    temperature: float | None
    max_tokens: int | None
    system_prompt: str | None
    persona_prompt: str
    options: JSONObject | None


class ReplUsingAgent(ToolUsingAgent):
    """A tool-using agent whose model also writes code that runs in an isolated REPL.

    ``repl`` is the REPL factory (the container passes the isolated subprocess REPL; tests
    may pass :class:`jarvis.testing.InMemoryRepl`). ``sub_model`` (default: ``model``),
    ``sub_temperature``, ``sub_max_tokens`` configure ``llm_query``/``llm_batch``;
    ``sub_concurrency`` bounds a batch's parallel calls and ``max_sub_calls`` the run's
    total. ``max_output_chars`` bounds what one execution (or tool) shows the model;
    ``max_prompt_tokens`` the estimated size of each request (``None``: no limit of its own,
    only the engine's).
    """

    uses_repl: ClassVar[bool] = True
    repl_tool_name: ClassVar[str] = "python"
    repl_tool_description: ClassVar[str] = (
        "Execute Python code in a persistent, isolated interpreter (standard library only, "
        "no network); returns stdout, stderr, the value of the last expression and errors."
    )
    default_max_output_chars: ClassVar[int] = 10_000
    default_max_prompt_tokens: ClassVar[int | None] = None

    def __init__(
        self,
        inference: InferencePort,
        model: str,
        *,
        repl: ReplPort | None = None,
        repl_limits: ReplLimits | None = None,
        sub_model: str | None = None,
        sub_temperature: float = 0.3,
        sub_max_tokens: int = 1024,
        sub_concurrency: int = 16,
        max_sub_calls: int = 100,
        max_prompt_tokens: int | None = None,
        tools: Sequence[ToolPort] = (),
        max_turns: int | None = None,
        max_seconds: float | None = None,
        max_total_tokens: int | None = None,
        loop_guard: LoopGuardConfig | None = None,
        max_parse_errors: int | None = None,
        max_output_chars: int | None = None,
        bus: EventBus | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        system_prompt: str | None = None,
        persona_prompt: str = "",
        options: JSONObject | None = None,
    ) -> None:
        output_chars = (
            self.default_max_output_chars if max_output_chars is None else max_output_chars
        )
        self.max_output_chars = output_chars
        self.repl = repl
        self.cell: ReplCellTool | None = (
            ReplCellTool(
                repl=repl,
                name=self.repl_tool_name,
                description=self.repl_tool_description,
                limits=repl_limits,
                max_output_chars=output_chars,
            )
            if repl is not None
            else None
        )
        self.user_tools = tuple(tools)
        super().__init__(
            inference,
            model,
            tools=tools,
            max_turns=max_turns,
            max_seconds=max_seconds,
            max_total_tokens=max_total_tokens,
            loop_guard=loop_guard,
            max_parse_errors=max_parse_errors,
            max_output_chars=output_chars,
            bus=bus,
            temperature=temperature,
            max_tokens=max_tokens,
            system_prompt=system_prompt,
            persona_prompt=persona_prompt,
            options=options,
        )
        self.sub_model = sub_model or model
        self.sub_temperature = sub_temperature
        self.sub_max_tokens = sub_max_tokens
        self.sub_concurrency = sub_concurrency
        self.max_sub_calls = max_sub_calls
        self.max_prompt_tokens = (
            self.default_max_prompt_tokens if max_prompt_tokens is None else max_prompt_tokens
        )
        self._prompt_budget: int | None = self.max_prompt_tokens
        self._task_index = 0
        self.tool_runner = ToolExecutor(
            self.user_tools, bus=bus, agent=self.agent_id, max_output_chars=output_chars
        )
        self._run_lock = asyncio.Lock()

    def internal_tools(self) -> Sequence[ToolPort]:
        return (self.cell,) if self.cell is not None else ()

    # -- hooks for the two agents ---------------------------------------------------------

    async def prepare_input(
        self, input: str, context: AgentContext | None
    ) -> tuple[str, list[ToolResult]]:
        """The input the loop starts from, and tool results produced while preparing it."""
        return input, []

    def repl_variables(self, input: str, context: AgentContext | None) -> dict[str, str]:
        """Variables the run's REPL session starts with."""
        return {}

    def begin_run(self, input: str, context: AgentContext | None) -> None:
        """Called once the input is prepared, before the first turn."""

    def run_metadata(self) -> JSONObject:
        """Extra metadata for the result."""
        return {}

    # -- the run --------------------------------------------------------------------------

    async def _generate_sub_call(self, request: InferenceRequest) -> Completion:
        """A sub-model call: events published, but none of the run's context-window policy
        (a prompt that does not fit fails that call inside the code)."""
        return await BaseAgent.generate(self, request)

    def _callbacks(self) -> SubModelCallbacks:
        return SubModelCallbacks(
            generate=self._generate_sub_call,
            model=self.sub_model,
            temperature=self.sub_temperature,
            max_tokens=self.sub_max_tokens,
            options=self.options,
            tools=self.tool_runner,
            max_concurrency=self.sub_concurrency,
            max_calls=self.max_sub_calls,
        )

    async def _start(
        self, input: str, context: AgentContext | None
    ) -> tuple[str, list[ToolResult], SubModelCallbacks]:
        prepared, early = await self.prepare_input(input, context)
        callbacks = self._callbacks()
        if self.cell is not None:
            self.cell.begin(callbacks=callbacks, variables=self.repl_variables(input, context))
        self._task_index = len(self.build_messages(prepared, context)) - 1
        self._prompt_budget = self.max_prompt_tokens
        self.begin_run(prepared, context)
        return prepared, early, callbacks

    async def _stop(self) -> None:
        if self.cell is not None:
            await self.cell.end()

    def _complete(
        self, result: AgentResult, callbacks: SubModelCallbacks, early: list[ToolResult]
    ) -> AgentResult:
        metadata: JSONObject = dict(result.metadata)
        metadata.update(self.run_metadata())
        if callbacks.calls:
            metadata["sub_calls"] = callbacks.calls
        if self.cell is not None and self.cell.executions and self.repl is not None:
            metadata["code_executions"] = self.cell.executions
            metadata["repl_isolation"] = self.repl.isolation().describe()
        return replace(
            result,
            usage=result.usage + callbacks.usage,
            tool_results=(*early, *result.tool_results, *callbacks.tool_results),
            metadata=metadata,
        )

    async def arun(self, input: str, context: AgentContext | None = None) -> AgentResult:
        async with self._run_lock:
            prepared, early, callbacks = await self._start(input, context)
            try:
                result = await super().arun(prepared, context)
            finally:
                await self._stop()
            return self._complete(result, callbacks, early)

    async def astream(
        self, input: str, context: AgentContext | None = None
    ) -> AsyncIterator[RunUpdate]:
        async with self._run_lock:
            prepared, early, callbacks = await self._start(input, context)
            try:
                async for update in super().astream(prepared, context):
                    if isinstance(update, RunFinished):
                        update = RunFinished(result=self._complete(update.result, callbacks, early))
                    yield update
            finally:
                await self._stop()

    # -- the context window ---------------------------------------------------------------

    def fit_context(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        if self._prompt_budget is None:
            return tuple(messages)
        return fit_messages(messages, max_tokens=self._prompt_budget, task_index=self._task_index)

    def _shrink(self, request: InferenceRequest) -> InferenceRequest | None:
        """The request refitted to half its estimated size (the budget stays there for the
        rest of the run), or ``None`` when it is already as small as it can usefully be."""
        size = estimate_tokens(request.messages)
        budget = min(size, self._prompt_budget or size) // 2
        if budget < MIN_PROMPT_TOKENS:
            return None
        self._prompt_budget = budget
        return replace(request, messages=self.fit_context(request.messages))

    async def generate(self, request: InferenceRequest) -> Completion:
        for attempt in range(OVERFLOW_RETRIES + 1):
            try:
                return await super().generate(request)
            except ContextTooLongError:
                smaller = self._shrink(request) if attempt < OVERFLOW_RETRIES else None
                if smaller is None:
                    raise
                request = smaller
        raise AssertionError("unreachable")  # pragma: no cover

    async def stream_inference(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        for attempt in range(OVERFLOW_RETRIES + 1):
            started = False
            try:
                async for chunk in super().stream_inference(request):
                    started = True
                    yield chunk
                return
            except ContextTooLongError:
                retry = not started and attempt < OVERFLOW_RETRIES
                smaller = self._shrink(request) if retry else None
                if smaller is None:
                    raise
                request = smaller

"""The one agent loop shared by every tool-using agent.

Each turn: one inference → the protocol reads it → a final answer ends the run; tool calls
pass the loop guard, run concurrently through the :class:`ToolExecutor` and their results go
back to the model; a reply that cannot be read is fed back as a parse error (after
``max_parse_errors`` in a row the run stops with ``parse_error``).

What the loop guarantees, identically for every protocol:

* **one budget** — turns, wall-clock seconds, tokens. When one runs out (or the loop guard
  refused every call of ``max_blocked_turns`` turns in a row) the loop makes ONE last call
  without tools asking for the best final answer; the result's stop reason names the limit
  (``max_turns`` | ``max_seconds`` | ``max_total_tokens`` | ``loop_detected``), with
  ``metadata["max_turns_exceeded"] = True`` and ``metadata["budget_exhausted"]`` =
  ``turns`` | ``time`` | ``tokens`` | ``loop``. The time
  limit interrupts an inference or tool calls in flight; the final call gets at most
  ``max_seconds`` more.
* usage summed over every inference; ``<think>`` blocks stripped from answers;
* a fresh loop guard per run; with an :class:`ApprovalGate`, every call the loop guard
  lets through gets an approval decision before it runs (see :mod:`.approval_gate`): a
  denied call is answered to the model as denied, with the reason, in ``ToolResultReady``
  like any result, and ``metadata["approvals"]`` lists every decision with its rule;
* ``AGENT_RUN_START`` / ``AGENT_RUN_END`` events (``INFERENCE_*`` from the base agent,
  ``TOOL_CALL_*`` from the executor), and ``LOOP_GUARD_TRIGGERED`` for every call the loop
  guard warned about or blocked;
* ``arun`` and ``astream`` are the same code: streaming adds ``TextDelta`` (answer text as
  it is generated, filtered by the protocol), ``ToolCallsRequested``, ``ApprovalRequired`` /
  ``ApprovalDecided`` and ``ToolResultReady``.

Cancellation: ``asyncio.CancelledError`` (and closing the stream early) publishes
``AGENT_RUN_END`` with stop reason ``cancelled`` and is re-raised — the caller that cancels
owns the outcome, and tool tasks in flight are cancelled with the run. Engine errors propagate
as the typed :class:`~jarvis.domain.errors.InferenceError` subclasses, except
``ToolsNotSupportedError``, which an agent may answer by switching protocol
(:meth:`ToolUsingAgent.fallback_protocol`). A stream cut short is such an error too: the loop
never replays an inference. Transport quirks are the adapters' business (a stale pooled
connection is retried there before any byte arrived; a server that cannot stream a turn is
asked again without streaming there, before anything was delivered).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import ClassVar, Self, TypedDict

from jarvis.domain.errors import InferenceError, ToolsNotSupportedError
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Message, Role
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.loop.budget import STOP_REASONS, RunBudget
from jarvis.domain.loop.context_window import ContextWindow
from jarvis.domain.loop.guard import LoopGuard, LoopGuardConfig
from jarvis.domain.loop.loop_inference import infer
from jarvis.domain.loop.loop_run import LoopRun, Reply, remainder
from jarvis.domain.loop.loop_tools import run_calls
from jarvis.domain.loop.options import AgentOptions, AgentParts
from jarvis.domain.loop.run_scope import RunScope
from jarvis.domain.loop.settings import PromptSettings, SamplingSettings, ToolExecution
from jarvis.domain.loop.tool_executor import ToolExecutor
from jarvis.domain.ports import InferencePort, ToolPort
from jarvis.domain.protocols.function_calling import FunctionCallingProtocol
from jarvis.domain.protocols.reply_text import strip_think
from jarvis.domain.protocols.tool_protocol import ParseFailure, ToolCalls, ToolProtocol
from jarvis.domain.run.contract import AgentContext, AgentResult, StopReason
from jarvis.domain.run.events import EventBus
from jarvis.domain.run.updates import (
    RunFinished,
    RunUpdate,
    TextDelta,
    ToolCallsRequested,
    ToolResultReady,
)
from jarvis.domain.tools.specs import ToolResult, ToolSpec

NO_ANSWER = "No final answer was produced within the run's limits."


class ToolAgentOptions(TypedDict, total=False):
    """The settings every tool-using agent takes, for subclasses to pass on unchanged."""

    tools: Sequence[ToolPort]
    budget: RunBudget | None
    loop_guard: LoopGuardConfig | None
    execution: ToolExecution | None
    context_window: ContextWindow | None
    sampling: SamplingSettings | None
    prompts: PromptSettings | None
    bus: EventBus | None


class ToolUsingAgent(BaseAgent):
    """An agent that answers through a tool loop; subclasses choose the protocol.

    The default protocol is native function calling. Subclasses override
    :meth:`make_protocol` (and :meth:`fallback_protocol` to react to engines that refuse
    tools), :meth:`template` for their own prompt, and :meth:`open_run` to give each run
    an input, tools and a result of its own (a REPL session).

    Settings, each a value object with a class default: ``budget`` (:class:`RunBudget`),
    ``loop_guard`` (:class:`LoopGuardConfig`), ``execution`` (:class:`ToolExecution`),
    ``context_window`` (:class:`ContextWindow`), plus the base agent's ``sampling`` and
    ``prompts``.
    """

    agent_id: ClassVar[str] = "tool_loop"
    accepts_tools: ClassVar[bool] = True
    default_budget: ClassVar[RunBudget] = RunBudget()
    default_execution: ClassVar[ToolExecution] = ToolExecution()
    default_context_window: ClassVar[ContextWindow] = ContextWindow()

    def __init__(
        self,
        inference: InferencePort,
        model: str,
        *,
        tools: Sequence[ToolPort] = (),
        budget: RunBudget | None = None,
        loop_guard: LoopGuardConfig | None = None,
        execution: ToolExecution | None = None,
        context_window: ContextWindow | None = None,
        sampling: SamplingSettings | None = None,
        prompts: PromptSettings | None = None,
        bus: EventBus | None = None,
    ) -> None:
        super().__init__(inference, model, sampling=sampling, prompts=prompts, bus=bus)
        self.budget = self.default_budget if budget is None else budget
        self.loop_guard_config = LoopGuardConfig() if loop_guard is None else loop_guard
        self.execution = self.default_execution if execution is None else execution
        self.approvals = self.execution.approvals
        """Decides which of the user's tool calls run (``None``: all of them)."""
        self.context_window = (
            self.default_context_window if context_window is None else context_window
        )
        self.user_tools = tuple(tools)
        self.executor = ToolExecutor(
            self.user_tools,
            bus=bus,
            agent=self.agent_id,
            max_output_chars=self.execution.max_output_chars,
            max_parallel_tools=self.execution.max_parallel_tools,
            max_tool_calls_per_turn=self.execution.max_tool_calls_per_turn,
        )
        specs = self.executor.specs
        run_specs = tuple(self.run_tool_specs())
        if run_specs:  # the executor checked the user's tools; these join them in each run
            specs = (*specs, *run_specs)
            names = [spec.name.lower() for spec in specs]
            if len(set(names)) != len(names):
                raise ValueError(f"Two tools share a name: {', '.join(s.name for s in specs)}.")
        self.protocol = self.make_protocol(specs)

    @classmethod
    def from_options(cls, parts: AgentParts, options: AgentOptions) -> Self:
        return cls(parts.inference, parts.model, **cls.tool_agent_options(parts, options))

    @classmethod
    def tool_agent_options(cls, parts: AgentParts, options: AgentOptions) -> ToolAgentOptions:
        """The settings of a tool-using agent from ``parts`` and the named options."""
        budget, execution = cls.default_budget, cls.default_execution
        return ToolAgentOptions(
            tools=parts.tools,
            bus=parts.bus,
            sampling=parts.sampling,
            prompts=parts.prompts,
            budget=RunBudget(
                max_turns=options.integer("max_turns", budget.max_turns),
                max_seconds=options.optional_number("max_seconds", budget.max_seconds),
                max_total_tokens=options.optional_integer(
                    "max_total_tokens", budget.max_total_tokens
                ),
                max_parse_errors=options.integer("max_parse_errors", budget.max_parse_errors),
            ),
            execution=ToolExecution(
                max_output_chars=options.integer("max_output_chars", execution.max_output_chars),
                max_parallel_tools=options.integer(
                    "max_parallel_tools", execution.max_parallel_tools
                ),
                max_tool_calls_per_turn=options.integer(
                    "max_tool_calls_per_turn", execution.max_tool_calls_per_turn
                ),
                approvals=parts.approvals,
            ),
        )

    # -- what subclasses choose ------------------------------------------------------------

    @property
    def max_turns(self) -> int:
        return self.budget.max_turns

    def run_tool_specs(self) -> Sequence[ToolSpec]:
        """The specs of the tools each run brings itself (see :meth:`open_run`), offered
        beside the user's."""
        return ()

    async def open_run(self, input: str, context: AgentContext | None) -> RunScope:
        """What one run brings besides the loop (the default: nothing)."""
        return RunScope(input, self.executor)

    def answer_from_results(self, results: Sequence[ToolResult]) -> str | None:
        """An answer found in a turn's tool results that ends the run at once (stop reason
        ``final_answer``), e.g. the RLM's ``FINAL(value)`` inside a REPL cell; ``None``
        (the default) goes on with the next turn."""
        return None

    def make_protocol(self, specs: Sequence[ToolSpec]) -> ToolProtocol:
        """The conversation format of this agent."""
        return FunctionCallingProtocol(specs)

    def fallback_protocol(
        self, error: InferenceError, current: ToolProtocol
    ) -> ToolProtocol | None:
        """The protocol to continue with when the engine refuses ``current`` (``None``
        re-raises the error)."""
        return None

    def system_prompt_for(self, protocol: ToolProtocol) -> str:
        """``system_prompt`` (or the template), then the protocol's instructions, then the
        persona: the instructions survive any override."""
        prompts = self.prompts
        base = prompts.system_prompt if prompts.system_prompt is not None else self.template()
        parts = (base.strip(), protocol.instructions().strip(), prompts.persona_prompt.strip())
        return "\n\n".join(p for p in parts if p)

    def effective_system_prompt(self) -> str:
        return self.system_prompt_for(self.protocol)

    # -- the contract ------------------------------------------------------------------------

    async def arun(self, input: str, context: AgentContext | None = None) -> AgentResult:
        result: AgentResult | None = None
        async for update in self._drive(input, context, streaming=False):
            if isinstance(update, RunFinished):
                result = update.result
        if result is None:  # pragma: no cover - _drive always finishes with a result
            raise RuntimeError("the agent loop ended without a result")
        return result

    def astream(self, input: str, context: AgentContext | None = None) -> AsyncIterator[RunUpdate]:
        return self._drive(input, context, streaming=True)

    # -- the loop ----------------------------------------------------------------------------

    async def _drive(
        self, input: str, context: AgentContext | None, *, streaming: bool
    ) -> AsyncIterator[RunUpdate]:
        """One run: its scope, the loop, the result; the end event however it ends.
        Without ``streaming`` inferences are not streamed and tool activity is not reported
        (``arun`` keeps only the result)."""
        scope = await self.open_run(input, context)
        try:
            run = self._begin(scope, context, streaming=streaming)
            try:
                async for update in self._loop(run):
                    yield update
            except (asyncio.CancelledError, GeneratorExit):
                self._publish_end(run, "cancelled")
                raise
            except BaseException as exc:
                self._publish_end(run, "error", error=type(exc).__name__)
                raise
            assert run.result is not None
            yield RunFinished(result=scope.complete(run.result))
        finally:
            await scope.aclose()

    async def _loop(self, run: LoopRun) -> AsyncIterator[RunUpdate]:
        """Each turn: one inference, the protocol's reading of it, the handler of that
        outcome. When a budget runs out first: the wrap-up."""
        while run.result is None and not self._out_of_budget(run):
            reply = Reply()
            shape = run.protocol.request_shape_for(run.turns + 1)
            try:
                async for delta in infer(self, run, shape, run.deadline, reply):
                    yield delta
            except ToolsNotSupportedError as error:
                self._switch_protocol(run, error)  # re-raises without a fallback protocol
                continue
            if reply.completion is None:  # the run's deadline passed
                run.exhausted = "time"
                break
            decision = run.protocol.interpret(reply.completion, turn=run.turns)
            if isinstance(decision, ToolCalls):
                results: list[ToolResult] = []
                async for update in self._on_tool_calls(run, decision, reply.completion, results):
                    yield update
                tail = self._after_tools(run, results)
            elif isinstance(decision, ParseFailure):
                tail = self._on_parse_failure(run, decision, reply.completion)
            else:
                tail = self._end(run, decision.content, "final_answer", reply.shown)
            if tail is not None:
                yield tail
        if run.result is None:
            async for update in self._wrap_up(run):
                yield update

    def _out_of_budget(self, run: LoopRun) -> bool:
        """Whether a limit ran out before the next turn (``run.exhausted`` says which)."""
        if run.exhausted is None:
            run.exhausted = self.budget.exhausted(
                turns=run.turns,
                tokens=run.usage.total_tokens,
                # the clock is read only against a deadline (each read costs a system call)
                now=asyncio.get_running_loop().time() if run.deadline is not None else 0.0,
                deadline=run.deadline,
            )
        return run.exhausted is not None

    # -- outcome handlers --------------------------------------------------------------------

    def _end(
        self, run: LoopRun, content: str, stop_reason: StopReason, shown: Sequence[str] = ()
    ) -> TextDelta | None:
        """End the run with ``content``; the part of it not streamed yet, if any."""
        run.result = self._finish(run, content, stop_reason)
        rest = remainder(content, shown)
        return TextDelta(text=rest) if rest else None

    def _on_parse_failure(
        self, run: LoopRun, failure: ParseFailure, completion: Completion
    ) -> TextDelta | None:
        """Feed the error back, or end the run after ``max_parse_errors`` in a row."""
        run.messages.append(run.protocol.assistant_message(completion, failure))
        run.parse_errors += 1
        run.total_parse_errors += 1
        if run.parse_errors >= self.budget.max_parse_errors:
            run.metadata["parse_error"] = failure.error
            run.result = self._finish(run, strip_think(completion.content), "parse_error")
        else:
            run.messages.extend(run.protocol.parse_error_messages(failure))
        return None

    async def _on_tool_calls(
        self, run: LoopRun, decision: ToolCalls, completion: Completion, results: list[ToolResult]
    ) -> AsyncIterator[RunUpdate]:
        """Run the calls (their results into ``results``) and show the model the results;
        streaming, the caller sees the calls before they run, then each result."""
        if run.streaming:
            yield ToolCallsRequested(calls=decision.calls)
        run.messages.append(run.protocol.assistant_message(completion, decision))
        run.parse_errors = 0
        async for update in run_calls(self, run, decision.calls, results):
            yield update
        run.messages.extend(run.protocol.observations(results))
        run.results.extend(results)
        if run.streaming:
            for result in results:
                yield ToolResultReady(result=result)

    def _after_tools(self, run: LoopRun, results: list[ToolResult]) -> TextDelta | None:
        """An answer in the results ends the run; so does the time limit stopping a tool,
        or the loop guard refusing every call of too many turns (then the wrap-up)."""
        answer = self.answer_from_results(results)
        if answer is not None:
            return self._end(run, answer, "final_answer")
        if run.deadline is not None and any(
            result.metadata.get("error") == "run_time_limit" for result in results
        ):
            run.exhausted = "time"
        elif run.blocked_turns >= max(1, run.guard.config.max_blocked_turns):
            run.exhausted = "loop"
        return None

    async def _wrap_up(self, run: LoopRun) -> AsyncIterator[RunUpdate]:
        """The one tool-less call asking for the best final answer."""
        exhausted = run.exhausted
        assert exhausted is not None
        run.metadata["max_turns_exceeded"] = True
        run.metadata["budget_exhausted"] = exhausted
        run.messages.append(run.protocol.final_request(exhausted))
        deadline = None
        if self.budget.max_seconds is not None:
            deadline = asyncio.get_running_loop().time() + self.budget.max_seconds
        reply = Reply()
        async for delta in infer(self, run, run.protocol.final_shape(), deadline, reply):
            yield delta
        answer = ""
        if reply.completion is not None:
            answer = run.protocol.final_answer(reply.completion)
        else:
            run.metadata["final_call_timed_out"] = True
        stop_reason = STOP_REASONS[exhausted]
        tail = self._end(run, answer or run.last_content or NO_ANSWER, stop_reason, reply.shown)
        if tail is not None:
            yield tail

    # -- beginning and end -------------------------------------------------------------------

    def _begin(self, scope: RunScope, context: AgentContext | None, *, streaming: bool) -> LoopRun:
        self.run_started(scope.input)
        max_seconds = self.budget.max_seconds
        deadline = None if max_seconds is None else asyncio.get_running_loop().time() + max_seconds
        messages = self.build_messages(scope.input, context)
        return LoopRun(
            scope=scope,
            context=context,
            protocol=self.protocol,
            messages=messages,
            guard=LoopGuard(self.loop_guard_config),
            window=self.context_window.for_run(task_index=len(messages) - 1),
            deadline=deadline,
            model=self.model,
            streaming=streaming,
            approvals=self.approvals.start() if self.approvals is not None else None,
            metadata={"mode": self.protocol.name},
        )

    def _switch_protocol(self, run: LoopRun, error: ToolsNotSupportedError) -> None:
        """Go on with the agent's fallback protocol, or re-raise ``error``."""
        new = self.fallback_protocol(error, run.protocol) if run.protocol.native_tools else None
        if new is None:
            raise error
        old_prompt = self.system_prompt_for(run.protocol)
        new_prompt = self.system_prompt_for(new)
        messages = self.build_messages(run.scope.input, run.context)
        first = messages[0]
        if first.role is Role.SYSTEM and first.content.startswith(old_prompt):
            messages[0] = Message.system(new_prompt + first.content[len(old_prompt) :])
        run.protocol = new
        run.messages = messages
        run.metadata["mode"] = new.name
        run.metadata["fallback"] = "tools_not_supported"
        run.metadata["fallback_reason"] = error.message

    def _finish(self, run: LoopRun, content: str, stop_reason: StopReason) -> AgentResult:
        metadata = run.metadata
        metadata["finish_reason"] = run.finish_reason
        if run.total_parse_errors:
            metadata["parse_errors"] = run.total_parse_errors
        if run.loop_events:
            metadata["loop_guard"] = run.loop_events
        result = AgentResult(
            content=content,
            stop_reason=stop_reason,
            tool_results=tuple(run.results),
            turns=run.turns,
            usage=run.usage,
            model=run.model,
            metadata=metadata,
        )
        run.ended = True
        self.run_ended(result)
        return result

    def _publish_end(self, run: LoopRun, stop_reason: str, *, error: str = "") -> None:
        if run.ended:
            return
        run.ended = True
        self.publish_end(run.turns, stop_reason, error)

"""The one agent loop shared by every tool-using agent.

Each turn: one inference → the protocol reads it → a final answer ends the run; tool calls
pass the loop guard, run concurrently through the :class:`ToolExecutor` and their results go
back to the model; a reply that cannot be read is fed back as a parse error (after
``max_parse_errors`` in a row the run stops with ``parse_error``).

What the loop guarantees, identically for every protocol:

* **one budget** — turns, wall-clock seconds, tokens. When one runs out (or the loop guard
  refused every call of ``max_blocked_turns`` turns in a row) the loop makes ONE last call
  without tools asking for the best final answer; the result has stop reason
  ``max_turns``, ``metadata["max_turns_exceeded"] = True`` and
  ``metadata["budget_exhausted"]`` = ``turns`` | ``time`` | ``tokens`` | ``loop``. The time
  limit interrupts an inference or tool calls in flight; the final call gets at most
  ``max_seconds`` more.
* usage summed over every inference; ``<think>`` blocks stripped from answers;
* a fresh loop guard per run;
* ``AGENT_TURN_START`` / ``AGENT_TURN_END`` events (``INFERENCE_*`` from the base agent,
  ``TOOL_CALL_*`` from the executor), and ``LOOP_GUARD_TRIGGERED`` for every call the loop
  guard warned about or blocked;
* ``arun`` and ``astream`` are the same code: streaming adds ``TextDelta`` (answer text as
  it is generated, filtered by the protocol), ``ToolCallsRequested`` and ``ToolResultReady``.

Cancellation: ``asyncio.CancelledError`` (and closing the stream early) publishes
``AGENT_TURN_END`` with stop reason ``cancelled`` and is re-raised — the caller that cancels
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
from dataclasses import dataclass, field
from typing import ClassVar

from jarvis.domain.agent_contract import AgentContext, AgentResult, StopReason
from jarvis.domain.agents.base import BaseAgent
from jarvis.domain.agents.budget import BudgetKind, RunBudget
from jarvis.domain.agents.function_calling import FunctionCallingProtocol
from jarvis.domain.agents.loop_guard import LoopGuard, LoopGuardConfig, LoopVerdict
from jarvis.domain.agents.protocol import (
    FinalAnswer,
    ParseFailure,
    RequestShape,
    TextFilter,
    ToolCalls,
    ToolProtocol,
)
from jarvis.domain.agents.reply_text import strip_think
from jarvis.domain.completion import Completion, FinishReason, StreamChunk, Usage
from jarvis.domain.errors import InferenceError, ToolsNotSupportedError
from jarvis.domain.events import AgentTurnEnded, EventBus, LoopGuardTriggered
from jarvis.domain.inference import InferenceRequest
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.messages import Message, Role, ToolCall
from jarvis.domain.ports import InferencePort, ToolPort
from jarvis.domain.tool_executor import (
    DEFAULT_MAX_PARALLEL_TOOLS,
    DEFAULT_MAX_TOOL_CALLS_PER_TURN,
    ToolExecutor,
)
from jarvis.domain.tools import ToolResult, ToolSpec
from jarvis.domain.updates import (
    RunFinished,
    RunUpdate,
    TextDelta,
    ToolCallsRequested,
    ToolResultReady,
)

NO_ANSWER = "No final answer was produced within the run's limits."


@dataclass(slots=True)
class _Run:
    """The mutable state of one run (never shared between runs)."""

    protocol: ToolProtocol
    messages: list[Message]
    guard: LoopGuard
    deadline: float | None
    model: str
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    results: list[ToolResult] = field(default_factory=list)
    metadata: JSONObject = field(default_factory=dict)
    loop_events: list[JSONValue] = field(default_factory=list)
    parse_errors: int = 0
    total_parse_errors: int = 0
    blocked_turns: int = 0
    last_content: str = ""
    finish_reason: FinishReason = "stop"
    time_ran_out: bool = False
    ended: bool = False


class ToolUsingAgent(BaseAgent):
    """An agent that answers through a tool loop; subclasses choose the protocol.

    The default protocol is native function calling. Subclasses override
    :meth:`make_protocol` (and :meth:`fallback_protocol` to react to engines that refuse
    tools), :meth:`template` for their own prompt, and :meth:`internal_tools` to add tools
    of their own (a code runner, a REPL) next to the user's.
    """

    agent_id: ClassVar[str] = "tool_loop"
    accepts_tools: ClassVar[bool] = True
    default_max_turns: ClassVar[int] = 10
    default_max_parse_errors: ClassVar[int] = 3

    def __init__(
        self,
        inference: InferencePort,
        model: str,
        *,
        tools: Sequence[ToolPort] = (),
        max_turns: int | None = None,
        max_seconds: float | None = None,
        max_total_tokens: int | None = None,
        loop_guard: LoopGuardConfig | None = None,
        max_parse_errors: int | None = None,
        max_output_chars: int = 20_000,
        max_parallel_tools: int = DEFAULT_MAX_PARALLEL_TOOLS,
        max_tool_calls_per_turn: int = DEFAULT_MAX_TOOL_CALLS_PER_TURN,
        bus: EventBus | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        system_prompt: str | None = None,
        persona_prompt: str = "",
        options: JSONObject | None = None,
    ) -> None:
        super().__init__(
            inference,
            model,
            bus=bus,
            temperature=temperature,
            max_tokens=max_tokens,
            system_prompt=system_prompt,
            persona_prompt=persona_prompt,
            options=options,
        )
        self.budget = RunBudget(
            max_turns=self.default_max_turns if max_turns is None else max_turns,
            max_seconds=max_seconds,
            max_total_tokens=max_total_tokens,
        )
        self.loop_guard_config = loop_guard if loop_guard is not None else LoopGuardConfig()
        self.max_parse_errors = max(
            1, self.default_max_parse_errors if max_parse_errors is None else max_parse_errors
        )
        self.executor = ToolExecutor(
            [*tools, *self.internal_tools()],
            bus=bus,
            agent=self.agent_id,
            max_output_chars=max_output_chars,
            max_parallel_tools=max_parallel_tools,
            max_tool_calls_per_turn=max_tool_calls_per_turn,
        )
        self.protocol = self.make_protocol(self.executor.specs)

    # -- what subclasses choose ------------------------------------------------------------

    @property
    def max_turns(self) -> int:
        return self.budget.max_turns

    def internal_tools(self) -> Sequence[ToolPort]:
        """Tools the agent brings itself, offered beside the user's."""
        return ()

    def answer_from_results(self, results: Sequence[ToolResult]) -> str | None:
        """An answer found in a turn's tool results that ends the run at once (stop reason
        ``final_answer``), e.g. the RLM's ``FINAL(value)`` inside a REPL cell; ``None``
        (the default) goes on with the next turn."""
        return None

    def fit_context(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """The messages actually sent on each turn; agents with a context-window policy
        (e.g. CodeAct) shorten them here. The default sends them all."""
        return tuple(messages)

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
        base = self.system_prompt if self.system_prompt is not None else self.template()
        parts = (base.strip(), protocol.instructions().strip(), self.persona_prompt.strip())
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
        loop = asyncio.get_running_loop()
        self.turn_started(input)
        max_seconds = self.budget.max_seconds
        run = _Run(
            protocol=self.protocol,
            messages=self.build_messages(input, context),
            guard=LoopGuard(self.loop_guard_config),
            deadline=loop.time() + max_seconds if max_seconds is not None else None,
            model=self.model,
            metadata={"mode": self.protocol.name},
        )
        try:
            exhausted: BudgetKind | None = None
            while True:
                exhausted = self.budget.exhausted(
                    turns=run.turns,
                    tokens=run.usage.total_tokens,
                    now=loop.time(),
                    deadline=run.deadline,
                )
                if exhausted is not None:
                    break
                request = self._request(run, run.protocol.request_shape_for(run.turns + 1))
                shown: list[str] = []
                try:
                    if streaming:
                        completion: Completion | None = None
                        stream = self._stream_turn(run, request, run.protocol.text_filter())
                        async for item in stream:
                            if isinstance(item, Completion):
                                completion = item
                            else:
                                shown.append(item.text)
                                yield item
                        assert completion is not None
                    else:
                        completion = await self._generate_turn(run, request)
                except TimeoutError:
                    if run.deadline is None or loop.time() < run.deadline:
                        raise
                    exhausted = "time"
                    break
                except ToolsNotSupportedError as error:
                    if not self._switch_protocol(run, error, input, context):
                        raise
                    continue

                self._account(run, completion)
                decision = run.protocol.interpret(completion, turn=run.turns)
                if isinstance(decision, FinalAnswer):
                    if streaming:
                        rest = _remainder(decision.content, shown)
                        if rest:
                            yield TextDelta(text=rest)
                    yield RunFinished(result=self._finish(run, decision.content, "final_answer"))
                    return
                run.messages.append(run.protocol.assistant_message(completion, decision))
                if isinstance(decision, ParseFailure):
                    run.parse_errors += 1
                    run.total_parse_errors += 1
                    if run.parse_errors >= self.max_parse_errors:
                        run.metadata["parse_error"] = decision.error
                        content = strip_think(completion.content)
                        yield RunFinished(result=self._finish(run, content, "parse_error"))
                        return
                    run.messages.extend(run.protocol.parse_error_messages(decision))
                    continue
                run.parse_errors = 0
                calls = decision.calls
                if streaming:
                    yield ToolCallsRequested(calls=calls)
                results = await self._run_calls(run, decision)
                if streaming:
                    for result in results:
                        yield ToolResultReady(result=result)
                run.messages.extend(run.protocol.observations(results))
                run.results.extend(results)
                answer = self.answer_from_results(results)
                if answer is not None:
                    if streaming:
                        yield TextDelta(text=answer)
                    yield RunFinished(result=self._finish(run, answer, "final_answer"))
                    return
                if run.time_ran_out:
                    exhausted = "time"
                    break
                if run.blocked_turns >= max(1, run.guard.config.max_blocked_turns):
                    exhausted = "loop"
                    break

            assert exhausted is not None
            async for update in self._wrap_up(run, exhausted, streaming=streaming):
                yield update
        except (asyncio.CancelledError, GeneratorExit):
            self._publish_end(run, "cancelled")
            raise
        except BaseException:
            self._publish_end(run, "error")
            raise

    # -- one inference -----------------------------------------------------------------------

    def _request(self, run: _Run, shape: RequestShape) -> InferenceRequest:
        return InferenceRequest(
            messages=self.fit_context(run.messages),
            model=self.model,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            tools=shape.tools,
            tool_choice=shape.tool_choice,
            response_format=shape.response_format,
            options=self.options,
        )

    async def _generate_turn(
        self, run: _Run, request: InferenceRequest, deadline: float | None = None
    ) -> Completion:
        deadline = run.deadline if deadline is None else deadline
        if deadline is None:
            return await self.generate(request)
        async with asyncio.timeout_at(deadline):
            return await self.generate(request)

    async def _stream_turn(
        self,
        run: _Run,
        request: InferenceRequest,
        text_filter: TextFilter,
        deadline: float | None = None,
    ) -> AsyncIterator[TextDelta | Completion]:
        """Stream one inference: visible text as ``TextDelta``, then the whole
        ``Completion``. The deadline bounds every wait for a chunk (never a ``yield``)."""
        deadline = run.deadline if deadline is None else deadline
        parts: list[str] = []
        final: StreamChunk | None = None
        stream = self.stream_inference(request)
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
                if chunk.content:
                    parts.append(chunk.content)
                    visible = text_filter.feed(chunk.content)
                    if visible:
                        yield TextDelta(text=visible)
                if chunk.is_final:
                    final = chunk
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        yield Completion(
            content="".join(parts),
            tool_calls=final.tool_calls if final is not None else (),
            finish_reason=(final.finish_reason or "stop") if final is not None else "stop",
            usage=(final.usage or Usage()) if final is not None else Usage(),
            model=(final.model if final is not None else "") or request.model,
        )

    def _account(self, run: _Run, completion: Completion) -> None:
        run.turns += 1
        run.usage = run.usage + completion.usage
        run.finish_reason = completion.finish_reason
        if completion.model:
            run.model = completion.model
        text = run.protocol.visible_text(completion)
        if text:
            run.last_content = text

    # -- tools -------------------------------------------------------------------------------

    async def _run_calls(self, run: _Run, decision: ToolCalls) -> list[ToolResult]:
        """Loop guard first (in call order), then the allowed calls concurrently."""
        calls = decision.calls
        guard = run.guard
        verdicts = [guard.check(call) for call in calls]
        runnable = [call for call, verdict in zip(calls, verdicts, strict=True) if verdict.allowed]
        executed = iter(await self._execute(run, runnable) if runnable else ())
        results: list[ToolResult] = []
        blocked = False
        for call, verdict in zip(calls, verdicts, strict=True):
            if verdict.allowed:
                result = next(executed)
                guard.record(call, result.content)
            else:
                blocked = blocked or verdict.action == "block"
                run.loop_events.append(
                    {"tool": call.name, "action": verdict.action, "pattern": verdict.pattern}
                )
                self._publish_loop_guard(run, call, verdict)
                result = ToolResult(
                    tool_name=call.name,
                    content=verdict.message,
                    success=False,
                    call_id=call.id,
                    metadata={"error": "loop_guard", "loop_guard": verdict.action},
                )
            results.append(result)
        run.blocked_turns = run.blocked_turns + 1 if blocked and not runnable else 0
        return results

    def _publish_loop_guard(self, run: _Run, call: ToolCall, verdict: LoopVerdict) -> None:
        bus = self.bus
        if bus is None or not bus.has_subscribers:
            return
        if verdict.action == "allow" or verdict.pattern is None:  # pragma: no cover
            return
        bus.publish(
            LoopGuardTriggered(
                agent=self.agent_id,
                tool=call.name,
                call_id=call.id,
                action=verdict.action,
                pattern=verdict.pattern,
                arguments=call.arguments,
                turn=run.turns,
                message=verdict.message,
            )
        )

    async def _execute(self, run: _Run, calls: list[ToolCall]) -> list[ToolResult]:
        """Run ``calls`` concurrently; with a deadline, calls still running when it passes
        are cancelled and reported as failed."""
        if run.deadline is None:
            return await self.executor.execute_all(calls)
        loop = asyncio.get_running_loop()
        tasks = [asyncio.ensure_future(step) for step in self.executor.bounded(calls)]
        try:
            done, pending = await asyncio.wait(tasks, timeout=max(0.0, run.deadline - loop.time()))
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        for task in pending:
            task.cancel()
        if pending:
            run.time_ran_out = True
        return [
            task.result()
            if task in done
            else ToolResult(
                tool_name=call.name,
                content=f"Tool '{call.name}' was stopped: the run's time limit was reached.",
                success=False,
                call_id=call.id,
                metadata={"error": "run_time_limit"},
            )
            for call, task in zip(calls, tasks, strict=True)
        ]

    # -- endings -----------------------------------------------------------------------------

    def _switch_protocol(
        self, run: _Run, error: ToolsNotSupportedError, input: str, context: AgentContext | None
    ) -> bool:
        new = self.fallback_protocol(error, run.protocol) if run.protocol.native_tools else None
        if new is None:
            return False
        old_prompt = self.system_prompt_for(run.protocol)
        new_prompt = self.system_prompt_for(new)
        messages = self.build_messages(input, context)
        first = messages[0]
        if first.role is Role.SYSTEM and first.content.startswith(old_prompt):
            messages[0] = Message.system(new_prompt + first.content[len(old_prompt) :])
        run.protocol = new
        run.messages = messages
        run.metadata["mode"] = new.name
        run.metadata["fallback"] = "tools_not_supported"
        run.metadata["fallback_reason"] = error.message
        return True

    async def _wrap_up(
        self, run: _Run, exhausted: BudgetKind, *, streaming: bool
    ) -> AsyncIterator[RunUpdate]:
        """The one tool-less call asking for the best final answer."""
        run.metadata["max_turns_exceeded"] = True
        run.metadata["budget_exhausted"] = exhausted
        protocol = run.protocol
        run.messages.append(protocol.final_request(exhausted))
        request = self._request(run, protocol.final_shape())
        deadline = None
        if self.budget.max_seconds is not None:
            deadline = asyncio.get_running_loop().time() + self.budget.max_seconds
        shown: list[str] = []
        completion: Completion | None = None
        try:
            if streaming:
                async for item in self._stream_turn(run, request, protocol.text_filter(), deadline):
                    if isinstance(item, Completion):
                        completion = item
                    else:
                        shown.append(item.text)
                        yield item
            else:
                completion = await self._generate_turn(run, request, deadline)
        except TimeoutError:
            if deadline is None:
                raise
            run.metadata["final_call_timed_out"] = True
        answer = ""
        if completion is not None:
            self._account(run, completion)
            answer = protocol.final_answer(completion)
        answer = answer or run.last_content or NO_ANSWER
        if streaming:
            rest = _remainder(answer, shown)
            if rest:
                yield TextDelta(text=rest)
        yield RunFinished(result=self._finish(run, answer, "max_turns"))

    def _finish(self, run: _Run, content: str, stop_reason: StopReason) -> AgentResult:
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
        self.turn_ended(result)
        return result

    def _publish_end(self, run: _Run, stop_reason: str) -> None:
        if run.ended:
            return
        run.ended = True
        bus = self.bus
        if bus is not None and bus.has_subscribers:
            bus.publish(
                AgentTurnEnded(agent=self.agent_id, turns=run.turns, stop_reason=stop_reason)
            )


def _remainder(answer: str, shown: list[str]) -> str:
    """The part of ``answer`` not yet streamed (nothing when the streamed text diverged)."""
    if not shown:
        return answer
    emitted = "".join(shown)
    if answer.startswith(emitted):
        return answer[len(emitted) :]
    trimmed = emitted.rstrip()
    if answer.startswith(trimmed):
        return answer[len(trimmed) :].lstrip()
    return ""

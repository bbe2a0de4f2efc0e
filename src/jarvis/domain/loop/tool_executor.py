"""Runs the tool calls a model asks for, turning every failure into a result it can read.

A tool call can go wrong in many ways — an unknown name, arguments that are not JSON,
arguments that break the schema, a tool that hangs or raises, an answer far too long for the
context window. None of them may crash a run: each becomes a failed :class:`ToolResult`
whose text tells the model what to fix, and ``metadata["error"]`` tells programs what went
wrong (``unknown_tool``, ``invalid_json``, ``invalid_arguments``, ``timeout``,
``exception``, ``too_many_calls``).

A model also chooses how many calls one turn makes, so that is bounded too: at most
``max_parallel_tools`` of them run at once (the rest wait their turn), and the calls beyond
``max_tool_calls_per_turn`` are refused unrun, with a message the model reads. A turn may
also have a deadline (the run's time limit): calls still running when it passes are
cancelled and reported as stopped (``run_time_limit``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Sequence
from time import perf_counter

from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.ports import ToolPort
from jarvis.domain.run.events import EventBus, ToolCallEnded, ToolCallStarted
from jarvis.domain.tools.json_schema import validate
from jarvis.domain.tools.specs import ToolResult, ToolSpec, truncate

DEFAULT_MAX_PARALLEL_TOOLS = 8
"""How many calls of one turn run at once by default."""
DEFAULT_MAX_TOOL_CALLS_PER_TURN = 64
"""How many calls one turn may make by default; the rest are refused."""


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, not {value!r}")
    return value


class ToolExecutor:
    """Looks calls up by name (case-insensitively), validates, runs and bounds them.

    Order of checks: unknown tool → unparsed arguments → schema validation → run with the
    tool's timeout → bound the output. ``TOOL_CALL_START``/``TOOL_CALL_END`` are published
    for every call, failed ones included, when the bus has subscribers.

    A timeout really stops waiting: the tool runs as its own task and is cancelled and
    abandoned when its time is up, even if it ignores the cancellation. Synchronous work
    inside a tool is the tool's business (it must run it in a thread or process). A tool
    whose spec says ``blocking=False`` finishes at once by its own declaration: it is
    awaited directly, with no task and no timeout.
    """

    __slots__ = (
        "_agent",
        "_bus",
        "_by_name",
        "_max_output_chars",
        "_max_parallel_tools",
        "_max_tool_calls_per_turn",
        "_names",
        "_running",
        "_specs",
    )

    def __init__(
        self,
        tools: Sequence[ToolPort],
        *,
        bus: EventBus | None = None,
        agent: str = "",
        max_output_chars: int = 20_000,
        max_parallel_tools: int = DEFAULT_MAX_PARALLEL_TOOLS,
        max_tool_calls_per_turn: int = DEFAULT_MAX_TOOL_CALLS_PER_TURN,
    ) -> None:
        self._max_parallel_tools = _positive("max_parallel_tools", max_parallel_tools)
        self._max_tool_calls_per_turn = _positive(
            "max_tool_calls_per_turn", max_tool_calls_per_turn
        )
        by_name: dict[str, tuple[ToolPort, ToolSpec]] = {}
        specs: list[ToolSpec] = []
        for tool in tools:
            spec = tool.spec
            key = spec.name.lower()
            if key in by_name:
                raise ValueError(f"Two tools share the name '{spec.name}'.")
            by_name[key] = (tool, spec)
            specs.append(spec)
        self._by_name = by_name
        self._specs = tuple(specs)
        self._names = tuple(s.name for s in specs)
        self._bus = bus
        self._agent = agent
        self._max_output_chars = max_output_chars
        self._running: set[asyncio.Task[ToolResult]] = set()

    def with_tools(self, tools: Sequence[ToolPort]) -> ToolExecutor:
        """An executor with the same limits and these ``tools`` besides this one's (e.g. a
        run's own REPL cell). Abandoned tool tasks stay referenced by this executor."""
        executor = ToolExecutor(
            [tool for tool, _spec in self._by_name.values()] + list(tools),
            bus=self._bus,
            agent=self._agent,
            max_output_chars=self._max_output_chars,
            max_parallel_tools=self._max_parallel_tools,
            max_tool_calls_per_turn=self._max_tool_calls_per_turn,
        )
        executor._running = self._running
        return executor

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def spec_for(self, name: str) -> ToolSpec | None:
        """The spec of the tool called ``name`` (any case), or ``None``."""
        entry = self._by_name.get(name.strip().lower())
        return entry[1] if entry is not None else None

    @property
    def max_parallel_tools(self) -> int:
        return self._max_parallel_tools

    @property
    def max_tool_calls_per_turn(self) -> int:
        return self._max_tool_calls_per_turn

    async def execute_all(
        self, calls: Sequence[ToolCall], *, deadline: float | None = None
    ) -> list[ToolResult]:
        """Run the calls of one turn concurrently, within the limits (see :meth:`bounded`);
        the results come back in call order. With a ``deadline`` (event-loop time), calls
        still running when it passes are cancelled and reported as failed."""
        if deadline is not None:
            return await self._execute_until(calls, deadline)
        if len(calls) == 1:
            return [await self.execute(calls[0])]
        if not calls:
            return []
        return list(await asyncio.gather(*self.bounded(calls)))

    async def _execute_until(self, calls: Sequence[ToolCall], deadline: float) -> list[ToolResult]:
        loop = asyncio.get_running_loop()
        tasks = [asyncio.ensure_future(step) for step in self.bounded(calls)]
        try:
            done, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - loop.time()))
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        for task in pending:
            task.cancel()
        return [
            task.result() if task in done else self._stopped(call)
            for call, task in zip(calls, tasks, strict=True)
        ]

    @staticmethod
    def _stopped(call: ToolCall) -> ToolResult:
        return ToolResult(
            tool_name=call.name,
            content=f"Tool '{call.name}' was stopped: the run's time limit was reached.",
            success=False,
            call_id=call.id,
            metadata={"error": "run_time_limit"},
        )

    def bounded(self, calls: Sequence[ToolCall]) -> list[Coroutine[None, None, ToolResult]]:
        """One coroutine per call of one turn, in call order, for the caller to run
        together: at most ``max_parallel_tools`` of them run a call at a time (the others
        wait, before their ``TOOL_CALL_START``), and those beyond ``max_tool_calls_per_turn``
        refuse their call without running it."""
        slots = asyncio.Semaphore(self._max_parallel_tools)
        allowed = self._max_tool_calls_per_turn
        return [
            self._in_turn(call, slots) if index < allowed else self._refuse(call, len(calls))
            for index, call in enumerate(calls)
        ]

    async def _in_turn(self, call: ToolCall, slots: asyncio.Semaphore) -> ToolResult:
        async with slots:
            return await self.execute(call)

    async def _refuse(self, call: ToolCall, asked: int) -> ToolResult:
        limit = self._max_tool_calls_per_turn
        message = (
            f"Tool call not run: this turn asked for {asked} tool calls and at most {limit} "
            f"run per turn. Make at most {limit} calls in one turn."
        )
        return await self._execute(call, message)

    async def execute(self, call: ToolCall) -> ToolResult:
        """Run one call. Never raises, except ``asyncio.CancelledError``."""
        return await self._execute(call, None)

    async def _execute(self, call: ToolCall, refusal: str | None) -> ToolResult:
        """Run one call, or with ``refusal`` fail it unrun with that message; the events
        and the output bound apply either way."""
        started = perf_counter()
        entry = self._by_name.get(call.name.strip().lower())
        bus = self._bus
        recording = None
        if bus is not None:
            recording = bus.recording
            if not bus.has_subscribers:
                bus = None
        step = None
        if recording is not None:
            step = recording.tool_started(call.name, call.id, call.arguments)
        if bus is not None:
            bus.publish(
                ToolCallStarted(
                    tool=call.name, call_id=call.id, arguments=call.arguments, agent=self._agent
                )
            )
        if refusal is not None:
            result = self._failure(call, refusal, "too_many_calls")
        elif entry is None:
            result = self._failure(call, self._unknown_message(call.name), "unknown_tool")
        elif call.raw_arguments is not None:
            result = self._failure(call, self._invalid_json_message(call, entry[1]), "invalid_json")
        else:
            tool, spec = entry
            errors = validate(call.arguments, spec.parameters)
            if errors:
                result = self._failure(
                    call, self._invalid_arguments_message(spec, errors), "invalid_arguments"
                )
            elif spec.blocking:
                result = await self._run(tool, spec, call)
            else:
                result = await self._run_directly(tool, spec, call)
        result = self._finish(call, result, entry[1] if entry is not None else None, started)
        if recording is not None:
            recording.tool_ended(step, result.content, result.success)
        if bus is not None:
            bus.publish(
                ToolCallEnded(
                    tool=result.tool_name,
                    call_id=call.id,
                    success=result.success,
                    latency_seconds=result.latency_seconds,
                    result=result.content,
                    agent=self._agent,
                )
            )
        return result

    async def _run(self, tool: ToolPort, spec: ToolSpec, call: ToolCall) -> ToolResult:
        task = asyncio.ensure_future(tool.execute(call.arguments))
        timeout = spec.timeout_seconds if spec.timeout_seconds > 0 else None
        try:
            await asyncio.wait((task,), timeout=timeout)
        except asyncio.CancelledError:
            self._abandon(task)
            raise
        if not task.done():
            self._abandon(task)
            return self._failure(
                call, f"Tool '{spec.name}' timed out after {spec.timeout_seconds:g}s.", "timeout"
            )
        if task.cancelled():
            return self._failure(call, f"Tool '{spec.name}' was cancelled.", "exception")
        exc = task.exception()
        if exc is not None:
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return self._failure(call, f"Tool '{spec.name}' failed: {detail}", "exception")
        return task.result()

    async def _run_directly(self, tool: ToolPort, spec: ToolSpec, call: ToolCall) -> ToolResult:
        """A tool declared non-blocking: awaited here, without a task or a timeout."""
        try:
            return await tool.execute(call.arguments)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return self._failure(call, f"Tool '{spec.name}' failed: {detail}", "exception")

    def _abandon(self, task: asyncio.Task[ToolResult]) -> None:
        """Cancel ``task`` without waiting for it; keep it referenced until it ends."""
        task.cancel()
        if not task.done():
            self._running.add(task)
            task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[ToolResult]) -> None:
        self._running.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it as never retrieved

    def _finish(
        self, call: ToolCall, result: ToolResult, spec: ToolSpec | None, started: float
    ) -> ToolResult:
        content, cut = truncate(result.content, self._max_output_chars)
        return ToolResult(
            tool_name=spec.name if spec is not None else call.name,
            content=content,
            success=result.success,
            call_id=call.id,
            latency_seconds=perf_counter() - started,
            truncated=result.truncated or cut,
            metadata=result.metadata,
        )

    @staticmethod
    def _failure(call: ToolCall, message: str, kind: str) -> ToolResult:
        metadata: JSONObject = {"error": kind}
        return ToolResult(tool_name=call.name, content=message, success=False, metadata=metadata)

    def _unknown_message(self, name: str) -> str:
        available = ", ".join(self._names) if self._names else "none"
        return f"Unknown tool '{name}'. Available tools: {available}."

    @staticmethod
    def _invalid_json_message(call: ToolCall, spec: ToolSpec) -> str:
        raw = call.raw_arguments or ""
        try:
            json.loads(raw)
            problem = "they are not a JSON object"
        except (ValueError, RecursionError) as exc:
            problem = f"they are not valid JSON ({exc})"
        shown = raw if len(raw) <= 200 else raw[:200] + "..."
        return (
            f"Invalid arguments for tool '{spec.name}': {problem}. Received: {shown}\n"
            "Send the arguments as one JSON object matching this schema: "
            + json.dumps(spec.parameters, ensure_ascii=False)
        )

    @staticmethod
    def _invalid_arguments_message(spec: ToolSpec, errors: list[str]) -> str:
        return (
            f"Invalid arguments for tool '{spec.name}':\n"
            + "\n".join(f"- {e}" for e in errors)
            + "\nExpected parameters: "
            + json.dumps(spec.parameters, ensure_ascii=False)
        )

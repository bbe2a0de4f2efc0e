"""What CodeAct (``native_openhands``) and the RLM share: the one tool loop, plus a REPL.

Running code is a tool call to an internal tool (:class:`ReplCellTool`) that each run adds
beside the user's tools, so it goes through the executor (events, timeout, output bound)
and the loop guard like any other call. Each run gets its own REPL session, started on the
first piece of code and closed when the run ends, and its own :class:`SubModelCallbacks`,
so the code's ``llm_query``/``llm_batch``/``tool_call`` reach the sub-model and the user's
tools. The sub-calls' usage is added to the run's usage and their tool results to its
results. All of it lives in the run's :class:`ReplRun`: one agent instance serves
concurrent runs, each with its own interpreter.

Context window: with ``max_prompt_tokens`` set, every request is fitted to it (oldest steps
first, see :mod:`~jarvis.domain.loop.context_window`); whatever the setting, when the engine
reports the prompt as too long, the request is refitted to half its size and the turn
retried (three times at most), and the smaller budget holds for the rest of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar, Self, Unpack

from jarvis.domain.json_types import JSONObject
from jarvis.domain.loop.context_window import ContextWindow
from jarvis.domain.loop.options import AgentOptions, AgentParts
from jarvis.domain.loop.repl_cell import ReplCellTool, repl_cell_spec
from jarvis.domain.loop.run_scope import RunScope
from jarvis.domain.loop.settings import SubModelSettings, ToolExecution
from jarvis.domain.loop.sub_calls import SubModelCallbacks
from jarvis.domain.loop.tool_executor import ToolExecutor
from jarvis.domain.loop.tool_loop import ToolAgentOptions, ToolUsingAgent
from jarvis.domain.ports import InferencePort, ReplPort
from jarvis.domain.repl import ReplLimits
from jarvis.domain.run.contract import AgentContext, AgentResult
from jarvis.domain.tools.specs import ToolResult, ToolSpec

OVERFLOW_RETRIES = 3
"""How many times a turn is retried, each time at half the size, when the engine reports
that the prompt does not fit its context window."""


class ReplAgentOptions(ToolAgentOptions, total=False):
    """The settings of a REPL-using agent, for subclasses to pass on unchanged."""

    repl: ReplPort | None
    repl_limits: ReplLimits | None
    sub_calls: SubModelSettings | None


class ReplRun(RunScope):
    """One run of a REPL-using agent: its cell (and so its interpreter), its sub-model
    callbacks, the tool results of preparing its input, and its own metadata."""

    __slots__ = ("callbacks", "cell", "early", "metadata", "repl")

    def __init__(
        self,
        input: str,
        executor: ToolExecutor,
        *,
        callbacks: SubModelCallbacks,
        cell: ReplCellTool | None,
        repl: ReplPort | None,
        early: Sequence[ToolResult],
        metadata: JSONObject,
    ) -> None:
        super().__init__(input, executor)
        self.callbacks = callbacks
        self.cell = cell
        self.repl = repl
        self.early = tuple(early)
        self.metadata = metadata

    def complete(self, result: AgentResult) -> AgentResult:
        metadata: JSONObject = dict(result.metadata)
        metadata.update(self.metadata)
        callbacks = self.callbacks
        if callbacks.calls:
            metadata["sub_calls"] = callbacks.calls
        if self.cell is not None and self.cell.executions and self.repl is not None:
            metadata["code_executions"] = self.cell.executions
            metadata["repl_isolation"] = self.repl.isolation().describe()
        return replace(
            result,
            usage=result.usage + callbacks.usage,
            tool_results=(*self.early, *result.tool_results, *callbacks.tool_results),
            metadata=metadata,
        )

    async def aclose(self) -> None:
        if self.cell is not None:
            await self.cell.aclose()


class ReplUsingAgent(ToolUsingAgent):
    """A tool-using agent whose model also writes code that runs in an isolated REPL.

    ``repl`` is the REPL factory (the container passes the isolated subprocess REPL; tests
    may pass :class:`jarvis.testing.InMemoryRepl`); without one, code is never run.
    ``sub_calls`` configures ``llm_query``/``llm_batch`` (:class:`SubModelSettings`).
    ``execution.max_output_chars`` bounds what one execution (or tool) shows the model; the
    context window (``max_prompt_tokens``) the estimated size of each request.
    """

    uses_repl: ClassVar[bool] = True
    repl_tool_name: ClassVar[str] = "python"
    repl_tool_description: ClassVar[str] = (
        "Execute Python code in a persistent, isolated interpreter (standard library only, "
        "no network); returns stdout, stderr, the value of the last expression and errors."
    )
    default_execution: ClassVar[ToolExecution] = ToolExecution(max_output_chars=10_000)
    default_context_window: ClassVar[ContextWindow] = ContextWindow(
        overflow_retries=OVERFLOW_RETRIES
    )
    default_sub_calls: ClassVar[SubModelSettings] = SubModelSettings()

    def __init__(
        self,
        inference: InferencePort,
        model: str,
        *,
        repl: ReplPort | None = None,
        repl_limits: ReplLimits | None = None,
        sub_calls: SubModelSettings | None = None,
        **options: Unpack[ToolAgentOptions],
    ) -> None:
        self.repl = repl
        self.repl_limits = repl_limits
        self.cell_spec = repl_cell_spec(
            name=self.repl_tool_name, description=self.repl_tool_description, limits=repl_limits
        )
        super().__init__(inference, model, **options)
        self.sub_calls = self.default_sub_calls if sub_calls is None else sub_calls
        self.tool_runner = ToolExecutor(
            self.user_tools,
            bus=self.bus,
            agent=self.agent_id,
            max_output_chars=self.execution.max_output_chars,
        )
        """Runs the ``tool_call`` callbacks of code (the user's tools only)."""

    @classmethod
    def from_options(cls, parts: AgentParts, options: AgentOptions) -> Self:
        return cls(parts.inference, parts.model, **cls.repl_agent_options(parts, options))

    @classmethod
    def repl_agent_options(cls, parts: AgentParts, options: AgentOptions) -> ReplAgentOptions:
        """The settings of a REPL-using agent from ``parts`` and the named options."""
        sub, window = cls.default_sub_calls, cls.default_context_window
        settings: ReplAgentOptions = {
            **cls.tool_agent_options(parts, options),
            "repl": parts.repl,
            "repl_limits": None,
            "sub_calls": SubModelSettings(
                model=options.text("sub_model", sub.model),
                temperature=options.number("sub_temperature", sub.temperature),
                max_tokens=options.integer("sub_max_tokens", sub.max_tokens),
                concurrency=options.integer("sub_concurrency", sub.concurrency),
                max_calls=options.integer("max_sub_calls", sub.max_calls),
            ),
            "context_window": replace(
                window,
                max_prompt_tokens=options.optional_integer(
                    "max_prompt_tokens", window.max_prompt_tokens
                ),
            ),
        }
        return settings

    @property
    def max_output_chars(self) -> int:
        return self.execution.max_output_chars

    def run_tool_specs(self) -> Sequence[ToolSpec]:
        return (self.cell_spec,) if self.repl is not None else ()

    # -- hooks for the two agents ---------------------------------------------------------

    async def prepare_input(
        self, input: str, context: AgentContext | None
    ) -> tuple[str, list[ToolResult]]:
        """The input the loop starts from, and tool results produced while preparing it."""
        return input, []

    def repl_variables(self, input: str, context: AgentContext | None) -> dict[str, str]:
        """Variables the run's REPL session starts with."""
        return {}

    def run_metadata(self, input: str, context: AgentContext | None) -> JSONObject:
        """Extra metadata for the result of the run of ``input``."""
        return {}

    # -- the run --------------------------------------------------------------------------

    async def open_run(self, input: str, context: AgentContext | None) -> RunScope:
        prepared, early = await self.prepare_input(input, context)
        sub = self.sub_calls
        callbacks = SubModelCallbacks(
            generate=self.generate,
            model=sub.model or self.model,
            temperature=sub.temperature,
            max_tokens=sub.max_tokens,
            options=self.sampling.engine_options,
            tools=self.tool_runner,
            max_concurrency=sub.concurrency,
            max_calls=sub.max_calls,
        )
        cell = None
        executor = self.executor
        if self.repl is not None:
            cell = ReplCellTool(
                repl=self.repl,
                spec=self.cell_spec,
                limits=self.repl_limits,
                max_output_chars=self.execution.max_output_chars,
                callbacks=callbacks,
                variables=self.repl_variables(input, context),
            )
            executor = executor.with_tools([cell])
        return ReplRun(
            prepared,
            executor,
            callbacks=callbacks,
            cell=cell,
            repl=self.repl,
            early=early,
            metadata=self.run_metadata(input, context),
        )

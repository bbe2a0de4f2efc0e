"""What one run of a tool-using agent brings besides the loop.

The loop keeps nothing of a run on the agent; whatever a run needs of its own — the input
it starts from, tools only it may call (a REPL cell bound to its own interpreter), what it
adds to the result, what must be closed when it ends — lives in its :class:`RunScope`,
opened by :meth:`ToolUsingAgent.open_run` and closed when the run ends, however it ends.
"""

from __future__ import annotations

from jarvis.domain.loop.tool_executor import ToolExecutor
from jarvis.domain.run.contract import AgentResult


class RunScope:
    """The default scope: the input as given, the agent's tools, the result unchanged."""

    __slots__ = ("executor", "input")

    def __init__(self, input: str, executor: ToolExecutor) -> None:
        self.input = input
        """The input the loop starts from (e.g. with pages fetched before the first turn)."""
        self.executor = executor
        """Runs this run's tool calls."""

    def complete(self, result: AgentResult) -> AgentResult:
        """The result as the caller gets it."""
        return result

    async def aclose(self) -> None:
        """Release what the run held; called once, when the run ends."""

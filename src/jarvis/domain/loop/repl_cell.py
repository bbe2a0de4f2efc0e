"""The internal tool through which CodeAct and the RLM run code: one persistent REPL session
per run, started on first use (a run that never writes code never starts an interpreter)
and closed when the run ends. Each run has a cell of its own."""

from __future__ import annotations

from collections.abc import Mapping

from jarvis.domain.errors import SandboxError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.ports import ReplPort, ReplSession
from jarvis.domain.repl import ReplCallbacks, ReplLimits
from jarvis.domain.tools.specs import ToolResult, ToolSpec

CODE_PARAMETERS: JSONObject = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "Python code to execute."}},
    "required": ["code"],
    "additionalProperties": False,
}


def repl_cell_spec(*, name: str, description: str, limits: ReplLimits | None) -> ToolSpec:
    """The spec of a REPL cell tool: its timeout leaves the REPL's own limits room to act
    (a cell's code may wait on several sub-model calls)."""
    timeout = (limits.timeout_seconds if limits is not None else 30.0) * 4 + 600
    return ToolSpec(
        name=name,
        description=description,
        parameters=CODE_PARAMETERS,
        category="code",
        timeout_seconds=timeout,
    )


class ReplCellTool:
    """Runs one cell of code in the REPL session of one run.

    Made for one run, with that run's callbacks and the variables its session starts
    with; the session starts on the first cell and :meth:`aclose` closes it.

    The result's content is the observation the model reads (output, value, error; cut to
    ``max_output_chars``); ``success`` is false when the code failed; ``metadata`` carries
    ``error_kind``, ``restarted`` and, when the code called ``FINAL``/``FINAL_VAR``,
    ``final`` (the answer that ends an RLM run).
    """

    def __init__(
        self,
        *,
        repl: ReplPort,
        spec: ToolSpec,
        limits: ReplLimits | None = None,
        max_output_chars: int = 10_000,
        callbacks: ReplCallbacks | None = None,
        variables: Mapping[str, str] | None = None,
    ) -> None:
        self.repl = repl
        self.limits = limits
        self.max_output_chars = max_output_chars
        self._spec = spec
        self._callbacks = callbacks
        self._variables = dict(variables or {})
        self._session: ReplSession | None = None
        self.executions = 0

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def aclose(self) -> None:
        """Close the run's session, if one was started."""
        session, self._session = self._session, None
        self._callbacks = None
        if session is not None:
            await session.aclose()

    @property
    def session_started(self) -> bool:
        return self._session is not None

    async def _ensure_session(self) -> ReplSession:
        if self._session is None:
            session = await self.repl.start(callbacks=self._callbacks, limits=self.limits)
            try:
                for name, value in self._variables.items():
                    await session.set_variable(name, value)
            except BaseException:
                await session.aclose()
                raise
            self._session = session
        return self._session

    async def execute(self, arguments: JSONObject) -> ToolResult:
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return ToolResult(
                tool_name=self._spec.name,
                content="Error: 'code' must be a non-empty string of Python code.",
                success=False,
            )
        try:
            session = await self._ensure_session()
        except SandboxError as exc:
            return ToolResult(
                tool_name=self._spec.name,
                content=f"Error: the code could not be run: {exc}"
                + (f" {exc.hint}" if exc.hint else ""),
                success=False,
                metadata={"error": "sandbox"},
            )
        self.executions += 1
        result = await session.execute(code)
        metadata: JSONObject = {
            "error_kind": result.error_kind,
            "restarted": result.restarted,
            "duration_seconds": round(result.duration_seconds, 6),
        }
        if result.final is not None:
            metadata["final"] = result.final
        return ToolResult(
            tool_name=self._spec.name,
            content=result.observation(self.max_output_chars),
            success=result.ok,
            truncated=result.truncated,
            metadata=metadata,
        )

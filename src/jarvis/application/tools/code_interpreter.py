"""The ``code_interpreter`` tool: run a piece of Python once, in a fresh isolated REPL.

Each call gets its own interpreter (nothing persists between calls; agents that need
persistence, CodeAct and the RLM, keep a session for the whole run instead). The model reads
stdout, stderr, the value of the last expression, and — when something went wrong — a
clear error: the exception, or which limit was hit (time, CPU, memory) and what that means.
"""

from __future__ import annotations

from jarvis.domain.errors import SandboxError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.ports import ReplPort
from jarvis.domain.repl import ExecutionResult, ReplLimits
from jarvis.domain.tools.specs import ToolResult, ToolSpec

CODE_INTERPRETER_NAME = "code_interpreter"

_LIMIT_HINTS = {
    "timeout": "The code ran out of time; make it faster or do less per call.",
    "cpu_limit": "The code used up its CPU time; make it faster or do less per call.",
    "memory_limit": "The code ran out of memory; work on smaller pieces of data.",
    "crashed": "The interpreter died; the code may have exhausted a limit.",
}


def code_interpreter_spec(limits: ReplLimits) -> ToolSpec:
    """The tool's spec; its timeout leaves room for starting the interpreter."""
    return ToolSpec(
        name=CODE_INTERPRETER_NAME,
        description=(
            "Run Python code in an isolated interpreter and return what it printed, the "
            "value of its last expression and any error. Standard library only, no network, "
            f"files only in a private working directory, at most {limits.timeout_seconds:g} s "
            f"and {limits.memory_mb} MB. Nothing persists between calls."
        ),
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The Python code to run."}},
            "required": ["code"],
            "additionalProperties": False,
        },
        category="code",
        timeout_seconds=limits.timeout_seconds + 15.0,
        side_effects=True,  # it runs code the model wrote: approval policies ask about it
    )


def render(result: ExecutionResult, max_chars: int) -> str:
    """The observation: the REPL's own rendering plus what to do about a limit."""
    text = result.observation(max_chars)
    hint = _LIMIT_HINTS.get(result.error_kind or "")
    return f"{text}\n{hint}" if hint else text


class CodeInterpreterTool:
    """``code_interpreter`` over a :class:`~jarvis.domain.ports.ReplPort`."""

    def __init__(self, repl: ReplPort, *, limits: ReplLimits | None = None) -> None:
        self.repl = repl
        self.limits = limits or ReplLimits()
        self._spec = code_interpreter_spec(self.limits)

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def execute(self, arguments: JSONObject) -> ToolResult:
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return _failed("Error: 'code' must be a non-empty string of Python code.", "arguments")
        try:
            session = await self.repl.start(limits=self.limits)
        except SandboxError as exc:
            hint = f" {exc.hint}" if exc.hint else ""
            return _failed(f"Error: the code could not be run: {exc}{hint}", "sandbox")
        try:
            result = await session.execute(code)
        finally:
            await session.aclose()
        return ToolResult(
            tool_name=CODE_INTERPRETER_NAME,
            content=render(result, self.limits.max_output_chars),
            success=result.ok,
            truncated=result.truncated,
            metadata={
                "error_kind": result.error_kind,
                "duration_seconds": round(result.duration_seconds, 6),
            },
        )


def _failed(message: str, kind: str) -> ToolResult:
    return ToolResult(
        tool_name=CODE_INTERPRETER_NAME, content=message, success=False, metadata={"error": kind}
    )

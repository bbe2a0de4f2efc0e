"""The input and the typed outcome of an agent run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Usage
from jarvis.domain.llm.messages import Message
from jarvis.domain.tools.specs import ToolResult

StopReason = Literal[
    "final_answer",
    "max_turns",
    "max_seconds",
    "max_total_tokens",
    "loop_detected",
    "parse_error",
    "cancelled",
    "error",
]
"""Why a run ended. A run budget that ran out is named by its limit: ``max_turns``,
``max_seconds``, ``max_total_tokens``, or ``loop_detected`` when the loop guard refused
every call of too many turns (the answer is then the one tool-less call's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryHit:
    """A piece of remembered or retrieved text handed to an agent as context."""

    content: str
    source: str = ""
    score: float = 0.0
    line: int = 0
    """The first line of ``content`` in its source (1-based; 0: not a file's text)."""
    end_line: int = 0
    """The last line of ``content`` in its source (0: not known)."""

    @property
    def citation(self) -> str:
        """How an answer cites this hit: ``[source:line]`` (``[source]`` without a line)."""
        where = self.source or "memory"
        return f"[{where}:{self.line}]" if self.line else f"[{where}]"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentContext:
    """Everything an agent may use besides the question itself.

    ``conversation`` holds prior messages (system messages in it are folded into the one
    leading system prompt), ``tools`` the names of the tools granted to the run,
    ``memory_results`` pre-fetched memory, and ``metadata`` agent-specific inputs such as the
    RLM's ``context``.
    """

    conversation: tuple[Message, ...] = ()
    tools: tuple[str, ...] = ()
    memory_results: tuple[MemoryHit, ...] = ()
    metadata: JSONObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentResult:
    """The typed result of one run.

    ``turns`` counts inference calls. ``usage`` is summed over every inference the run
    made. ``stop_reason`` says why the run ended; ``metadata`` carries agent-specific
    details (e.g. ``max_turns_exceeded``, ``mode``, ``error``).
    """

    content: str
    stop_reason: StopReason = "final_answer"
    tool_results: tuple[ToolResult, ...] = ()
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    metadata: JSONObject = field(default_factory=dict)

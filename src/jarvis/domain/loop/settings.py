"""The settings of an agent, as frozen value objects passed whole.

An agent takes each concern as one object — how it samples, what its prompt says, how
long a run may go on (:class:`~jarvis.domain.loop.budget.RunBudget`), how tool calls are
bounded, how sub-model calls from code are made — rather than a long list of loose keyword
arguments repeated by every subclass. Every agent class names its defaults as class
attributes of these types, so a change of one setting is ``replace(default, field=...)``.

The values are checked where they come in from outside (the application's agent options);
the objects themselves only refuse what would make a run meaningless.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jarvis.domain.json_types import JSONObject
from jarvis.domain.loop.tool_executor import (
    DEFAULT_MAX_PARALLEL_TOOLS,
    DEFAULT_MAX_TOOL_CALLS_PER_TURN,
)

if TYPE_CHECKING:
    from jarvis.domain.loop.approval_gate import ApprovalGate


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplingSettings:
    """How every reply of the run's model is sampled.

    ``engine_options`` are passed to the engine as they are (e.g. Ollama's ``num_ctx``).
    """

    temperature: float = 0.7
    max_tokens: int = 1024
    engine_options: JSONObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptSettings:
    """What the system prompt says besides the agent's protocol instructions.

    ``system_prompt`` replaces the agent's own template; ``persona_prompt`` (the SOUL /
    MEMORY / USER sections) is always appended after it and can never erase it.
    """

    system_prompt: str | None = None
    persona_prompt: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecution:
    """How the tool calls of one turn are bounded: what one result may show the model, how
    many calls run at once, how many one turn may make (the rest are refused unrun), and
    who approves them."""

    max_output_chars: int = 20_000
    max_parallel_tools: int = DEFAULT_MAX_PARALLEL_TOOLS
    max_tool_calls_per_turn: int = DEFAULT_MAX_TOOL_CALLS_PER_TURN
    approvals: ApprovalGate | None = None
    """Decides which of the calls run (``None``: all of them)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubModelSettings:
    """How code run by an agent reaches a model through ``llm_query``/``llm_batch``.

    ``model`` ``None`` means the run's own model; ``concurrency`` bounds the parallel calls
    of one batch and ``max_calls`` the calls of the whole run.
    """

    model: str | None = None
    temperature: float = 0.3
    max_tokens: int = 1024
    concurrency: int = 16
    max_calls: int = 100

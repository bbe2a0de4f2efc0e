"""The state of one run of the tool loop, and of one inference in it (never shared)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.completion import Completion, FinishReason, StreamChunk, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message
from jarvis.domain.loop.approval_gate import RunApprovals
from jarvis.domain.loop.budget import BudgetKind
from jarvis.domain.loop.context_window import ContextWindow, WindowFit
from jarvis.domain.loop.guard import LoopGuard
from jarvis.domain.loop.run_scope import RunScope
from jarvis.domain.loop.settings import SamplingSettings
from jarvis.domain.protocols.tool_protocol import ToolProtocol
from jarvis.domain.run.contract import AgentContext, AgentResult
from jarvis.domain.run.events import EventBus
from jarvis.domain.tools.specs import ToolResult


class LoopAgent(Protocol):
    """What the loop's steps use of the agent that runs them (a ``ToolUsingAgent``)."""

    @property
    def agent_id(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def sampling(self) -> SamplingSettings: ...

    @property
    def context_window(self) -> ContextWindow: ...

    @property
    def bus(self) -> EventBus | None: ...

    async def generate(self, request: InferenceRequest) -> Completion: ...

    def stream_inference(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]: ...


@dataclass(slots=True)
class LoopRun:
    """The mutable state of one run (never shared between runs)."""

    scope: RunScope
    context: AgentContext | None
    protocol: ToolProtocol
    messages: list[Message]
    guard: LoopGuard
    window: WindowFit
    deadline: float | None
    model: str
    streaming: bool
    approvals: RunApprovals | None = None
    """The run's approvals (``None``: every call runs, as the agent has no gate)."""
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
    exhausted: BudgetKind | None = None
    """Set when a budget ran out: the wrap-up comes next."""
    result: AgentResult | None = None
    """Set when the run has its answer."""
    ended: bool = False


@dataclass(slots=True)
class Reply:
    """What one inference produced: the completion (``None`` when its deadline passed),
    the text shown while it streamed, and how many chunks arrived."""

    completion: Completion | None = None
    shown: list[str] = field(default_factory=list)
    chunks: int = 0


def remainder(answer: str, shown: Sequence[str]) -> str:
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

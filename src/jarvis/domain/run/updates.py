"""What a run reports while it happens: the one stream schema for CLI, SDK and HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from jarvis.domain.approvals import ApprovalDecision, ApprovalRequest
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.run.contract import AgentResult
from jarvis.domain.tools.specs import ToolResult


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """A piece of answer text, as the engine produced it."""

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallsRequested:
    """The model asked for these tool calls (complete, assembled) and they will run now."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultReady:
    """One requested tool call finished."""

    result: ToolResult


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    """The run is over; always the last update."""

    result: AgentResult


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequired:
    """A call waits for a person's decision (the approval policy said ``ask``); it is
    recorded with whoever decides before this is reported."""

    request: ApprovalRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided:
    """A call was allowed or denied, and by which rule (reported for every call of an
    agent with approvals, before the allowed ones run)."""

    decision: ApprovalDecision


RunUpdate: TypeAlias = (
    TextDelta
    | ToolCallsRequested
    | ToolResultReady
    | RunFinished
    | ApprovalRequired
    | ApprovalDecided
)

"""Typed events and the bus that carries them.

Events are facts about a run that already happened (past tense). Subscribers are for live
UIs and an application's own telemetry; a failing subscriber is reported to ``on_error``
and never breaks the run that published the event. Events are made only when someone
subscribes. Traces are not recorded from them: the bus's run recording
(:mod:`jarvis.domain.run.steps`) is told each step directly, at a fraction of an event's
cost. There is no global bus: whoever builds a run passes one in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from time import monotonic
from typing import Literal, TypeAlias

from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import FinishReason, Usage
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.quick_init import quick_init
from jarvis.domain.run.steps import RunRecording


class EventType(StrEnum):
    AGENT_RUN_START = "agent_run_start"
    AGENT_RUN_END = "agent_run_end"
    TOOL_CALL_START = "tool_call_start"
    TOOL_CALL_END = "tool_call_end"
    INFERENCE_START = "inference_start"
    INFERENCE_END = "inference_end"
    LOOP_GUARD_TRIGGERED = "loop_guard_triggered"


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRunStarted:
    """An agent began one run (published once per run, whatever its number of turns)."""

    agent: str
    input: str
    at: float = field(default_factory=monotonic)
    type: EventType = EventType.AGENT_RUN_START


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRunEnded:
    """An agent's run ended: ``turns`` inferences, and why (``cancelled`` and ``error``
    included). Published once per run."""

    agent: str
    turns: int
    stop_reason: str
    error: str = ""
    """The kind of error that ended the run (``EngineUnavailableError``...), when known."""
    at: float = field(default_factory=monotonic)
    type: EventType = EventType.AGENT_RUN_END


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted:
    tool: str
    call_id: str
    arguments: JSONObject
    agent: str = ""
    at: float = field(default_factory=monotonic)
    type: EventType = EventType.TOOL_CALL_START


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEnded:
    tool: str
    call_id: str
    success: bool
    latency_seconds: float
    result: str
    agent: str = ""
    at: float = field(default_factory=monotonic)
    type: EventType = EventType.TOOL_CALL_END


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceStarted:
    engine: str
    model: str
    at: float = field(default_factory=monotonic)
    type: EventType = EventType.INFERENCE_START


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceEnded:
    engine: str
    model: str
    usage: Usage
    finish_reason: FinishReason
    tool_calls: tuple[ToolCall, ...] = ()
    latency_seconds: float = 0.0
    first_token_seconds: float | None = None
    """Seconds from the request to the first streamed text (``None``: not streamed)."""
    at: float = field(default_factory=monotonic)
    type: EventType = EventType.INFERENCE_END


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class LoopGuardTriggered:
    """The loop guard stopped a call from running: the first time a pattern trips it warns
    the model (``action="warn"``), every later time it blocks the call (``"block"``).
    ``pattern`` is ``identical_call`` or ``ping_pong``; ``turn`` counts from 1."""

    agent: str
    tool: str
    call_id: str
    action: Literal["warn", "block"]
    pattern: Literal["identical_call", "ping_pong"]
    arguments: JSONObject
    turn: int
    message: str = ""
    """What the model was told instead of the tool's result."""
    at: float = field(default_factory=monotonic)
    type: EventType = EventType.LOOP_GUARD_TRIGGERED


Event: TypeAlias = (
    AgentRunStarted
    | AgentRunEnded
    | ToolCallStarted
    | ToolCallEnded
    | InferenceStarted
    | InferenceEnded
    | LoopGuardTriggered
)
Subscriber: TypeAlias = Callable[[Event], None]


class EventBus:
    """Synchronous publish/subscribe, isolated per run or per application instance."""

    __slots__ = ("_on_error", "_subscribers", "recording", "records_runs")

    def __init__(self, on_error: Callable[[Subscriber, Exception], None] | None = None) -> None:
        self._subscribers: tuple[tuple[EventType | None, Subscriber], ...] = ()
        """Replaced, never changed: a publish goes through the subscribers of its start
        without copying them (subscribing is rare, publishing is on every step of a run)."""
        self._on_error = on_error
        self.recording: RunRecording | None = None
        """Told each step of every run directly, for its trace (no event is made for it)."""
        self.records_runs = True
        """Whether the runs' own starts and ends are recorded (an operator's inner loop:
        no, its tick records them)."""

    def subscribe(
        self, subscriber: Subscriber, event_type: EventType | None = None
    ) -> Callable[[], None]:
        """Register ``subscriber`` (for one event type, or all); returns the unsubscriber."""
        entry = (event_type, subscriber)
        self._subscribers = (*self._subscribers, entry)

        def unsubscribe() -> None:
            subscribers = list(self._subscribers)
            if entry in subscribers:
                subscribers.remove(entry)
                self._subscribers = tuple(subscribers)

        return unsubscribe

    def record_with(self, recording: RunRecording | None) -> None:
        """Record the runs on this bus with ``recording`` (``None``: stop recording)."""
        self.recording = recording

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subscribers)

    def publish(self, event: Event) -> None:
        for event_type, subscriber in self._subscribers:
            if event_type is not None and event_type is not event.type:
                continue
            try:
                subscriber(event)
            except Exception as exc:  # a subscriber must never break the publisher
                if self._on_error is not None:
                    with contextlib.suppress(Exception):
                        self._on_error(subscriber, exc)

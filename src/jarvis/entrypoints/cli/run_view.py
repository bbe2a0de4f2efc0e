"""A run shown in the terminal as it happens (``jarvis ask`` and ``jarvis chat``).

The answer's text is streamed; each tool call and each tool result is a notice line on
stderr; the :class:`~jarvis.application.ask.Answer` is kept for what follows it (the
``--verbose`` summary, chat's note on an empty answer).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from jarvis.application.ask import Answer, Sampling
from jarvis.application.run_updates import AnswerUpdate, handle
from jarvis.domain.json_types import JSONObject
from jarvis.domain.run.updates import (
    ApprovalDecided,
    ApprovalRequired,
    TextDelta,
    ToolCallsRequested,
    ToolResultReady,
)
from jarvis.entrypoints.cli.render import StreamRenderer, tool_call_line, tool_result_line


class ShownRun:
    """Each update of a run on ``renderer``, the answer kept in :attr:`final`."""

    def __init__(self, renderer: StreamRenderer) -> None:
        self.renderer = renderer
        self.final: Answer | None = None

    async def show(self, updates: AsyncIterator[AnswerUpdate]) -> Answer | None:
        """Every update of ``updates`` shown; the answer (``None`` if the run gave none)."""
        async for update in updates:
            handle(update, self)
        return self.final

    def text(self, update: TextDelta) -> None:
        self.renderer.text(update.text)

    def tool_calls(self, update: ToolCallsRequested) -> None:
        for call in update.calls:
            self.renderer.notice(tool_call_line(call.name, call.arguments_json()))

    def tool_result(self, update: ToolResultReady) -> None:
        result = update.result
        self.renderer.notice(tool_result_line(result.content, success=result.success))

    def approval_required(self, update: ApprovalRequired) -> None:
        """Nothing: the approval port asks at the terminal itself (or denies without one)."""

    def approval_decided(self, update: ApprovalDecided) -> None:
        """Nothing: ``--verbose`` names the decisions after the answer."""

    def answer(self, update: Answer) -> None:
        self.final = update


def summary_lines(answer: Answer, started: float) -> list[str]:
    """``--verbose``'s account of a run that began at ``started`` (``time.perf_counter``)."""
    usage = answer.usage
    lines = [
        f"model {answer.model} on {answer.engine}: {answer.turns} turn(s), "
        f"{usage.prompt_tokens}+{usage.completion_tokens} tokens, "
        f"stop {answer.stop_reason}, {time.perf_counter() - started:.2f} s"
    ]
    lines += approval_lines(answer.metadata)
    runtime_session = answer.metadata.get("session_id")
    if isinstance(runtime_session, str) and runtime_session:
        lines.append(f"runtime session {runtime_session} (continue: -O session=...)")
    return lines


def approval_lines(metadata: JSONObject) -> list[str]:
    """The ``--verbose`` lines naming each tool call's approval decision and its rule."""
    decisions = metadata.get("approvals")
    lines: list[str] = []
    for item in decisions if isinstance(decisions, list) else []:
        if isinstance(item, dict):
            why = f": {item['reason']}" if item.get("reason") else ""
            verb = "allowed" if item.get("decision") == "allow" else "denied"
            lines.append(f"approval: {item.get('tool')} {verb} by {item.get('rule')}{why}")
    return lines


def sampling_line(sampling: Sampling, temperature_from: str) -> str:
    """The ``--verbose`` line saying which temperature the run uses and why."""
    if sampling.source == "requested":
        why = f"set by {temperature_from}" if temperature_from else "as requested"
    elif sampling.source == "engine":
        why = f"{sampling.why}; --temperature or [agent] temperature overrides it"
    else:
        why = sampling.why
    return f"sampling: temperature {sampling.temperature:g} ({why})"

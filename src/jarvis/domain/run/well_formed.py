"""A run's updates and result as every writer can encode them (see
:mod:`jarvis.domain.well_formed`).

An agent's text need not come from jarvis's own code: a plug-in agent writes its answer
itself, a plug-in's or an application's tool writes its result, an application's own
engine writes the model's text and tool calls, an external runtime writes what its
process printed. Any of them can hold a lone surrogate, which no UTF-8 writer (an HTTP
reply, a session store, a terminal's encoding) takes. The use case that takes a run's
updates and result hands them on through these functions, so that every reader after it
gets text with U+FFFD in place of each lone surrogate and nothing else changed.

Each function returns its argument itself when nothing in it needed a change: ordinary
text pays one ``isascii`` check (a text delta of a streamed answer no more than that).
"""

from __future__ import annotations

from dataclasses import replace

from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.run.contract import AgentResult
from jarvis.domain.run.updates import (
    ApprovalDecided,
    ApprovalRequired,
    RunUpdate,
    TextDelta,
    ToolCallsRequested,
    ToolResultReady,
)
from jarvis.domain.tools.specs import ToolResult
from jarvis.domain.well_formed import (
    holds_lone_surrogate,
    is_well_formed,
    well_formed,
    well_formed_object,
)


def well_formed_call(call: ToolCall) -> ToolCall:
    """``call`` with its id, name and arguments well-formed (``call`` itself when they are)."""
    raw = call.raw_arguments
    if (
        is_well_formed(call.id)
        and is_well_formed(call.name)
        and (raw is None or is_well_formed(raw))
        and not (call.arguments and holds_lone_surrogate(call.arguments))
    ):
        return call
    return ToolCall(
        id=well_formed(call.id),
        name=well_formed(call.name),
        arguments=well_formed_object(call.arguments),
        raw_arguments=None if raw is None else well_formed(raw),
    )


def _tool_result_is_well_formed(result: ToolResult) -> bool:
    return (
        is_well_formed(result.content)
        and is_well_formed(result.tool_name)
        and not (result.metadata and holds_lone_surrogate(result.metadata))
    )


def well_formed_tool_result(result: ToolResult) -> ToolResult:
    """``result`` with its tool name, content and metadata well-formed."""
    if _tool_result_is_well_formed(result):
        return result
    return replace(
        result,
        tool_name=well_formed(result.tool_name),
        content=well_formed(result.content),
        metadata=well_formed_object(result.metadata),
    )


def well_formed_result(result: AgentResult) -> AgentResult:
    """``result`` with its answer, tool results, model name and metadata well-formed: the
    result itself when it needs nothing (checked without making anything: this runs once
    per run, on every run)."""
    if (
        is_well_formed(result.content)
        and is_well_formed(result.model)
        and not (result.metadata and holds_lone_surrogate(result.metadata))
    ):
        for tool_result in result.tool_results:
            if not _tool_result_is_well_formed(tool_result):
                break
        else:
            return result
    return replace(
        result,
        content=well_formed(result.content),
        model=well_formed(result.model),
        tool_results=tuple(map(well_formed_tool_result, result.tool_results)),
        metadata=well_formed_object(result.metadata),
    )


def well_formed_update(update: RunUpdate) -> RunUpdate:
    """``update`` with every text in it well-formed (a :class:`TextDelta` pays one check)."""
    if isinstance(update, TextDelta):
        if update.text.isascii():
            return update
        text = well_formed(update.text)
        return update if text is update.text else TextDelta(text=text)
    if isinstance(update, ToolCallsRequested):
        calls = tuple(well_formed_call(c) for c in update.calls)
        same = all(a is b for a, b in zip(calls, update.calls, strict=True))
        return update if same else ToolCallsRequested(calls=calls)
    if isinstance(update, ToolResultReady):
        ready = well_formed_tool_result(update.result)
        return update if ready is update.result else ToolResultReady(result=ready)
    if isinstance(update, ApprovalRequired):
        call = well_formed_call(update.request.call)
        if call is update.request.call:
            return update
        return ApprovalRequired(request=replace(update.request, call=call))
    if isinstance(update, ApprovalDecided):
        decision = update.decision
        tool, reason = well_formed(decision.tool), well_formed(decision.reason)
        if tool is decision.tool and reason is decision.reason:
            return update
        return ApprovalDecided(decision=replace(decision, tool=tool, reason=reason))
    finished = well_formed_result(update.result)
    return update if finished is update.result else replace(update, result=finished)

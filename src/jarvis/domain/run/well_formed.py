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
from jarvis.domain.well_formed import well_formed, well_formed_object


def well_formed_call(call: ToolCall) -> ToolCall:
    """``call`` with its id, name and arguments well-formed."""
    raw = call.raw_arguments
    clean_raw = raw if raw is None else well_formed(raw)
    fields = (well_formed(call.id), well_formed(call.name), well_formed_object(call.arguments))
    if clean_raw is raw and all(
        a is b for a, b in zip(fields, (call.id, call.name, call.arguments), strict=True)
    ):
        return call
    return ToolCall(id=fields[0], name=fields[1], arguments=fields[2], raw_arguments=clean_raw)


def well_formed_tool_result(result: ToolResult) -> ToolResult:
    """``result`` with its tool name, content and metadata well-formed."""
    name, content = well_formed(result.tool_name), well_formed(result.content)
    metadata = well_formed_object(result.metadata)
    if name is result.tool_name and content is result.content and metadata is result.metadata:
        return result
    return replace(result, tool_name=name, content=content, metadata=metadata)


def well_formed_result(result: AgentResult) -> AgentResult:
    """``result`` with its answer, tool results, model name and metadata well-formed."""
    content, model = well_formed(result.content), well_formed(result.model)
    tools = tuple(well_formed_tool_result(r) for r in result.tool_results)
    metadata = well_formed_object(result.metadata)
    if (
        content is result.content
        and model is result.model
        and metadata is result.metadata
        and all(a is b for a, b in zip(tools, result.tool_results, strict=True))
    ):
        return result
    return replace(result, content=content, model=model, tool_results=tools, metadata=metadata)


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

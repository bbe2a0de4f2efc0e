"""The tool calls of one turn of the tool loop: the loop guard first (in call order), then
the approvals (when the agent has a gate), then the calls allowed, concurrently.

A call the loop guard refuses or an approval denies is answered to the model with why,
unrun, in its place among the results. With streaming, the approval requests and the
decisions are reported as they happen (``ApprovalRequired`` before anyone is asked,
``ApprovalDecided`` for each call).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from jarvis.domain.approvals import ApprovalDecision
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.guard import LoopVerdict
from jarvis.domain.loop.loop_run import LoopAgent, LoopRun
from jarvis.domain.run.events import LoopGuardTriggered
from jarvis.domain.run.updates import ApprovalDecided, ApprovalRequired, RunUpdate
from jarvis.domain.tools.specs import ToolResult


async def run_calls(
    agent: LoopAgent, run: LoopRun, calls: Sequence[ToolCall], results: list[ToolResult]
) -> AsyncIterator[RunUpdate]:
    """Run the calls of one turn; their results, in call order, into ``results``."""
    guard = run.guard
    verdicts = [guard.check(call) for call in calls]
    passed = [index for index, verdict in enumerate(verdicts) if verdict.allowed]
    denied: dict[int, ApprovalDecision] = {}
    if passed and run.approvals is not None:
        decisions: list[ApprovalDecision] = []
        async for update in _approve(run, [calls[i] for i in passed], decisions):
            yield update
        denied = {i: d for i, d in zip(passed, decisions, strict=True) if not d.allowed}
    runnable = [calls[index] for index in passed if index not in denied]
    executed = iter(
        await run.scope.executor.execute_all(runnable, deadline=run.deadline) if runnable else ()
    )
    blocked = False
    for index, (call, verdict) in enumerate(zip(calls, verdicts, strict=True)):
        if not verdict.allowed:
            blocked = blocked or verdict.action == "block"
            results.append(_refused(agent, run, call, verdict))
        elif index in denied:
            results.append(_denied(call, denied[index]))
        else:
            result = next(executed)
            guard.record(call, result.content)
            results.append(result)
    run.blocked_turns = run.blocked_turns + 1 if blocked and not passed else 0


async def _approve(
    run: LoopRun, calls: Sequence[ToolCall], decisions: list[ApprovalDecision]
) -> AsyncIterator[RunUpdate]:
    """Each call's decision into ``decisions`` (in call order)."""
    approvals = run.approvals
    assert approvals is not None
    screening = approvals.screen(calls, run.scope.executor.spec_for)
    if screening.asks:
        await approvals.submit(screening.asks)
        if run.streaming:
            for _index, request in screening.asks:
                yield ApprovalRequired(request=request)
    decisions.extend(await approvals.decide(screening))
    run.metadata["approvals"] = [decision.to_json() for decision in approvals.decisions]
    if run.streaming:
        for decision in decisions:
            yield ApprovalDecided(decision=decision)


def _denied(call: ToolCall, decision: ApprovalDecision) -> ToolResult:
    return ToolResult(
        tool_name=call.name,
        content=decision.denial_message(),
        success=False,
        call_id=call.id,
        metadata={"error": "approval_denied", "approval": decision.to_json()},
    )


def _refused(agent: LoopAgent, run: LoopRun, call: ToolCall, verdict: LoopVerdict) -> ToolResult:
    run.loop_events.append(
        {"tool": call.name, "action": verdict.action, "pattern": verdict.pattern}
    )
    _publish_loop_guard(agent, run, call, verdict)
    return ToolResult(
        tool_name=call.name,
        content=verdict.message,
        success=False,
        call_id=call.id,
        metadata={"error": "loop_guard", "loop_guard": verdict.action},
    )


def _publish_loop_guard(
    agent: LoopAgent, run: LoopRun, call: ToolCall, verdict: LoopVerdict
) -> None:
    bus = agent.bus
    if bus is None or verdict.action == "allow" or verdict.pattern is None:
        return
    if bus.recording is not None:
        bus.recording.loop_guard(call.name, verdict.action, verdict.pattern)
    if not bus.has_subscribers:
        return
    bus.publish(
        LoopGuardTriggered(
            agent=agent.agent_id,
            tool=call.name,
            call_id=call.id,
            action=verdict.action,
            pattern=verdict.pattern,
            arguments=call.arguments,
            turn=run.turns,
            message=verdict.message,
        )
    )

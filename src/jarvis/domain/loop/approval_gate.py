"""The approval step of the tool loop: every call of a turn gets its own decision.

The policy says ``auto``, ``ask`` or ``deny`` for each call; the calls to ask about are
submitted to the :class:`~jarvis.domain.approvals.ApprovalPort` together (the run announces
them), then decided concurrently (parallel calls of one turn each get their own answer).
What the run keeps, so that nobody is asked twice about the same thing in one run:

* a call denied (same tool, same arguments) is denied again without asking, naming the
  first decision;
* an answer for the whole tool (a terminal's *always* / *never*) decides its later calls.

Fail closed: a call whose arguments did not parse is denied without asking (nobody can
judge what it would do), and a port that fails denies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from jarvis.domain.approvals import (
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalPort,
    ApprovalRequest,
    effects_of,
)
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.tools.specs import ToolSpec


@dataclass(frozen=True, slots=True)
class ApprovalGate:
    """An agent's approvals: the policy, and the port that asks. Each run starts its own
    :class:`RunApprovals` (nothing is shared between runs)."""

    policy: ApprovalPolicy
    port: ApprovalPort

    def start(self) -> RunApprovals:
        return RunApprovals(self)


@dataclass(slots=True)
class Screening:
    """A turn's calls after the policy: ``decided[i]`` for the calls decided at once,
    ``asks`` for the others (their index in the turn and their request)."""

    decided: list[ApprovalDecision | None]
    asks: list[tuple[int, ApprovalRequest]] = field(default_factory=list)


def _key(call: ToolCall) -> tuple[str, str]:
    return (call.name.strip().lower(), call.arguments_json())


@dataclass(slots=True)
class RunApprovals:
    """The approvals of one run: what was decided, and what is remembered."""

    gate: ApprovalGate
    decisions: list[ApprovalDecision] = field(default_factory=list)
    _denied: dict[tuple[str, str], ApprovalDecision] = field(default_factory=dict)
    _per_tool: dict[str, ApprovalAnswer] = field(default_factory=dict)

    def screen(
        self, calls: Sequence[ToolCall], spec_for: Callable[[str], ToolSpec | None]
    ) -> Screening:
        """The policy's verdict on each call; the ones that need asking become requests."""
        screening = Screening(decided=[])
        for index, call in enumerate(calls):
            spec = spec_for(call.name)
            decided = self._at_once(call, spec)
            if decided is None and spec is not None:
                verdict = self.gate.policy.verdict(spec)
                request = ApprovalRequest(
                    id=call.id,
                    call=call,
                    effects=effects_of(spec),
                    reason=verdict.reason,
                    rule=verdict.rule,
                )
                screening.asks.append((index, request))
            screening.decided.append(decided)
        return screening

    def _at_once(self, call: ToolCall, spec: ToolSpec | None) -> ApprovalDecision | None:
        """The decision that needs nobody, or ``None`` when someone must be asked."""
        if spec is None:  # unknown: the executor refuses it, with the names it has
            return self._record(call, True, "unknown tool: refused by the executor")
        earlier = self._denied.get(_key(call))
        if earlier is not None:
            rule = f"denied earlier in this run ({earlier.rule})"
            return self._record(call, False, rule, earlier.reason)
        remembered = self._per_tool.get(call.name.strip().lower())
        if remembered is not None:
            return self._answered(call, remembered, asked=False)
        verdict = self.gate.policy.verdict(spec)
        if verdict.mode == "auto":
            return self._record(call, True, verdict.rule)
        if verdict.mode == "deny":
            return self._record(call, False, verdict.rule, "the approval policy denies it")
        if not call.parsed:
            rule = f"{verdict.rule}; unparsable arguments fail closed"
            return self._record(call, False, rule, "its arguments are not a JSON object")
        return None

    async def submit(self, asks: list[tuple[int, ApprovalRequest]]) -> None:
        """Submit every request of the turn (concurrently), in place: a port may answer
        with the id of the same call recorded earlier."""
        port = self.gate.port
        submitted = await asyncio.gather(*(port.submit(request) for _i, request in asks))
        asks[:] = [(index, request) for (index, _r), request in zip(asks, submitted, strict=True)]

    async def decide(self, screening: Screening) -> list[ApprovalDecision]:
        """Every call's decision, in call order: the asked ones concurrently."""
        answers = await asyncio.gather(*(self._ask(request) for _i, request in screening.asks))
        decided = list(screening.decided)
        for (index, request), answer in zip(screening.asks, answers, strict=True):
            decided[index] = self._answered(request.call, answer, asked=True, request=request)
        return [decision for decision in decided if decision is not None]

    async def _ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        remembered = self._per_tool.get(request.tool.strip().lower())
        if remembered is not None:  # answered for the whole tool meanwhile
            return remembered
        try:
            answer = await self.gate.port.decide(request)
        except Exception as exc:  # fail closed: a decision that failed is a denial
            return ApprovalAnswer(
                allow=False,
                reason=f"the approval could not be obtained ({type(exc).__name__})",
                rule="approval failed",
            )
        if answer.scope == "tool":
            self._per_tool[request.tool.strip().lower()] = answer
        return answer

    def _answered(
        self,
        call: ToolCall,
        answer: ApprovalAnswer,
        *,
        asked: bool,
        request: ApprovalRequest | None = None,
    ) -> ApprovalDecision:
        rule = answer.rule or "asked"
        if not asked:
            rule = f"answered earlier for every {call.name} call ({rule})"
        elif request is not None:
            rule = f"{request.rule}; {rule}"
        return self._record(
            call,
            answer.allow,
            rule,
            answer.reason,
            asked=asked,
            approval_id=request.id if request is not None else "",
        )

    def _record(
        self,
        call: ToolCall,
        allowed: bool,
        rule: str,
        reason: str = "",
        *,
        asked: bool = False,
        approval_id: str = "",
    ) -> ApprovalDecision:
        decision = ApprovalDecision(
            call_id=call.id,
            tool=call.name,
            allowed=allowed,
            rule=rule,
            reason=reason,
            asked=asked,
            approval_id=approval_id,
        )
        if not allowed:
            self._denied.setdefault(_key(call), decision)
        self.decisions.append(decision)
        return decision

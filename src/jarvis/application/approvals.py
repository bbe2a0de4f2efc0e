"""How a question's tool calls are approved: the policy from ``[tools.approval]``, and the
deciders every front end shares (no terminal: deny; a program's callback).

A front end picks an :class:`ApprovalChoice` per question (the port that asks and, from
``--approve`` / ``approve=``, a mode for every tool); :class:`~jarvis.application.ask.AskService`
turns it into the agent's :class:`~jarvis.domain.loop.approval_gate.ApprovalGate`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeAlias

from jarvis.domain.approvals import (
    APPROVAL_MODES,
    CODE_INTERPRETER,
    ApprovalAnswer,
    ApprovalMode,
    ApprovalPolicy,
    ApprovalPort,
    ApprovalRequest,
)
from jarvis.domain.loop.approval_gate import ApprovalGate
from jarvis.domain.ports import ReplPort, ToolPort


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalChoice:
    """The approvals of one question: who decides, and the mode that overrides the
    configuration for every tool (``None``: the configuration decides)."""

    port: ApprovalPort
    mode: ApprovalMode | None = None
    mode_source: str = "--approve"


def policy_from_settings(
    default: str, tools: Mapping[str, str], *, mode: ApprovalMode | None = None
) -> ApprovalPolicy:
    """The policy of ``[tools.approval]`` (``default`` empty: the built-in defaults)."""
    modes: dict[str, ApprovalMode] = {}
    for name, value in tools.items():
        modes[name] = _mode(value)
    return ApprovalPolicy(mode=mode, tools=modes, default=_mode(default) if default else None)


def _mode(value: str) -> ApprovalMode:
    for mode in APPROVAL_MODES:
        if value == mode:
            return mode
    raise ValueError(f"unknown approval mode {value!r} (auto, ask or deny)")


class DenyingApprovals:
    """Where nobody can be asked (no terminal, no callback): ``ask`` means deny, with a
    message the model reads."""

    def __init__(self, why: str = "no terminal to ask") -> None:
        self.why = why

    async def submit(self, request: ApprovalRequest) -> ApprovalRequest:
        return request

    async def decide(self, request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(
            allow=False,
            reason=f"it needs a person's approval and there is {self.why}",
            rule=f"{self.why}: ask means deny",
        )


ApproveResult: TypeAlias = bool | ApprovalAnswer
ApproveCallback: TypeAlias = Callable[[ApprovalRequest], ApproveResult | Awaitable[ApproveResult]]
"""``approve=``: receives the call waiting for approval; returns ``True``/``False`` or an
:class:`ApprovalAnswer` (with a reason). Sync callbacks run in a worker thread."""


@dataclass(slots=True)
class CallbackApprovals:
    """The SDK's ``approve=callable`` (sync or async). Anything but a bool or an answer,
    and any exception, denies (fail closed)."""

    callback: ApproveCallback
    rule: str = "approve callback"
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def submit(self, request: ApprovalRequest) -> ApprovalRequest:
        return request

    async def decide(self, request: ApprovalRequest) -> ApprovalAnswer:
        try:
            returned = await self._call(request)
        except Exception as exc:
            return ApprovalAnswer(
                allow=False,
                reason=f"the approval callback failed ({type(exc).__name__})",
                rule=f"{self.rule} raised {type(exc).__name__}",
            )
        if isinstance(returned, bool):
            return ApprovalAnswer(allow=returned, rule=self.rule)
        if isinstance(returned, ApprovalAnswer):
            return ApprovalAnswer(
                allow=returned.allow,
                reason=returned.reason,
                rule=returned.rule or self.rule,
                scope=returned.scope,
            )
        return ApprovalAnswer(
            allow=False,
            reason="the approval callback gave no decision",
            rule=f"{self.rule} returned {type(returned).__name__}, not a bool",
        )

    async def _call(self, request: ApprovalRequest) -> object:
        callback = self.callback
        if inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
            getattr(callback, "__call__", None)  # noqa: B004 - an instance with async __call__
        ):
            return await callback(request)  # type: ignore[misc]  # checked to be a coroutine function
        async with self._lock:  # one question at a time to a sync callback (it may prompt)
            returned = await asyncio.to_thread(callback, request)
        if inspect.isawaitable(returned):
            return await returned
        return returned


def approval_gate(
    choice: ApprovalChoice,
    policy: ApprovalPolicy | None,
    tools: Sequence[ToolPort],
    repl: ReplPort | None,
) -> ApprovalGate:
    """The gate of a run's tool calls: ``choice`` over ``policy`` (``[tools.approval]``;
    ``None``: the built-in defaults), with the sandbox that verifiably confines
    ``code_interpreter`` (``repl`` probed only when ``tools`` has that tool)."""
    sandbox = ""
    if repl is not None and any(t.spec.name == CODE_INTERPRETER for t in tools):
        isolation = repl.isolation()
        sandbox = isolation.sandbox if isolation.isolated else ""
    chosen = replace(
        policy or ApprovalPolicy(),
        mode=choice.mode,
        mode_source=choice.mode_source,
        code_sandbox=sandbox,
    )
    return ApprovalGate(policy=chosen, port=choice.port)

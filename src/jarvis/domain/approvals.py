"""Approved actions: which tool calls run at once, which wait for a person, which never run.

A tool call with side effects (code execution, a memory edit, an MCP tool its server marks
destructive, anything a plug-in declares) should not run just because a model asked. The
:class:`ApprovalPolicy` says, per tool, ``auto`` (run), ``ask`` (a person decides through
an :class:`~jarvis.domain.ports.ApprovalPort`) or ``deny`` (never run). It is pure: the
same spec and settings give the same verdict, and every verdict names the rule that made
it, so ``--verbose``, ``--json`` and the managed-agent stream can say why.

Precedence, most specific first: the run's own mode (``--approve``, the SDK's
``approve="..."``), then ``[tools.approval.tools] NAME``, then ``[tools.approval] default``,
then the built-in defaults: read-only tools ``auto``; ``code_interpreter`` ``auto`` only
while an OS or container sandbox verifiably confines it, else ``ask``; every other tool
``ask``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, get_args

from jarvis.domain.cut_text import cut_masked
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.tools.specs import ToolSpec

ApprovalMode = Literal["auto", "ask", "deny"]
APPROVAL_MODES: tuple[ApprovalMode, ...] = get_args(ApprovalMode)

ToolEffects = Literal["read_only", "side_effects", "destructive"]

CODE_INTERPRETER = "code_interpreter"

MAX_SHOWN_ARGUMENTS = 2000
"""The most characters of a call's arguments shown to the person who decides."""


def effects_of(spec: ToolSpec) -> ToolEffects:
    """What running a tool may do, by its spec's own declaration."""
    if spec.destructive:
        return "destructive"
    return "read_only" if spec.read_only else "side_effects"


def shown_arguments(
    call: ToolCall, limit: int = MAX_SHOWN_ARGUMENTS, mask: Callable[[str], str] = str
) -> str:
    """A call's arguments as compact JSON, cut to ``limit`` characters with a marker, masked
    by ``mask``: a URL the cut falls in is masked whole
    (:func:`~jarvis.domain.cut_text.cut_masked`), where masking the cut text would miss it."""
    text = call.arguments_json()
    if len(text) <= limit:
        return mask(text)
    return cut_masked(text, limit, mask) + f"…[{len(text) - limit} more characters]"


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What the policy says of one tool, and the rule that says it."""

    mode: ApprovalMode
    rule: str
    reason: str = ""
    """Why the call needs care (its side effects), shown when someone is asked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPolicy:
    """The decision rules of one run (see the module's docstring for their order).

    ``code_sandbox`` names the OS or container sandbox that verifiably confines
    ``code_interpreter`` (``""``: none was verified)."""

    mode: ApprovalMode | None = None
    mode_source: str = "--approve"
    """Where ``mode`` came from, named in the rule (``--approve``, ``approve=``)."""
    tools: Mapping[str, ApprovalMode] = field(default_factory=dict)
    default: ApprovalMode | None = None
    code_sandbox: str = ""

    def verdict(self, spec: ToolSpec) -> Verdict:
        reason = _reason(spec)
        if self.mode is not None:
            return Verdict(mode=self.mode, rule=f"{self.mode_source} {self.mode}", reason=reason)
        names: tuple[str, ...] = (spec.name, spec.name.lower())
        if spec.qualified_name:  # an MCP tool: ``SERVER.TOOL`` first (its model name varies)
            names = (spec.qualified_name, spec.qualified_name.lower(), *names)
        for name in names:
            configured = self.tools.get(name)
            if configured is not None:
                rule = f'[tools.approval.tools] {json.dumps(name)} = "{configured}"'
                return Verdict(mode=configured, rule=rule, reason=reason)
        if self.default is not None:
            rule = f'[tools.approval] default = "{self.default}"'
            return Verdict(mode=self.default, rule=rule, reason=reason)
        return self._builtin(spec, reason)

    def _builtin(self, spec: ToolSpec, reason: str) -> Verdict:
        if spec.name == CODE_INTERPRETER:
            if self.code_sandbox:
                rule = (
                    f"built-in: code_interpreter runs in a verified sandbox ({self.code_sandbox})"
                )
                return Verdict(mode="auto", rule=rule, reason=reason)
            return Verdict(
                mode="ask",
                rule="built-in: code_interpreter without a verified OS or container sandbox",
                reason=reason,
            )
        if spec.read_only:
            return Verdict(mode="auto", rule="built-in: read-only tool", reason=reason)
        effects = effects_of(spec).replace("_", " ")
        return Verdict(mode="ask", rule=f"built-in: tool with {effects}", reason=reason)


def _reason(spec: ToolSpec) -> str:
    if spec.name == CODE_INTERPRETER:
        return "it runs code the model wrote"
    effects = effects_of(spec)
    if effects == "destructive":
        return f"{spec.name} is marked destructive"
    if effects == "side_effects":
        return f"{spec.name} changes something outside the run"
    return f"{spec.name} only reads"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """One call waiting for a decision. ``id`` names it to whoever decides (the call's id,
    or the id of the same call stored earlier: see the managed-agent approvals)."""

    id: str
    call: ToolCall
    effects: ToolEffects
    reason: str
    """Why it asks: what the tool may do."""
    rule: str
    """The rule that made it ask."""

    @property
    def tool(self) -> str:
        return self.call.name

    def shown_arguments(self) -> str:
        return shown_arguments(self.call)

    def to_json(self) -> JSONObject:
        return {
            "id": self.id,
            "call_id": self.call.id,
            "tool": self.call.name,
            "arguments": self.shown_arguments(),
            "effects": self.effects,
            "reason": self.reason,
            "rule": self.rule,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalAnswer:
    """What a person (or a program deciding for one) answered.

    ``scope`` ``tool`` applies the answer to every later call of the same tool in the run
    (the terminal's *always* and *never*)."""

    allow: bool
    reason: str = ""
    rule: str = ""
    """Who answered, named in the decision (``terminal``, ``approve callback``, ``HTTP``)."""
    scope: Literal["call", "tool"] = "call"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """The decision on one call, as recorded in the run's metadata and results."""

    call_id: str
    tool: str
    allowed: bool
    rule: str
    reason: str = ""
    asked: bool = False
    approval_id: str = ""

    def to_json(self) -> JSONObject:
        data: JSONObject = {
            "call_id": self.call_id,
            "tool": self.tool,
            "decision": "allow" if self.allowed else "deny",
            "rule": self.rule,
            "asked": self.asked,
        }
        if self.reason:
            data["reason"] = self.reason
        if self.approval_id and self.approval_id != self.call_id:
            data["approval_id"] = self.approval_id
        return data

    def denial_message(self) -> str:
        """What the model reads instead of the tool's result."""
        why = f": {self.reason}" if self.reason else ""
        return (
            f"Tool call denied{why}. The call to '{self.tool}' was not run and will not be "
            "run in this conversation turn; do without it or answer with what you have."
        )


class ApprovalPort(Protocol):
    """Whoever decides the calls a policy says to ask about: a person at a terminal, a
    program's callback, a client of ``jarvis serve``.

    A request is first :meth:`submit`-ted (before the run announces it, so that an answer
    can never arrive for a request not yet known), then :meth:`decide`-d once.
    """

    async def submit(self, request: ApprovalRequest) -> ApprovalRequest:
        """Record that ``request`` waits for a decision; returns it with the id under which
        it is answered (the id of the same call recorded earlier and still undecided, or
        decided and not yet used, when there is one; else ``request.id``)."""
        ...

    async def decide(self, request: ApprovalRequest) -> ApprovalAnswer:
        """The answer on a submitted request. A port that cannot get one (no terminal, a
        timeout) denies, with a reason the model can read. Raises nothing but
        ``asyncio.CancelledError``: a failure is a denial."""
        ...

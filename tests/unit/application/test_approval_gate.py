"""A run's approval gate: the question's choice over ``[tools.approval]``, and the sandbox
that confines ``code_interpreter`` named only when the run has that tool and the REPL is
verifiably isolated."""

from __future__ import annotations

from dataclasses import replace

from jarvis.application.approvals import ApprovalChoice, approval_gate
from jarvis.domain.approvals import CODE_INTERPRETER, ApprovalPolicy
from jarvis.domain.repl import ReplIsolation
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemoryRepl, ScriptedApprovals
from jarvis.testing.tools import InMemoryTool

ISOLATED = ReplIsolation(
    network="namespace",
    processes="pid_namespace",
    user="nobody",
    environment_scrubbed=True,
    writes_confined=True,
    sandbox="bwrap",
)


class ProbedRepl(InMemoryRepl):
    """A REPL whose isolation is ``found``, counting how often it is probed."""

    def __init__(self, found: ReplIsolation) -> None:
        super().__init__()
        self.found = found
        self.probes = 0

    def isolation(self) -> ReplIsolation:
        self.probes += 1
        return self.found


def tool(name: str) -> InMemoryTool:
    return InMemoryTool(ToolSpec(name=name, description=name, parameters={"type": "object"}))


def test_the_choice_overrides_the_configured_mode_and_keeps_its_rules() -> None:
    port = ScriptedApprovals([])
    configured = ApprovalPolicy(tools={"calculator": "auto"})
    choice = ApprovalChoice(port=port, mode="deny", mode_source="approve=")
    gate = approval_gate(choice, configured, [tool("calculator")], None)
    assert gate.port is port
    assert gate.policy == replace(configured, mode="deny", mode_source="approve=")


def test_no_configured_policy_is_the_built_in_one() -> None:
    gate = approval_gate(ApprovalChoice(port=ScriptedApprovals([])), None, [tool("think")], None)
    assert gate.policy == ApprovalPolicy()


def test_the_code_sandbox_is_named_only_for_a_run_with_code_interpreter() -> None:
    repl = ProbedRepl(ISOLATED)
    choice = ApprovalChoice(port=ScriptedApprovals([]))
    without = approval_gate(choice, None, [tool("calculator")], repl)
    assert (without.policy.code_sandbox, repl.probes) == ("", 0)  # not even probed
    with_code = approval_gate(choice, None, [tool("calculator"), tool(CODE_INTERPRETER)], repl)
    assert (with_code.policy.code_sandbox, repl.probes) == ("bwrap", 1)


def test_an_unisolated_repl_names_no_sandbox() -> None:
    repl = ProbedRepl(replace(ISOLATED, network="audit_hook"))
    gate = approval_gate(
        ApprovalChoice(port=ScriptedApprovals([])), None, [tool(CODE_INTERPRETER)], repl
    )
    assert gate.policy.code_sandbox == ""
    assert repl.probes == 1

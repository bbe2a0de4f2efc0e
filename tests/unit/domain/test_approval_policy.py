"""The approval policy (pure) and the tool loop's approval step over a scripted port."""

from __future__ import annotations

import asyncio

import pytest

from jarvis.application.approvals import policy_from_settings
from jarvis.domain.approvals import ApprovalAnswer, ApprovalPolicy, effects_of
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.approval_gate import ApprovalGate
from jarvis.domain.loop.settings import ToolExecution
from jarvis.domain.loop.tool_loop import ToolUsingAgent
from jarvis.domain.run.updates import ApprovalDecided, ApprovalRequired, ToolResultReady
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemoryTool, ScriptedApprovals, ScriptedInference

READ = ToolSpec(name="lookup", description="Look up.")
WRITE = ToolSpec(name="write_note", description="Write.", side_effects=True)
WIPE = ToolSpec(name="wipe", description="Wipe.", side_effects=True, destructive_hint=True)
CODE = ToolSpec(name="code_interpreter", description="Run code.", side_effects=True)
MCP_RO = ToolSpec(name="fs.read", description="Read.", read_only_hint=True)


def test_effects_come_from_the_spec() -> None:
    assert [effects_of(s) for s in (READ, WRITE, WIPE)] == [
        "read_only",
        "side_effects",
        "destructive",
    ]
    assert ToolSpec(name="x", description="x", destructive_hint=True).read_only is False


@pytest.mark.parametrize(
    ("spec", "mode", "rule"),
    [
        (READ, "auto", "built-in: read-only tool"),
        (MCP_RO, "auto", "built-in: read-only tool"),
        (WRITE, "ask", "built-in: tool with side effects"),
        (WIPE, "ask", "built-in: tool with destructive"),
        (CODE, "ask", "built-in: code_interpreter without a verified OS or container sandbox"),
    ],
)
def test_built_in_defaults(spec: ToolSpec, mode: str, rule: str) -> None:
    verdict = ApprovalPolicy().verdict(spec)
    assert (verdict.mode, verdict.rule) == (mode, rule)


def test_code_interpreter_runs_unasked_only_in_a_verified_sandbox() -> None:
    verdict = ApprovalPolicy(code_sandbox="bubblewrap").verdict(CODE)
    assert verdict.mode == "auto"
    assert "verified sandbox (bubblewrap)" in verdict.rule


def test_precedence_run_mode_then_tool_entry_then_default() -> None:
    policy = policy_from_settings("deny", {"write_note": "auto"})
    assert policy.verdict(WRITE).rule == '[tools.approval.tools] "write_note" = "auto"'
    assert policy.verdict(READ).rule == '[tools.approval] default = "deny"'
    assert policy.verdict(READ).mode == "deny"
    overridden = policy_from_settings("deny", {"write_note": "auto"}, mode="ask")
    assert (overridden.verdict(WRITE).mode, overridden.verdict(WRITE).rule) == (
        "ask",
        "--approve ask",
    )
    with pytest.raises(ValueError, match="unknown approval mode"):
        policy_from_settings("sometimes", {})


MCP_WRITE = ToolSpec(
    name="fs_write_file",
    description="Write a file.",
    side_effects=True,
    qualified_name="fs.write_file",
)


def test_an_mcp_tool_is_ruled_by_its_server_and_tool_name() -> None:
    """``SERVER.TOOL`` is the key the README documents; the model's name (which may carry
    a suffix when two servers' tools collide) works too, and the qualified one wins."""
    denied = policy_from_settings("auto", {"fs.write_file": "deny"}).verdict(MCP_WRITE)
    assert (denied.mode, denied.rule) == ("deny", '[tools.approval.tools] "fs.write_file" = "deny"')
    by_model_name = policy_from_settings("auto", {"fs_write_file": "deny"}).verdict(MCP_WRITE)
    assert by_model_name.mode == "deny"
    both = policy_from_settings("", {"fs.write_file": "deny", "fs_write_file": "auto"})
    assert both.verdict(MCP_WRITE).mode == "deny"
    other_server = policy_from_settings("auto", {"gh.write_file": "deny"}).verdict(MCP_WRITE)
    assert other_server.mode == "auto"


def _calls(*calls: ToolCall) -> Completion:
    return Completion(content="", tool_calls=calls, finish_reason="tool_calls")


def _agent(
    engine: ScriptedInference, port: ScriptedApprovals, *tools: InMemoryTool
) -> ToolUsingAgent:
    gate = ApprovalGate(policy=ApprovalPolicy(), port=port)
    return ToolUsingAgent(engine, "m", tools=tools, execution=ToolExecution(approvals=gate))


async def test_the_loop_announces_asks_before_deciding_and_denied_calls_never_run() -> None:
    write = InMemoryTool(WRITE)
    lookup = InMemoryTool(READ)
    gate = asyncio.Event()
    port = ScriptedApprovals(
        [ApprovalAnswer(allow=False, reason="not now", rule="test")], gate=gate
    )
    engine = ScriptedInference(
        [
            _calls(
                ToolCall(id="r", name="lookup", arguments={}),
                ToolCall(id="w", name="write_note", arguments={"text": "hi"}),
            ),
            _calls(ToolCall(id="w2", name="write_note", arguments={"text": "hi"})),
            "Done.",
        ]
    )
    agent = _agent(engine, port, write, lookup)
    updates = []
    async for update in agent.astream("go"):
        updates.append(update)
        if isinstance(update, ApprovalRequired):
            assert write.calls == []  # announced before anyone decides
            gate.set()
    required = [u.request for u in updates if isinstance(u, ApprovalRequired)]
    assert [r.id for r in required] == ["w"]
    decided = [u.decision for u in updates if isinstance(u, ApprovalDecided)]
    assert [(d.call_id, d.allowed) for d in decided] == [("r", True), ("w", False), ("w2", False)]
    assert decided[2].rule.startswith("denied earlier in this run")
    assert [r.id for r in port.decided] == ["w"]  # never asked twice
    assert write.calls == []
    assert lookup.calls == [{}]
    results = [u.result for u in updates if isinstance(u, ToolResultReady)]
    assert results[1].metadata["error"] == "approval_denied"
    assert "not now" in results[1].content


async def test_without_a_gate_every_call_runs_as_before() -> None:
    write = InMemoryTool(WRITE)
    engine = ScriptedInference([_calls(ToolCall(id="w", name="write_note", arguments={})), "Ok."])
    result = await ToolUsingAgent(engine, "m", tools=(write,)).arun("go")
    assert write.calls == [{}]
    assert "approvals" not in result.metadata


def test_the_command_line_knows_the_same_modes() -> None:
    from jarvis.domain.approvals import APPROVAL_MODES
    from jarvis.entrypoints.cli.options import APPROVE_MODES

    assert sorted(APPROVE_MODES) == sorted(APPROVAL_MODES)

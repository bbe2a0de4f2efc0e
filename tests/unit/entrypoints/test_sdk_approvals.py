"""Approving tool calls through the SDK: ``approve=`` callbacks, sync and async, and modes."""

from __future__ import annotations

import asyncio
import threading

import pytest

from jarvis import Answer, ApprovalAnswer, ApprovalRequest, Jarvis, tool
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.ports import ToolPort
from jarvis.testing import ScriptedInference


def calls(*pairs: tuple[str, str]) -> Completion:
    return Completion(
        content="",
        tool_calls=tuple(
            ToolCall(id=f"c{i}", name=name, arguments={"path": path})
            for i, (name, path) in enumerate(pairs)
        ),
        finish_reason="tool_calls",
    )


def make_tools() -> tuple[list[str], ToolPort, ToolPort]:
    deleted: list[str] = []

    @tool(destructive=True)
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        deleted.append(path)
        return f"deleted {path}"

    @tool
    def word_count(text: str) -> int:
        """Count words.

        Args:
            text: The text.
        """
        return len(text.split())

    return deleted, delete_file, word_count


def decisions_of(answer: Answer) -> list[JSONObject]:
    found = answer.metadata["approvals"]
    assert isinstance(found, list)
    return [item for item in found if isinstance(item, dict)]


def tool_messages(engine: ScriptedInference) -> list[str]:
    return [m.content for m in engine.requests[-1].messages if m.role.value == "tool"]


def test_a_sync_callback_gets_each_parallel_call_and_its_answers_apply() -> None:
    deleted, delete_file, word_count = make_tools()
    seen: list[ApprovalRequest] = []
    threads: list[str] = []

    def approve(request: ApprovalRequest) -> bool | ApprovalAnswer:
        seen.append(request)
        threads.append(threading.current_thread().name)
        if request.call.arguments["path"] == "a.txt":
            return True
        return ApprovalAnswer(allow=False, reason="b.txt is precious")

    engine = ScriptedInference(
        [calls(("delete_file", "a.txt"), ("delete_file", "b.txt")), "Deleted a.txt only."]
    )
    with Jarvis(inference=engine, agent="orchestrator", tools=[delete_file, word_count]) as j:
        answer = j.ask_full("Delete a.txt and b.txt", approve=approve)
    assert deleted == ["a.txt"]
    assert [r.tool for r in seen] == ["delete_file", "delete_file"]
    assert seen[0].effects == "destructive"
    assert seen[0].rule == "built-in: tool with destructive"
    assert "marked destructive" in seen[0].reason
    assert all(
        name != "jarvis-sdk-loop" for name in threads
    )  # a sync callback never blocks the loop
    decisions = decisions_of(answer)
    assert [d["decision"] for d in decisions] == ["allow", "deny"]
    assert decisions[1]["reason"] == "b.txt is precious"
    assert "approve callback" in str(decisions[1]["rule"])
    told = tool_messages(engine)
    assert told[0] == "deleted a.txt"
    assert "Tool call denied: b.txt is precious" in told[1]


async def test_an_async_callback_and_a_denied_call_is_never_asked_again_in_the_run() -> None:
    deleted, delete_file, word_count = make_tools()
    asked: list[str] = []

    async def approve(request: ApprovalRequest) -> bool:
        await asyncio.sleep(0)
        asked.append(request.call.id)
        return False

    engine = ScriptedInference(
        [calls(("delete_file", "a.txt")), calls(("delete_file", "a.txt")), "Gave up."]
    )
    with Jarvis(inference=engine, agent="orchestrator", tools=[delete_file, word_count]) as j:
        answer = await j.aask_full("Delete a.txt", approve=approve)
    assert deleted == []
    assert asked == ["c0"]  # the same call again is denied without asking
    decisions = decisions_of(answer)
    assert "denied earlier in this run" in str(decisions[1]["rule"])


def test_read_only_tools_run_unasked_and_failures_fail_closed() -> None:
    deleted, delete_file, word_count = make_tools()

    def approve(request: ApprovalRequest) -> bool:
        raise RuntimeError("boom")

    engine = ScriptedInference(
        [
            Completion(
                content="",
                tool_calls=(
                    ToolCall(id="w", name="word_count", arguments={"text": "a b c"}),
                    ToolCall(id="d", name="delete_file", arguments={"path": "a.txt"}),
                ),
                finish_reason="tool_calls",
            ),
            "Done.",
        ]
    )
    with Jarvis(inference=engine, agent="orchestrator", tools=[delete_file, word_count]) as j:
        answer = j.ask_full("Count and delete", approve=approve)
    assert deleted == []
    decisions = decisions_of(answer)
    assert decisions[0]["rule"] == "built-in: read-only tool"
    assert decisions[1]["decision"] == "deny"
    assert "raised RuntimeError" in str(decisions[1]["rule"])


def test_unparsable_arguments_are_denied_without_asking() -> None:
    deleted, delete_file, word_count = make_tools()
    asked: list[str] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request.id)
        return True

    engine = ScriptedInference(
        [
            Completion(
                content="",
                tool_calls=(ToolCall(id="x", name="delete_file", raw_arguments="{not json"),),
                finish_reason="tool_calls",
            ),
            "Done.",
        ]
    )
    with Jarvis(inference=engine, agent="orchestrator", tools=[delete_file, word_count]) as j:
        answer = j.ask_full("Delete", approve=approve)
    assert asked == []
    assert deleted == []
    decisions = decisions_of(answer)
    assert "unparsable arguments fail closed" in str(decisions[0]["rule"])


def test_without_a_callback_ask_means_deny_and_modes_override() -> None:
    deleted, delete_file, word_count = make_tools()
    engine = ScriptedInference([calls(("delete_file", "a.txt")), "No."])
    with Jarvis(inference=engine, agent="orchestrator", tools=[delete_file, word_count]) as j:
        answer = j.ask_full("Delete a.txt")
        assert deleted == []
        assert "no approve= callback" in tool_messages(engine)[0]
        engine.add(calls(("delete_file", "a.txt")), "Yes.")
        answer = j.ask_full("Delete a.txt", approve="auto")
        assert deleted == ["a.txt"]
        decisions = decisions_of(answer)
        assert decisions[0]["rule"] == "approve= auto"
        with pytest.raises(ConfigurationError, match="Unknown approve="):
            j.ask_full("Delete a.txt", approve="sometimes")

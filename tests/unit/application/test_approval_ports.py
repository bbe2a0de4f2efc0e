"""Every approval port passes one contract: the scripted fake, the SDK's callback, the
terminal prompt (answers typed into a scripted reader), and managed agents' stored
approvals (answered as ``POST .../approvals/{id}`` answers them)."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest

from contracts.approval_port_contract import ApprovalPortContract, Deciding, request
from jarvis.application.approvals import CallbackApprovals, DenyingApprovals
from jarvis.application.managed_approvals import ManagedApprovals, StoredApprovals
from jarvis.domain.approvals import ApprovalAnswer, ApprovalPort, ApprovalRequest
from jarvis.entrypoints.cli.approval_prompt import TerminalApprovals
from jarvis.testing import InMemoryApprovalStore, ScriptedApprovals


class TestScriptedApprovals(ApprovalPortContract[ScriptedApprovals]):
    @pytest.fixture
    def deciding(self) -> Deciding:
        return lambda answers: ScriptedApprovals(answers)


class TestCallbackApprovals(ApprovalPortContract[CallbackApprovals]):
    @pytest.fixture
    def deciding(self) -> Deciding:
        def make(answers: list[bool]) -> ApprovalPort:
            queue = deque(answers)
            return CallbackApprovals(lambda _request: queue.popleft())

        return make


class TestTerminalApprovals(ApprovalPortContract[TerminalApprovals]):
    @pytest.fixture
    def deciding(self) -> Deciding:
        def make(answers: list[bool]) -> ApprovalPort:
            typed = deque("y" if allow else "n" for allow in answers)

            async def read(prompt: str) -> str | None:
                return typed.popleft() if typed else None

            return TerminalApprovals(read, write=lambda _text: None)

        return make


class TestStoredApprovals(ApprovalPortContract[StoredApprovals]):
    @pytest.fixture
    def deciding(self) -> Deciding:
        def make(answers: list[bool]) -> ApprovalPort:
            approvals = ManagedApprovals(InMemoryApprovalStore(), timeout=60)
            port = StoredApprovals(approvals, "a1")
            queue = deque(answers)

            class Answering:
                """Answers each request as an HTTP client would, once it is recorded."""

                async def submit(self, request: ApprovalRequest) -> ApprovalRequest:
                    return await port.submit(request)

                async def decide(self, request: ApprovalRequest) -> ApprovalAnswer:
                    waiting = asyncio.ensure_future(port.decide(request))
                    await asyncio.sleep(0)  # the run waits first, then the answer comes
                    allow = queue.popleft()
                    await approvals.answer("a1", request.id, allow=allow, reason="")
                    return await waiting

            return Answering()

        return make


async def test_a_port_without_anyone_to_ask_denies_with_a_reason_for_the_model() -> None:
    port = DenyingApprovals("no terminal to ask")
    answer = await port.decide(await port.submit(request()))
    assert answer.allow is False
    assert answer.rule == "no terminal to ask: ask means deny"
    assert "no terminal" in answer.reason


async def test_the_terminal_asks_again_on_nonsense_and_remembers_always_and_never() -> None:
    typed = deque(["maybe", "a", "never"])
    shown: list[str] = []

    async def read(prompt: str) -> str | None:
        shown.append(prompt)
        return typed.popleft()

    port = TerminalApprovals(read, write=shown.append)
    first = await port.decide(request())
    assert (first.allow, first.scope, first.rule) == (True, "tool", "terminal: always delete_file")
    again = await port.decide(request("c2", "b.txt"))
    assert again == first  # not asked: "always" holds for the tool
    assert sum("please answer" in line for line in shown) == 1
    assert any("delete_file(" in line and "why:" in line for line in shown)


async def test_the_terminal_shows_bounded_and_escaped_arguments() -> None:
    shown: list[str] = []

    async def read(prompt: str) -> str | None:
        return None  # the input ended: denied

    port = TerminalApprovals(read, write=shown.append)
    answer = await port.decide(request(path="\x1b[2J" + "x" * 10_000))
    assert answer.allow is False
    assert "\x1b" not in shown[0]
    assert len(shown[0]) < 2500
    assert "more characters]" in shown[0]


async def test_a_call_id_an_engine_uses_again_gets_an_approval_of_its_own() -> None:
    approvals = ManagedApprovals(InMemoryApprovalStore(), timeout=60)
    port = StoredApprovals(approvals, "a1")
    first = await port.submit(request("call_0", "a.txt"))
    other = await port.submit(request("call_0", "b.txt"))  # the same id, another call
    assert first.id == "call_0"
    assert other.id.startswith("call_0.")
    await approvals.answer("a1", "call_0", allow=True, reason="")
    assert (await port.decide(first)).allow is True
    again = await port.submit(request("call_0", "a.txt"))  # the first one was used
    assert again.id not in ("call_0", other.id)

"""The behaviour every ApprovalPort implementation shows (fake and real alike).

A subclass provides ``deciding``: a factory that returns a port whose next decisions are
the given booleans, in the order the requests are decided (how it gets them is its own
business: a script, a typed answer, an HTTP client).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

import pytest

from jarvis.domain.approvals import ApprovalPort, ApprovalRequest
from jarvis.domain.llm.messages import ToolCall

PortT = TypeVar("PortT", bound=ApprovalPort)

Deciding = Callable[[list[bool]], ApprovalPort]


def request(call_id: str = "call_1", path: str = "a.txt") -> ApprovalRequest:
    return ApprovalRequest(
        id=call_id,
        call=ToolCall(id=call_id, name="delete_file", arguments={"path": path}),
        effects="destructive",
        reason="delete_file is marked destructive",
        rule="built-in: tool with destructive",
    )


class ApprovalPortContract(Generic[PortT]):
    """Subclass with a ``deciding`` fixture (see the module docstring)."""

    @pytest.fixture
    def deciding(self) -> Deciding:
        raise NotImplementedError("subclass must provide the `deciding` fixture")

    async def test_submit_keeps_the_call_and_names_an_id(self, deciding: Deciding) -> None:
        port = deciding([True])
        submitted = await port.submit(request())
        assert submitted.call == request().call
        assert submitted.id
        assert (submitted.reason, submitted.rule) == (request().reason, request().rule)

    async def test_an_allowed_call_is_allowed_and_says_by_whom(self, deciding: Deciding) -> None:
        port = deciding([True])
        answer = await port.decide(await port.submit(request()))
        assert answer.allow is True
        assert answer.rule

    async def test_a_denied_call_is_denied(self, deciding: Deciding) -> None:
        port = deciding([False])
        answer = await port.decide(await port.submit(request()))
        assert answer.allow is False
        assert answer.rule

    async def test_parallel_requests_each_get_their_own_answer(self, deciding: Deciding) -> None:
        port = deciding([True, False])
        first = await port.submit(request("c1", "a.txt"))
        second = await port.submit(request("c2", "b.txt"))
        answers = [await port.decide(first), await port.decide(second)]
        assert [a.allow for a in answers] == [True, False]

    async def test_concurrent_decisions_all_end(self, deciding: Deciding) -> None:
        port = deciding([True, True, True])
        submitted = [await port.submit(request(f"c{i}", f"{i}.txt")) for i in range(3)]
        answers = await asyncio.gather(*(port.decide(r) for r in submitted))
        assert all(answer.allow for answer in answers)

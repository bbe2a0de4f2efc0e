"""The behaviour every session, operator and approval store that share a database show for
the writes of a run that name their owner (fake and real alike; see
:mod:`jarvis.domain.owners`): such a write applies while the definition it names is stored
with the incarnation it names, and never once it was deleted, even if a definition of the
same id was created again since.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from contracts.approval_store_contract import pending as call
from jarvis.domain.approval_store import ApprovalStorePort
from jarvis.domain.llm.messages import Message
from jarvis.domain.managed_agents import ManagedAgent, ManagedAgentStorePort
from jarvis.domain.managed_agents import owner_of as agent_owner
from jarvis.domain.managed_agents import session_id_of as agent_session
from jarvis.domain.operators import DEFINITION_PREFIX, Operator, operator_to_record, state_key
from jarvis.domain.operators import owner_of as operator_owner
from jarvis.domain.operators import session_id_of as operator_session
from jarvis.domain.owners import OwnerGoneError, vacancy
from jarvis.domain.ports import OperatorStorePort, SessionStorePort
from jarvis.domain.sessions.records import SessionMessage


@dataclass(frozen=True, slots=True)
class SharedStores:
    """The stores of one database: conversations, operator state, managed agents and their
    runs' approvals."""

    sessions: SessionStorePort
    operators: OperatorStorePort
    agents: ManagedAgentStorePort
    approvals: ApprovalStorePort


def said(text: str) -> list[SessionMessage]:
    return [SessionMessage(message=Message.assistant(text))]


async def add_operator(stores: SharedStores, operator: Operator) -> None:
    """Store ``operator``'s definition as ``OperatorService.add`` does."""
    await stores.operators.put_state(DEFINITION_PREFIX + operator.id, operator_to_record(operator))


class OwnedWritesContract:
    """Subclass with a ``stores`` fixture returning fresh, empty stores of one database."""

    @pytest.fixture
    def stores(self) -> SharedStores:
        raise NotImplementedError("subclass must provide the `stores` fixture")

    async def test_a_run_writes_while_its_agent_is_stored_and_updated(
        self, stores: SharedStores
    ) -> None:
        agent = ManagedAgent(id="victim", incarnation="a1")
        await stores.agents.put(agent)
        await stores.sessions.append_records(
            agent_session("victim"), said("one"), owner=agent_owner(agent)
        )
        await stores.agents.put(ManagedAgent(id="victim", system_prompt="Other.", incarnation="a1"))
        await stores.sessions.append_records(
            agent_session("victim"), said("two"), owner=agent_owner(agent)
        )
        loaded = await stores.sessions.load(agent_session("victim"))
        assert [m.content for m in loaded] == ["one", "two"]

    async def test_a_deleted_agent_gets_nothing_even_when_created_again(
        self, stores: SharedStores
    ) -> None:
        old = await deleted_victim(stores)
        with pytest.raises(OwnerGoneError, match="managed agent 'victim' was deleted"):
            await stores.sessions.append_records(
                agent_session("victim"), said("late"), owner=agent_owner(old)
            )
        assert await stores.sessions.load(agent_session("victim")) == ()
        assert await stores.sessions.sessions() == []  # not even an empty session
        new = ManagedAgent(id="victim", system_prompt="New.", incarnation="new")
        await stores.agents.put(new)
        with pytest.raises(OwnerGoneError):
            await stores.sessions.append_records(
                agent_session("victim"), said("late"), owner=agent_owner(old)
            )
        await stores.sessions.append_records(
            agent_session("victim"), said("mine"), owner=agent_owner(new)
        )
        loaded = await stores.sessions.load(agent_session("victim"))
        assert [m.content for m in loaded] == ["mine"]

    async def test_an_agent_s_conversation_is_deleted_for_it_while_it_is_stored(
        self, stores: SharedStores
    ) -> None:
        agent = ManagedAgent(id="victim", incarnation="a1")
        await stores.agents.put(agent)
        await stores.sessions.append_records(
            agent_session("victim"), said("one"), owner=agent_owner(agent)
        )
        await stores.sessions.delete(agent_session("victim"), owner=agent_owner(agent))
        assert await stores.sessions.load(agent_session("victim")) == ()
        assert await stores.sessions.sessions() == []
        await stores.sessions.delete(agent_session("victim"), owner=agent_owner(agent))  # none

    async def test_a_deleted_agent_s_conversation_deletion_leaves_its_successor_s_alone(
        self, stores: SharedStores
    ) -> None:
        old = await deleted_victim(stores)
        with pytest.raises(OwnerGoneError, match="managed agent 'victim' was deleted"):
            await stores.sessions.delete(agent_session("victim"), owner=agent_owner(old))
        new = ManagedAgent(id="victim", system_prompt="New.", incarnation="new")
        await stores.agents.put(new)
        await stores.sessions.append_records(
            agent_session("victim"), said("mine"), owner=agent_owner(new)
        )
        with pytest.raises(OwnerGoneError):
            await stores.sessions.delete(agent_session("victim"), owner=agent_owner(old))
        loaded = await stores.sessions.load(agent_session("victim"))
        assert [m.content for m in loaded] == ["mine"]
        await stores.sessions.delete(agent_session("victim"), owner=agent_owner(new))
        assert await stores.sessions.sessions() == []

    async def test_a_run_records_takes_and_expires_approvals_while_its_agent_is_stored(
        self, stores: SharedStores
    ) -> None:
        agent = ManagedAgent(id="victim", incarnation="a1")
        await stores.agents.put(agent)
        owner = agent_owner(agent)
        recorded = await stores.approvals.add(call("c0", agent="victim"), owner=owner)
        assert recorded == call("c0", agent="victim")
        await stores.approvals.decide("victim", "c0", allow=True, reason="", now_us=1)
        used = await stores.approvals.use("victim", "c0", owner=owner)
        assert used is not None
        assert used.allowed
        await stores.approvals.add(call("c1", agent="victim", arguments="{}"), owner=owner)
        assert await stores.approvals.expire("victim", "c1", owner=owner) is True
        assert await stores.approvals.pending("victim", limit=10) == []
        await stores.approvals.add(call("c2", agent="victim", arguments="[]"), owner=owner)
        await stores.approvals.forget("victim", owner=owner)  # the agent is being deleted
        assert await stores.approvals.get("victim", "c2") is None

    async def test_a_deleted_agent_s_run_touches_no_approval_of_its_successor(
        self, stores: SharedStores
    ) -> None:
        old = await deleted_victim(stores)
        with pytest.raises(OwnerGoneError, match="managed agent 'victim' was deleted"):
            await stores.approvals.add(call("c0", agent="victim"), owner=agent_owner(old))
        new = ManagedAgent(id="victim", incarnation="new")
        await stores.agents.put(new)
        with pytest.raises(OwnerGoneError):
            await stores.approvals.add(call("c0", agent="victim"), owner=agent_owner(old))
        assert await stores.approvals.pending("victim", limit=10) == []
        for approval in (call("c0", agent="victim"), call("c1", agent="victim", arguments="1")):
            await stores.approvals.add(approval, owner=agent_owner(new))
        await stores.approvals.decide("victim", "c0", allow=True, reason="", now_us=1)
        with pytest.raises(OwnerGoneError):  # engines reuse call ids: "c0" is the new one's
            await stores.approvals.use("victim", "c0", owner=agent_owner(old))
        with pytest.raises(OwnerGoneError):
            await stores.approvals.expire("victim", "c1", owner=agent_owner(old))
        with pytest.raises(OwnerGoneError):  # a deletion of the old one, read before
            await stores.approvals.forget("victim", owner=agent_owner(old))
        listed = await stores.approvals.pending("victim", limit=10)
        assert [(row.id, row.status) for row in listed] == [("c0", "allowed"), ("c1", "pending")]

    async def test_a_tick_writes_state_and_history_while_its_operator_is_stored(
        self, stores: SharedStores
    ) -> None:
        operator = Operator(id="op1", prompt="Task.", incarnation="t1")
        await add_operator(stores, operator)
        owner = operator_owner(operator)
        await stores.operators.put_state(state_key("op1"), "kept", owner=owner)
        await stores.sessions.append_records(operator_session("op1"), said("done"), owner=owner)
        assert await stores.operators.get_state(state_key("op1")) == "kept"
        assert [m.content for m in await stores.sessions.load(operator_session("op1"))] == ["done"]

    async def test_a_removed_operator_s_tick_writes_nothing_into_its_successor(
        self, stores: SharedStores
    ) -> None:
        old = Operator(id="op1", prompt="Old task.", incarnation="old")
        await add_operator(stores, old)
        assert await stores.operators.delete_key(DEFINITION_PREFIX + "op1")
        for _ in range(2):  # removed, then added again under the same name
            with pytest.raises(OwnerGoneError, match="operator 'op1' was deleted"):
                await stores.operators.put_state(
                    state_key("op1"), "old answer", owner=operator_owner(old)
                )
            with pytest.raises(OwnerGoneError):
                await stores.sessions.append_records(
                    operator_session("op1"), said("old answer"), owner=operator_owner(old)
                )
            assert await stores.operators.get_state(state_key("op1")) is None
            assert await stores.sessions.load(operator_session("op1")) == ()
            await add_operator(stores, Operator(id="op1", prompt="New task.", incarnation="new"))

    async def test_an_operator_s_history_is_deleted_for_it_only_while_it_is_stored(
        self, stores: SharedStores
    ) -> None:
        """A removal deletes the history of the operator it read; read before another
        client removed it and added it again, it leaves the new one's history alone."""
        old = Operator(id="op1", prompt="Old task.", incarnation="old")
        await add_operator(stores, old)
        owner = operator_owner(old)
        await stores.sessions.append_records(operator_session("op1"), said("old"), owner=owner)
        await stores.sessions.delete(operator_session("op1"), owner=owner)
        assert await stores.sessions.sessions() == []
        assert await stores.operators.delete_key(DEFINITION_PREFIX + "op1", owner=owner)
        new = Operator(id="op1", prompt="New task.", incarnation="new")
        await add_operator(stores, new)
        await stores.sessions.append_records(
            operator_session("op1"), said("mine"), owner=operator_owner(new)
        )
        with pytest.raises(OwnerGoneError, match="operator 'op1' was deleted"):
            await stores.sessions.delete(operator_session("op1"), owner=owner)
        assert [m.content for m in await stores.sessions.load(operator_session("op1"))] == ["mine"]

    async def test_a_definition_stored_before_incarnations_keeps_its_runs_writing(
        self, stores: SharedStores
    ) -> None:
        legacy = Operator(id="op1", prompt="Task.")  # its record holds no incarnation
        await add_operator(stores, legacy)
        await stores.operators.put_state(state_key("op1"), 1, owner=operator_owner(legacy))
        agent = ManagedAgent(id="old")
        await stores.agents.put(agent)
        await stores.sessions.append_records(
            agent_session("old"), said("kept"), owner=agent_owner(agent)
        )
        assert await stores.operators.get_state(state_key("op1")) == 1
        assert len(await stores.sessions.load(agent_session("old"))) == 1

    async def test_an_agent_s_leftovers_are_cleared_for_its_vacancy_only_while_none_is(
        self, stores: SharedStores
    ) -> None:
        """A creation clears what an earlier agent of the id left (its conversation, its
        approvals) for the id's vacancy: never what an agent created meanwhile by another
        process keeps, and the check leaves no definition behind."""
        new = ManagedAgent(id="victim", incarnation="new")
        free = vacancy(agent_owner(new))
        await stores.sessions.append_records(agent_session("victim"), said("left"))
        await stores.approvals.add(call("c0", agent="victim"))
        await stores.sessions.delete(agent_session("victim"), owner=free)
        await stores.approvals.forget("victim", owner=free)
        assert await stores.sessions.sessions() == []
        assert await stores.approvals.pending("victim", limit=10) == []
        assert await stores.agents.count() == 0  # the check stored nothing
        assert await stores.agents.create(new) is True
        await stores.sessions.append_records(
            agent_session("victim"), said("mine"), owner=agent_owner(new)
        )
        await stores.approvals.add(call("c1", agent="victim"), owner=agent_owner(new))
        with pytest.raises(OwnerGoneError, match="managed agent 'victim' was created meanwhile"):
            await stores.sessions.delete(agent_session("victim"), owner=free)
        with pytest.raises(OwnerGoneError):
            await stores.approvals.forget("victim", owner=free)
        assert [m.content for m in await stores.sessions.load(agent_session("victim"))] == ["mine"]
        assert [a.id for a in await stores.approvals.pending("victim", limit=10)] == ["c1"]
        assert await stores.agents.get("victim") == new

    async def test_an_operator_s_history_is_cleared_for_its_vacancy_only_while_none_is(
        self, stores: SharedStores
    ) -> None:
        new = Operator(id="op1", prompt="New task.", incarnation="new")
        free = vacancy(operator_owner(new))
        await stores.sessions.append_records(operator_session("op1"), said("left"))
        await stores.sessions.delete(operator_session("op1"), owner=free)
        assert await stores.sessions.sessions() == []
        assert await stores.operators.state_keys(DEFINITION_PREFIX) == []
        await add_operator(stores, new)
        await stores.sessions.append_records(
            operator_session("op1"), said("mine"), owner=operator_owner(new)
        )
        with pytest.raises(OwnerGoneError, match="operator 'op1' was created meanwhile"):
            await stores.sessions.delete(operator_session("op1"), owner=free)
        assert [m.content for m in await stores.sessions.load(operator_session("op1"))] == ["mine"]

    async def test_writes_without_an_owner_are_unchanged(self, stores: SharedStores) -> None:
        await stores.sessions.append_records("plain", said("free"))
        await stores.operators.put_state("operator:none:state", "free")
        await stores.approvals.add(call("c0", agent="nobody"))
        assert len(await stores.sessions.load("plain")) == 1
        assert await stores.operators.get_state("operator:none:state") == "free"
        assert await stores.approvals.expire("nobody", "c0") is True


async def deleted_victim(stores: SharedStores) -> ManagedAgent:
    """``victim``'s definition, stored and then deleted: what a late run still names."""
    old = ManagedAgent(id="victim", incarnation="old")
    await stores.agents.put(old)
    assert await stores.agents.delete("victim", old.incarnation)
    return old

"""What a tick writes through (its binding's stores) is refused once its operator is
removed, even when an operator of the same name was added since: a note ``memory_store``
keeps, the state, the history. The scheduler's progress is tested in
``test_operator_schedules.py``, a whole tick through the CLI in
``tests/integration/test_operators_cli.py``."""

from __future__ import annotations

import pytest

from jarvis.application.operators import OperatorService
from jarvis.application.registry import builtin_agents
from jarvis.domain.agents.memory_store import MemoryStoreTool
from jarvis.domain.llm.messages import Message
from jarvis.domain.operators import Operator, session_id_of, state_key
from jarvis.domain.owners import OwnerGoneError
from jarvis.testing import InMemorySessionStore
from jarvis.testing.operators import InMemoryOperatorStore


async def test_a_tick_s_stores_refuse_its_writes_once_its_operator_is_replaced() -> None:
    store = InMemoryOperatorStore()
    sessions = InMemorySessionStore(owners=store.holds)
    service = OperatorService(store=store, sessions=sessions, registry=builtin_agents())
    old = await service.add(Operator(id="op1", prompt="Old task."))
    binding = service.binding(old, "")
    notes = MemoryStoreTool(binding.store, "op1")
    assert (await notes.execute({"key": "seen", "value": "kept while it exists"})).success
    await service.remove("op1")
    await service.add(Operator(id="op1", prompt="New task."))
    with pytest.raises(OwnerGoneError, match="operator 'op1' was deleted while it ran"):
        await notes.execute({"key": "seen", "value": "old"})
    with pytest.raises(OwnerGoneError):
        await binding.store.put_state(state_key("op1"), "old answer")
    with pytest.raises(OwnerGoneError):
        await binding.sessions.append(session_id_of("op1"), [Message.user("Old task.")])
    assert await store.state_keys("operator:op1:") == []
    assert await service.history("op1") == ()
    fresh = MemoryStoreTool(service.binding(await service.get("op1"), "").store, "op1")
    assert (await fresh.execute({"key": "seen", "value": "new"})).success
